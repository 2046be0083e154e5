"""timm's batch counter in a log that starts in a later epoch (a resumed run): its steps count the epochs before."""

from __future__ import annotations

from tests.importers.series import read_text, series
from stethoscope.records import LOSS


def _line(epoch: int, batch: int, loss: float) -> str:
    return (f"Train: {epoch} [{batch:>4d}/4 ({100 * (batch + 1) / 4:>3.0f}%)]  Loss: {loss:.2f} ({loss + 0.02:.2f})  "
            "Time: 0.413s,  309.85/s  (0.421s,  303.78/s)  LR: 8.106e-05  Data: 0.014 (0.015)")


def test_a_resumed_timm_log_numbers_its_batches_after_the_epochs_before_it() -> None:
    losses = {(e, b): 1.0 + (e * 4 + b) % 7 / 10 for e in range(250, 256) for b in range(4)}
    run = read_text("".join(_line(e, b, v) + "\n" for (e, b), v in losses.items()))
    got = sorted(series(run, LOSS).items())
    assert [s for s, _ in got] == list(range(1000, 1024))  # epoch 250's batch 0 is timm's update 1000, not step 0
    assert got[5][1] == losses[(251, 1)]
