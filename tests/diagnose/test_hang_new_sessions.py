"""Lines that stop for days and start again are a new process, not a hang (`diagnose.engine._alive`).

wild-logs-5, a 245-session debug log read (after the several-runs split) as runs: the last run's last step was 10
and the log went on with other sessions' lines (`Epoch 1/20`, `Average Training loss: ...`) for 12 days, with days
between sessions: CRITICAL hang "the log went on for 265.7 h". A hung process goes on printing at its pace (an hourly
heartbeat, a retry loop); a log that falls silent for longer than the hang limit and ten times its usual gap, then
starts again, holds a new process. The heartbeat case is tests/diagnose/test_engine.py's.
"""

from __future__ import annotations

import math
import random

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.base import ImportedRun, LogLine
from stethoscope.records import LOSS, Point

_T0 = 1_582_549_094.0


def _run(lines: list[LogLine]) -> list:
    rng = random.Random(0)
    pts = [Point(LOSS, s, (2.5 + 6 * math.exp(-s / 300)) * (1 + rng.gauss(0, 0.02))) for s in range(300)]
    run = ImportedRun("train.log", "synthetic", pts)
    run.lines = lines
    return [f for f in diagnose_run(run).findings if f.type == "hang"]


def test_later_sessions_days_apart_are_no_hang() -> None:
    lines = [LogLine(1000 + 10 * d + i, f"INFO: Epoch {i + 1}/20", step=299, time=_T0 + 86400 * d + 2 * i)
             for d in range(12) for i in range(5)]
    assert _run(lines) == []


def test_a_process_that_keeps_printing_without_a_step_hangs() -> None:
    lines = [LogLine(1000 + i, "WARNING: retrying the collective", step=299, time=_T0 + 60 * i) for i in range(180)]
    (f,) = _run(lines)
    assert f.severity == "critical" and f.evidence["silent_s"] >= 3 * 3600 - 60, f


def test_a_heartbeat_of_two_lines_an_hour_hangs() -> None:
    # BLOOM tr11's eval hang (/work/shared/realruns): two `PULSE:` lines at the same second, every hour
    lines = [LogLine(1000 + 2 * h + k, f"PULSE: job is {'waiting' if k else 'running'}", step=299, time=_T0 + 3600 * h)
             for h in range(4) for k in range(2)]
    (f,) = _run(lines)
    assert f.severity == "critical", f


def _timed_run(lines: list[LogLine], step_s: float = 30.0) -> list:
    rng = random.Random(0)
    pts = [Point(LOSS, s, (2.5 + 6 * math.exp(-s / 300)) * (1 + rng.gauss(0, 0.02)), time=_T0 + step_s * s)
           for s in range(300)]
    run = ImportedRun("train.log", "synthetic", pts)
    run.lines = [LogLine(1, "INFO - Using device: cuda:0", step=None, time=_T0 - 5), *lines]
    return [f for f in diagnose_run(run).findings if f.type == "hang"]


def test_one_later_session_a_month_after_the_run_is_no_hang() -> None:
    """wild-logs-7 F-C: runs of one script appended to one log over a month: the last step's run (2.5 h) and,
    27 days later, one more session's lines (`Epoch 2/20` ... for 6 minutes): CRITICAL hang "the log went on for
    649.8 h". With one later session there is no gap inside the later lines for `_alive` to break at; the wait
    before their first line (days, far longer than the run had lasted) is no hang's."""
    end = _T0 + 30.0 * 299
    later = [LogLine(2000 + i, f"INFO - Epoch {i + 2}/20", step=299, time=end + 27 * 86400 + 30 * i) for i in range(12)]
    assert _timed_run(later) == []


def test_a_hang_whose_first_line_comes_late_still_hangs() -> None:
    # The same run silent for 3 h, then a watchdog printing every minute: the wait is the hang's own.
    end = _T0 + 30.0 * 299
    late = [LogLine(2000 + i, "WARNING: watchdog: no progress", step=299, time=end + 3 * 3600 + 60 * i)
            for i in range(30)]
    (f,) = _timed_run(late)
    assert f.severity == "critical" and f.evidence["silent_s"] >= 3 * 3600, f


def test_lines_after_the_step_counter_restarted_are_another_session() -> None:
    """wild-logs-7 F-C (its second CRITICAL, "went on for 0.8 h"): after the run's last step the counter started
    again from 10 (a new process: `Using device`, a config dump, `Epoch 1/10`, `Batch 10/165`) and that session's
    later lines were counted to the last step: a hang. The silence is measured inside the session only."""
    end = _T0 + 30.0 * 299
    restart = [LogLine(2000 + i, "INFO - Using device: cuda:0", step=10, time=end + 2400 + i) for i in range(3)]
    later = [LogLine(2100 + i, f"INFO - Epoch {i + 2}/10", step=299, time=end + 2700 + 30 * i) for i in range(120)]
    assert _timed_run(restart + later) == []


def test_a_hang_before_the_restart_still_hangs() -> None:
    # The process printed for 3 h without a step, then the person restarted it: the hang is the first session's.
    end = _T0 + 30.0 * 299
    stuck = [LogLine(2000 + i, "WARNING: retrying the collective", step=299, time=end + 60 * i) for i in range(180)]
    restart = [LogLine(3000 + i, "INFO - Using device: cuda:0", step=10, time=end + 4 * 3600 + i) for i in range(3)]
    (f,) = _timed_run(stuck + restart)
    assert f.severity == "critical" and f.evidence["silent_s"] >= 3 * 3600 - 60, f
