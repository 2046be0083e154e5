"""Step counters a component owns (`Actor Steps`, `Learner Steps`, `Env Steps`): a distributed trainer's record may
name the counters of several components (Acme's terminal logger: `[Learner] Actor Episodes = 12 | Actor Steps =
34567 | Learner Steps = 100 | Learner Walltime = 8.4 | Loss = 1.234`). The actors count environment frames, the
learner its updates; the loss is the learner's. Settled after the line parser (`console_labels.settle`):

- a record holding a loss whose counters belong to several components is numbered by the counter of the component
  the line is tagged with (`[Learner]`), or the one that owns the loss key (`Learner Loss = ..`); with neither, its
  step is not known and the line is no record (a refusal rather than another component's count as the step);
- a record holding no loss whose step counter is a component's own (`[Actor] Actor Episodes = 51 | Actor Steps =
  9207 | Episode Return = 587.5`) counts on that component's axis, not the run's: the line is no record (its values
  would sit at steps the training never took).

A counter of the run itself (`Train Steps`, `Global Steps`, `Optimizer Steps`, `Total Steps`) has no owner.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stethoscope.logtext.console_line import Line

_OWNED = re.compile(r"(?<![\w./\-])([A-Za-z][A-Za-z]+)[ _](?i:steps|step)\s*[:=]\s*(\d+)(?![\d.])")
_TAG = re.compile(r"\[([A-Za-z][A-Za-z]+)\]")
# Words before `steps` that name the run's own counter (or a setting), not a component of the trainer.
_RUN_WORDS = frozenset({"global", "train", "training", "total", "optimizer", "optimization", "opt", "gradient", "grad",
                        "update", "updates", "num", "max", "maximum", "warmup", "current", "cur", "the", "of", "and",
                        "per", "every", "remaining", "logging", "save", "eval", "evaluation", "val", "valid",
                        "validation", "test", "time", "accumulation", "accum", "sgd", "model", "trainer", "all"})


def owned_counters(line: Line, text: str, pos: int) -> None:
    """Number `line` (parsed from `text`, its body from `pos`) by the counter of the component whose loss it holds,
    or make it no record (module docstring)."""
    from stethoscope.logtext.console_line import _token_index

    owned = [m for m in _OWNED.finditer(line.body) if m[1].lower() not in _RUN_WORDS]
    if not owned:
        return
    loss = [v for v in line.values if "loss" in v.key.lower()]
    if not loss:
        if line.step_token is not None and any(_token_index(text, pos + m.start(2)) == line.step_token
                                               for m in owned):
            line.step, line.step_token, line.values, line.record = None, None, [], False
        return
    owners = {m[1].lower() for m in owned}
    if len(owners) < 2:
        return
    head = text[:pos] + line.body[:owned[0].start()]
    tagged = {t.lower() for t in _TAG.findall(head)} & owners
    keyed = {w for v in loss for w in re.findall(r"[A-Za-z]+", v.key.lower())} & owners
    chosen = next(iter(tagged or keyed), None) if len(tagged or keyed) == 1 else None
    m = next((m for m in owned if m[1].lower() == chosen), None)
    token = _token_index(text, pos + m.start(2)) if m else None
    if token is None:
        line.step, line.step_token, line.values, line.record = None, None, [], False
        return
    kept = [v for v in line.values if v.token != token]
    if line.step_token is not None and line.step_token != token:  # the other component's count: a value of the line
        m0 = next((o for o in owned if _token_index(text, pos + o.start(2)) == line.step_token), None)
        if m0 is not None:
            from stethoscope.logtext.console_line import Value

            kept.append(Value(f"{m0[1]} Steps", m0[2], "", line.step_token))
            kept.sort(key=lambda v: v.token)
    line.step, line.step_token, line.total, line.epoch, line.bar, line.progress = int(m[2]), token, None, None, False, False
    line.values = kept
