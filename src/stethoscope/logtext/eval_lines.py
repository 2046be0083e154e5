"""Which values of a console line without a step counter are an evaluation's, read at the step before it.

- Eval-named values beside others (`loss=0.5 val_loss=0.7` after step N): the eval's at N; the train loss is N's own
  record (an epoch's record that prints both, `epoch: 1 .. train loss .. valid loss`, or the line under an
  epoch's head, Keras 1's `Epoch 3/15` then `64s - loss: 1.46 - acc: .. - val_loss: ..`, keeps both).
- A line that prints the loss under the name the step records print it, beside a measure no step record prints,
  once step records with a loss were read (HRNet's `Loss: 0.985, MeanIU:  0.4960, Best_mIoU:  0.5217` after its
  `Epoch: [e/T] Iter:[i/N], .., Loss: 2.69, Acc: ..` lines): the validation's record, every value the eval's. A
  line of names the step records print, or beside a time, an epoch or a rate (an epoch's train summary), stays
  as it was.
- A line with a step counter that prints a train loss beside the eval's, no other value of a step's, (nanoGPT's estimate every eval_interval, `step 2000: train
  loss 2.1234, val loss 2.2345`, beside its `iter 2000: loss ..` records): its train loss is an estimate over eval
  batches, `eval/train_loss`, not the step's record; when no other record of the log carries a train loss, the
  estimates are the run's train loss after all (`stand_ins`: a log of those lines alone).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from stethoscope.detect.names import names_time_unit
from stethoscope.logtext.console_epochs import epoch_step
from stethoscope.logtext.console_names import HELD_OUT
from stethoscope.records import EVAL_LOSS, LOSS

TRAIN_ESTIMATE = "eval/train_loss"  # the train loss an eval estimates over its batches (nanoGPT's `estimate_loss`)
_STEP_SIDE = ("train/", "opt/", "perf/", "grad/", "memory/")  # a step's own values: the line is its record
_TRAIN_WORD = re.compile(r"(?i)(?<![a-z])train")
_BOOKKEEPING = re.compile(r"(?i)epoch|step|iter|batch|sample|token|time|duration|elapsed|lr|rate|speed|mem")


def eval_values(pairs: list[Any], line: Any, loss_steps: int, heads: Any) -> list[Any]:
    """`pairs` ([((name, scale), value)] of `line`), or those of them that are the eval's (see the module)."""
    if line.step is not None or line.record or line.progress or (
            not loss_steps and heads.headed(frozenset(n[0] for n, _ in pairs if "/" in n[0]))):
        return pairs  # (under an epoch's head, the line is that epoch's record: `console_epochs.EpochHeads.after`)
    evals = [(n, v) for n, v in pairs if n[0].startswith(HELD_OUT)]
    if evals and (loss_steps or epoch_step(pairs, line) is None):
        return evals
    return pairs


def an_evaluation(pairs: list[Any], line: Any, loss_steps: int, step_names: Collection[tuple[str, ...]]) -> bool:
    """Whether `line` (no counter, no eval name) is the validation's record (see the module)."""
    if line.step is not None or line.record or line.progress or line.eval or not loss_steps:
        return False
    names = {n[0] for n, _ in pairs}
    if LOSS not in names or any(name.startswith(HELD_OUT) for name in names):
        return False
    printed = set().union(*step_names) if step_names else set()
    measures = names - printed - {LOSS}  # a name of our own scopes (`perf/..`, `opt/lr`), a time or a count is
    return LOSS in printed and bool(measures) and not any(  # bookkeeping, no evaluation's measure
        "/" in name or names_time_unit(name) or _BOOKKEEPING.search(name) for name in measures)


def estimates(pairs: list[Any]) -> list[Any]:
    """`pairs`, a train loss named so beside the eval's loss renamed the eval's estimate of it (see the module)."""
    names = [n[0] for n, _ in pairs]
    if LOSS not in names or EVAL_LOSS not in names or any(n != LOSS and n.startswith(_STEP_SIDE) for n in names):
        return pairs  # (a step's record beside a last eval's loss, NeMo's `reduced_train_loss: .. | lr: .. | val_loss`)
    return [((TRAIN_ESTIMATE, n[1]), v) if n[0] == LOSS and _TRAIN_WORD.search(v.key) else (n, v) for n, v in pairs]
