"""Numbers inside a prefix the line parser leaves are no metrics (Ray Train's worker tag, a `<rank 0>` tag,
absl's glog header after another prefix). Read short (line by line) and long (a shape at a time)."""

from __future__ import annotations

import pytest

from stethoscope.records import LOSS
from tests.importers.series import names, read_text, series

LINES = [12, 3000]
PREFIXES = ["(RayTrainWorker pid=23817, ip=10.0.0.12) ", "(pid=4242) ", "<rank 0> ",
            "(RayTrainWorker pid=23817, ip=10.0.0.12) I0724 11:50:00.757000 140532679501696 train.py:705] "]


@pytest.mark.parametrize("lines", LINES)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_prefixs_numbers_are_no_series(prefix: str, lines: int) -> None:
    """`ray_train_worker_pid`, `ip` (10.0 of 10.0.0.12), `rank`, `i0724` were read as series."""
    truth = {s: round(3 - s / 100_000, 5) for s in range(1, lines + 1)}
    run = read_text("".join(f"{prefix}step {s} loss {v} grad_norm 1.5\n" for s, v in truth.items()))
    assert names(run) == {LOSS, "grad/norm"}
    assert series(run, LOSS) == truth


def test_a_loggers_source_line_before_the_metrics_keeps_them() -> None:
    run = read_text("".join(f"INFO train.py:80] step {s} loss {3 - s / 100} grad_norm 1.5\n" for s in range(1, 13)))
    assert names(run) == {LOSS, "grad/norm"}
