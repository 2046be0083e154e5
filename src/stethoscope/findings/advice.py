"""What the field knows about each finding: probable causes (most likely first), each with the fix that
answers it, as data.

`ADVICE` holds the generic (cause, fix) pairs per finding type; `CONDITIONAL` answers the causes the data
named (a grad-norm lead, a bad batch, warm-up, a restart) and adds pairs that only a context makes
likely (fp16); `NON_PROBLEMS` lists what looks wrong but is not. `advise(finding, context)` keeps
`finding.causes[i]` answered by `finding.fixes[i]`: first what the context makes most likely (a jump
right after the first update of a trained model: its weights were loaded wrong), then the data-specific
causes, then the generic ones. A pair the run's context rules out is left out: fp16 loss-scale causes in
a bf16/fp32 run, GPU/NCCL causes on a CPU run, warm-up causes after warm-up ended, "LR too high" at an LR
of 1e-9, and every generic cause of a jump at a deliberate restart. `reconcile` removes advice that
contradicts another finding of the same report (keep the schedule / change it).
Sources: BLOOM-176B / OPT-175B / PaLM chronicles and papers, OLMo's stability monitor, HF and
PyTorch issue threads, Karpathy's "recipe for training neural networks".
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from typing import Any

from stethoscope.findings.catalogue import DIVERGENCE, LOSS_SPIKE, PERIODIC_STALL, UNDERFITTING
from stethoscope.findings.remedies import (  # the tables and flags (re-exported: tests and alerts read them here)
    ADVICE,
    AFTER_WARMUP,
    AT_RESTART,
    CHANGE_SCHEDULE,
    CONDITIONAL,
    CPU,
    FIRST_UPDATE,
    FP16,
    FRESH_START,
    IN_WARMUP,
    KEEP_SCHEDULE,
    LR_HELD,
    LR_JUMPED,
    PERF_RECORDED,
    PERF_UNRECORDED,
    LR_TINY,
    NAN_SUDDEN,
    NON_PROBLEMS,
    NOT_FP16,
    NOT_LEARNING,
    Conditional,
    Remedy,
)
from stethoscope.findings.remedies_eval import EVAL_ADVICE
from stethoscope.records import Finding, severity_rank

ADVICE.update(EVAL_ADVICE)  # the types whose causes and fixes live beside `remedies` (its size limit)
_TINY_LR = 1e-7  # an update at this LR cannot move trained weights measurably
_DATA_FALLBACK = "start with this cause: the log points to it (the fixes of the causes below may apply too)"

__all__ = ["ADVICE", "CONDITIONAL", "NON_PROBLEMS", "advise", "context_flags", "reconcile"]

_GENERIC = {r.cause for a in ADVICE.values() for r in a.remedies} | {c.remedy.cause for c in CONDITIONAL}
_STANCES = {r.fix: r.stance for a in ADVICE.values() for r in a.remedies if r.stance} | {
    c.remedy.fix: c.remedy.stance for c in CONDITIONAL if c.remedy.stance}
_TABLE_FIXES = {r.fix for a in ADVICE.values() for r in a.remedies} | {c.remedy.fix for c in CONDITIONAL} | {
    _DATA_FALLBACK, ""}


def advise(finding: Finding, context: dict[str, Any] | None = None) -> Finding:
    """Fill `finding.causes` and `finding.fixes` in place, fix i answering cause i: what the context makes most
    likely, then the data-specific causes, then the generic ones; pairs the context rules out are left out.
    A finding that came with fixes of its own (a crash log's signature, the GPU detector) keeps them whole."""
    if any(fix not in _TABLE_FIXES for fix in finding.fixes):
        return finding
    flags = context_flags(finding, context or {})
    named = " ".join(finding.causes + [finding.message])
    data = [c for c in finding.causes if c not in _GENERIC]
    pairs: list[tuple[str, str]] = [(c.remedy.cause, c.remedy.fix) for c in _conditionals(finding.type, True, flags)]
    for cause in data:  # a named cause with no fix of its own: "start with it" when it leads, else no fix line
        remedy = _answer(finding.type, cause, flags)  # (evidence beside the causes around it; "" keeps fix i
        if remedy is not None:  # answering cause i, and every view leaves an empty fix out)
            pairs.append((cause, remedy.fix or ("" if pairs else _DATA_FALLBACK)))
    if AT_RESTART not in flags:  # a jump at a deliberate restart is expected: no generic instability causes
        pairs += [(c.remedy.cause, c.remedy.fix) for c in _conditionals(finding.type, False, flags, named)]
        advice = ADVICE.get(finding.type)
        pairs += [(r.cause, r.fix) for r in (advice.remedies if advice else ()) if not r.unless & flags]
    seen: set[str] = set()
    kept = [(c, f) for c, f in pairs if c and not (c in seen or seen.add(c))]
    finding.causes = [c for c, _ in kept]
    finding.fixes = [f for _, f in kept]
    return finding


def context_flags(finding: Finding, ctx: dict[str, Any]) -> frozenset[str]:
    """The flags of `ctx` (precision, device, warm-up end, LR series, first steps) that hold at this finding."""
    flags = set()
    precision = ctx.get("precision") or ("fp16" if ctx.get("fp16") else None)
    if precision == "fp16":
        flags.add(FP16)
    elif precision in ("bf16", "fp32"):
        flags.add(NOT_FP16)
    if ctx.get("device") == "cpu":
        flags.add(CPU)
    step, warm = finding.step, ctx.get("warmup_end")
    if step is not None and warm is not None:
        flags.add(AFTER_WARMUP if step > warm else IN_WARMUP)
    lr = _lr_at(ctx.get("lr"), step)
    if lr is not None and 0 < lr < _TINY_LR:
        flags.add(LR_TINY)
    if any("resume or schedule restart" in c for c in finding.causes):
        flags.add(AT_RESTART)
    if precision != "fp16" and any(c.startswith("LR jumped") for c in finding.causes):
        flags.add(LR_JUMPED)  # the log shows the cause; fp16 trouble is named only where fp16 is known
    if finding.type == PERIODIC_STALL:  # the "record them" fix only where the run does not
        flags.add(PERF_RECORDED if finding.evidence.get("causes_recorded") else PERF_UNRECORDED)
    if any(NAN_SUDDEN in c for c in finding.causes):  # the LR held and the level kept up to the NaN
        flags.add(LR_HELD)
    if _first_update(finding, ctx):
        flags.add(FIRST_UPDATE if _loaded(finding, ctx, LR_TINY in flags) else FRESH_START)
    if finding.type == UNDERFITTING and finding.evidence.get("verdict"):
        flags.add(NOT_LEARNING)
    return frozenset(flags)


def reconcile(findings: Sequence[Finding]) -> None:
    """No two findings of one report take opposite stances (keep the LR schedule / change it): the stance of
    the more severe finding stays (a tie keeps the schedule: a deliberate restart is evidence), the opposite
    (cause, fix) pairs are removed, in place."""
    worst: dict[str, int] = {}
    for f in findings:
        for fix in f.fixes:
            stance = _STANCES.get(fix)
            if stance:
                worst[stance] = max(worst.get(stance, -1), severity_rank(f.severity))
    if len(worst) < 2:
        return
    loser = CHANGE_SCHEDULE if worst[KEEP_SCHEDULE] >= worst[CHANGE_SCHEDULE] else KEEP_SCHEDULE
    for f in findings:
        if len(f.causes) != len(f.fixes):
            continue
        pairs = [(c, x) for c, x in zip(f.causes, f.fixes) if _STANCES.get(x) != loser]
        f.causes, f.fixes = [c for c, _ in pairs], [x for _, x in pairs]


def _conditionals(kind: str, first: bool, flags: frozenset[str], named: str = "") -> list[Conditional]:
    out = []
    for c in CONDITIONAL:
        if c.type != kind or c.first != first or not c.remedy.cause or c.remedy.unless & flags:
            continue
        if c.when.startswith("context:") and c.when.removeprefix("context:") in flags:
            out.append(c)
        elif not c.when.startswith("context:") and not first and c.when in named:
            out.append(c)
    return out


def _answer(kind: str, cause: str, flags: frozenset[str]) -> Remedy | None:
    """The remedy answering a data-specific cause; None when the context rules that cause out."""
    for c in CONDITIONAL:
        if c.type == kind and not c.remedy.cause and c.when in cause:
            return None if c.remedy.unless & flags else c.remedy
    return Remedy(cause, "")


def _lr_at(lr: Any, step: int | None) -> float | None:
    if lr is None or step is None:
        return None
    steps, values = lr
    i = bisect.bisect_right(steps, step) - 1  # a numpy array bisects as it is
    return float(values[i]) if i >= 0 else None


def _first_update(finding: Finding, ctx: dict[str, Any]) -> bool:
    """A loss jump within the first optimizer updates (`_loaded` tells a fine-tune or continued pre-training
    whose loaded weights the first update wrecked from a fresh model's first steps)."""
    first_steps = ctx.get("first_steps") or ()
    if finding.type not in (LOSS_SPIKE, DIVERGENCE) or finding.step is None or len(first_steps) < 2:
        return False
    if finding.step > first_steps[min(2, len(first_steps) - 1)]:
        return False
    ev = finding.evidence
    before = ev.get("level_before", ev.get("level"))
    after = ev.get("peak", ev.get("value"))
    return isinstance(before, (int, float)) and isinstance(after, (int, float)) and 0 < before <= 0.6 * after


# Config keys that say the run started from trained weights (a resume, a checkpoint, a pretrained model).
_LOAD_KEYS = ("resume_from_checkpoint", "ckpt_path", "load", "load_checkpoint", "finetune", "init_from",
              "model_name_or_path", "pretrained_model_name_or_path", "pretrained")
_SCRATCH = ("", "scratch", "none", "false", "0")
_CLASS_KEYS = ("vocab_size", "padded_vocab_size", "num_labels", "num_classes")
_CONTINUED_FROM = 100  # a log whose first step is this far on continues an earlier run's weights


def _loaded(finding: Finding, ctx: dict[str, Any], lr_tiny: bool) -> bool:
    """Evidence that the first update met trained weights: an update at an LR too small to move any weights
    (only a wrong state explains the jump), a config naming a resume/checkpoint/pretrained model, a log that
    starts far past step 0, or a loss before the jump far below a fresh classifier's ln(K). Without any, the
    jump is a fresh model's first updates (an LR too high at the start), not a checkpoint loaded wrong."""
    first = (ctx.get("first_steps") or (0,))[0]
    if lr_tiny or first >= _CONTINUED_FROM:
        return True
    meta = ctx.get("meta") or {}
    if any(k in _LOAD_KEYS and v is not None and str(v).strip().lower() not in _SCRATCH for k, v in _items(meta)):
        return True
    k = next((v for key, v in _items(meta) if key in _CLASS_KEYS and isinstance(v, int) and not isinstance(v, bool)
              and v > 1), None)
    before = finding.evidence.get("level_before", finding.evidence.get("level"))
    return k is not None and isinstance(before, (int, float)) and 0 < before <= 0.5 * math.log(k)


def _items(meta: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    stack: list[Any] = [meta]
    while stack:
        d = stack.pop()
        for key, v in d.items() if isinstance(d, dict) else ():
            yield key, v
            stack.append(v)
