"""The oracle of `log_grammar`: it reads a generated log with `read_any`, as `stethoscope import` does, and scores
it against the log's truth (`recovered`, `refused`, `partial`, `misread`; `log_grammar`'s docstring says what each
means)."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from log_grammar import Log

_MAX_STEP_S = 1.0  # above every printed step time (0.2 to 0.5 s) and a clock's seconds per step: a clock's value


RECOVERED, REFUSED, PARTIAL, MISREAD = "recovered", "refused", "partial", "misread"


@dataclass
class Outcome:
    kind: str
    why: str = ""
    step_time: bool | None = None  # a step time printed and read (None: none printed)
    seconds: bool | None = None  # every step time read is one the log printed, in s (None: truth not known)


def score(log: Log, directory: str | None = None) -> Outcome:
    """Read `log` as `stethoscope import` does and compare with its truth."""
    from stethoscope.errors import InputError
    from stethoscope.importers import read_any

    with tempfile.TemporaryDirectory(dir=directory) as d:
        path = Path(d) / "train.log"
        path.write_text(log.text, encoding="utf-8")
        try:
            runs = read_any(path)
        except InputError as exc:
            return Outcome(REFUSED, str(exc)[:200])
        if len(runs) != 1:  # one run was written: reading it as several is a wrong reading, not a refusal
            return Outcome(MISREAD, f"read as {len(runs)} runs (one was written)")
        names, steps, values, _ = (list(c) for c in runs[0].columns)
    outcome = _outcome(log, names, steps, values)
    outcome.seconds = _seconds_read(log, names, steps, values)
    return outcome


def _outcome(log: Log, names: list, steps: list, values: list) -> Outcome:
    from stethoscope.records import LOSS, STEP_TIME

    if not steps:
        return Outcome(REFUSED, "0 steps")
    losses = [(int(s), float(v)) for n, s, v in zip(names, steps, values) if n == LOSS]
    read_time = (STEP_TIME in names) if log.step_time else None
    all_steps = sorted({int(s) for s in steps})
    if log.ordinal:
        if any(s in set(log.samples[1:]) and s not in range(1, log.grammar.n + 1) for s in all_steps):
            return Outcome(MISREAD, f"a sample count read as the step: {all_steps[:8]}")
        want = list(range(1, log.grammar.n + 1))
        got_steps = [s for s, _ in losses]
        if got_steps and got_steps != want:
            return Outcome(MISREAD, f"steps {got_steps[:8]}, want the records numbered {want[:8]}")
        if [v for _, v in losses] != log.losses:
            return _loss_mismatch(losses, log, read_time)
        return Outcome(RECOVERED, step_time=read_time)
    truth = set(log.steps)
    wrong = [s for s in all_steps if s not in truth]
    if wrong:
        return Outcome(MISREAD, f"steps not in the log: {wrong[:6]} (true {log.steps[:6]})")
    want = list(zip(log.steps, log.losses))
    if losses == want:
        return Outcome(RECOVERED, step_time=read_time)
    return _loss_mismatch(losses, log, read_time, want)


def _loss_mismatch(losses: list[tuple[int, float]], log: Log, read_time: bool | None,
                   want: list[tuple[int, float]] | None = None) -> Outcome:
    if not losses:
        return Outcome(PARTIAL, "no train loss read", read_time)
    truth = set(log.losses)
    bad = [(s, v) for s, v in losses if not any(math.isclose(v, t, rel_tol=1e-9) for t in truth)]
    if bad:
        return Outcome(MISREAD, f"losses not the train loss: {bad[:4]}", read_time)
    return Outcome(PARTIAL, f"{len(losses)} of {len(log.losses)} train losses read"
                            f"{'' if want is None else f' (first {losses[:3]} vs {want[:3]})'}", read_time)


def _seconds_read(log: Log, names: list, steps: list, values: list) -> bool | None:
    """Whether the step times read are the ones printed, in seconds, at their records' steps (and none is
    read where none was printed: a data wait is not one), and no value of a cumulative clock is read as one;
    None when the log's truth is not known."""
    from stethoscope.records import STEP_TIME

    if not steps:
        return None
    per_record = int(str(log.grammar.parts["cadence"])) if log.ordinal else 1  # records numbered 1, 2, 3 …
    if log.clock and any(float(v) > _MAX_STEP_S * per_record for n, v in zip(names, values) if n == STEP_TIME):
        return False  # a clock's value read as a step time
    if log.step_seconds is None:
        return True if log.clock else None
    keys = range(1, len(log.step_seconds) + 1) if log.ordinal else log.steps
    truth = {k: t for k, t in zip(keys, log.step_seconds) if t}
    got = [(int(s), float(v)) for n, s, v in zip(names, steps, values) if n == STEP_TIME]
    return {s for s, _ in got} == set(truth) and all(any(abs(v - t) <= 6e-4 for t in truth[s]) for s, v in got)
