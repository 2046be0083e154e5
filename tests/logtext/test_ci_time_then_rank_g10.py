"""A launcher's rank tag after a CI's timestamp (Jenkins' Timestamper, then Intel MPI's `-prepend-rank` `[0] `) is
a rank, as it is at the start of a line: not a step heading the metrics."""

from __future__ import annotations

from stethoscope.logtext.console_line import parse
from stethoscope.records import LOSS
from tests.importers.series import read_text, series


def test_rank_tag_after_a_jenkins_timestamp() -> None:
    line = parse("[2024-07-24T11:20:42.660Z] [0]     Loss/train=    3.790 (   3.8289)")
    assert line.rank == "0" and line.step is None


def test_records_under_a_header_keep_its_step() -> None:
    lines = []
    for i, step in enumerate((1000, 1512, 2024)):
        lines.append(f"[2024-07-24T11:20:{10 + 2 * i:02d}.274Z] [0] [2024-07-24T11:50:00+02:00] "
                     f"[INFO|DP=0|PP=0|TP=0|nid001]: [step={step}/739328]\n")
        lines.append(f"[2024-07-24T11:20:{11 + 2 * i:02d}.660Z] [0]     Loss/train=    {3.5 - i / 10:.3f} (   3.8289)\n")
    assert series(read_text("".join(lines)), LOSS) == {1000: 3.5, 1512: 3.4, 2024: 3.3}


def test_a_count_after_a_date_that_is_not_first_stays_a_step() -> None:
    """Only the CI's own stamp starts the line: after `[Rank 0] [date] `, `[0]  train/loss: ..` heads the metrics."""
    line = parse("[Rank 0] [2024-07-24 11:00:00,000] [0]  train/loss: 4.537")
    assert line.step == 0 and line.rank is None
