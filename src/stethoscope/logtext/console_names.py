"""What a key of a console line means: our metric name and the factor to our unit, cached per (key as
written, attached unit, eval line or not). A trainer's clock (`console_clock.CLOCK_NAMES`) and a plain
time (`time: 0.36`, settled later as a step time or a clock) come before the general resolver; a step time
whose name gives no unit (`iter_time: 250`) is settled later too, by its magnitude."""

from __future__ import annotations

import re
from typing import Any

from stethoscope.detect.names import names_time_unit
from stethoscope.logtext.console_clock import CLOCK_NAMES, STEPS_TIME, UNITLESS_STEP, time_name
from stethoscope.logtext.console_line import MAGNITUDE, STEPS_TIME_KEY, key_name
from stethoscope.logtext.names import EPOCH, FUNCTION_WORDS, Resolved, distance, metric, names_a_metric, rivals
from stethoscope.records import LOSS, STEP_TIME

Names = dict[tuple[str, str, bool], "tuple[str, float] | None"]
HELD_OUT = ("eval/", "test/")  # the names of an eval (or test) line's metrics: its record, not a step's
# the scopes of our own names (`stethoscope.records`): any other scope on an eval line is the eval's own
_OURS = frozenset({"amp", "eval", "test", "gpu", "grad", "memory", "opt", "param", "perf", "stethoscope", "system",
                   "train", "update"})


# A key written as a sentence, `<name> is <value>`: the verb is no part of the name, nor is `so far` (the mean up
# to this record, as `avg` says: Paddle's `avg loss so far is 0.11`, `val loss is 0.048`); a subject of more than
# four words or with a function word is prose (a generated answer's `the cost of one set is 3`)
_PHRASED = re.compile(r"(?i)(?:\s+so\s+far)?\s+(?:is|was|are|were)\s*$")


def resolve(cache: Names, key: str, unit: str, eval_line: bool) -> tuple[str, float] | None:
    """(name, scale) of a key with its unit on a line (an eval line or not); None when it is no metric."""
    at = (key, unit, eval_line)
    if at not in cache:
        phrased = _PHRASED.search(key) if key[-1:] in "sertSERT" else None
        subject = key[:phrased.start()].lower().split() if phrased else []
        if 0 < len(subject) <= 4 and FUNCTION_WORDS.isdisjoint(subject):
            key = key[:phrased.start()]  # type: ignore[union-attr]
        raw = key_name(key, unit)
        if key == STEPS_TIME_KEY:
            cache[at] = (STEPS_TIME, 1.0)
        elif raw is None or not names_a_metric(key):  # prose's words (`Start inference on 6 batches`), a loop's label
            cache[at] = None
        elif raw in CLOCK_NAMES:
            cache[at] = CLOCK_NAMES[raw]
        else:
            found = metric(raw, "eval" if eval_line else None)
            if eval_line and found.name.split("/", 1)[0] not in _OURS:  # mmengine's `coco/bbox_mAP` on an eval
                found = Resolved(f"eval/{found.name}", found.scale)  # line: the eval's metric, a scope of its own
            plain = None if ("/" in found.name and not found.name.startswith("train/")) or eval_line \
                else time_name(raw)  # `train_time`: a time the trainer's name leaves open (a step's or a clock)
            if found.name == STEP_TIME and not names_time_unit(raw):
                plain = (f"{UNITLESS_STEP}|{raw}", 1.0)  # `iter_time: 250`: its magnitude says ms or s
            cache[at] = plain or (found.name, found.scale * MAGNITUDE.get(unit, 1.0))
            if found.name == LOSS and not plain and not eval_line:
                cache[at] = _owned(cache, raw, cache[at])  # type: ignore[arg-type]
    return cache[at]


_LOSS_OWNER = ("", "\x00loss", False)  # the cache's note of the key that first named the train loss


def _owned(cache: Names, raw: str, named: tuple[str, float]) -> tuple[str, float]:
    """The train loss's name for `raw`, unless a closer spelling named it first in this file: a custom loop's
    `[step 50] loss=0.14` then `[step 50] avg_loss=0.0000` would overwrite the loss with another quantity (a
    mean, a running figure); the farther spelling (`names.distance`) keeps its own key, as `rivals` does on a
    line."""
    owner = cache.setdefault(_LOSS_OWNER, (raw, 0.0))
    if owner is None or owner[0] == raw or distance(raw, LOSS) <= distance(owner[0], LOSS):
        return named
    return "_".join(raw.split()), named[1]


def distinct(pairs: list[Any]) -> list[Any]:
    """A line's [((name, scale), value)] where no two keys share a name: DETR prints `loss: 55.8 ... loss_ce:
    2.1`, both the train loss by name; the closest spelling keeps it (`names.rivals`), the other its own key."""
    names = [n[0] for n, _ in pairs]
    if len(set(names)) == len(names):
        return pairs
    keys = [v.key for _, v in pairs]
    if len(set(keys)) < len(keys):  # one key twice: the later value stands, as before
        return pairs
    named = rivals(dict(zip(keys, names)))
    return [((named[v.key], n[1]), v) if named[v.key] != n[0] else (n, v) for n, v in pairs]


def eval_record(names: Any) -> bool:
    """A record of an eval (or test): its metrics all held-out ones, beside at most the epoch it ran in (the HF
    Trainer's `{'eval_loss': 1.15, 'eval_runtime': 12.3, 'epoch': 0.75}`)."""
    held = [name.startswith(HELD_OUT) for name in names if name != EPOCH]
    return bool(held) and all(held)


def ordinal_steps(names: Any, count: int, ordinal: int) -> tuple[list[int], int]:
    """The steps of `count` dict records with no step counter, numbered in file order after `ordinal`, and the
    ordinal after them. An eval's record is no step of its own: the trainer evaluates after a logged train step
    and prints the eval's dict right after that step's (HF's `eval_steps` a multiple of `logging_steps`), so it
    takes the number of the record before it (1 when it comes first: an eval before training)."""
    if eval_record(names):
        ordinal = ordinal or 1
        return [ordinal] * count, ordinal
    return list(range(ordinal + 1, ordinal + 1 + count)), ordinal + count
