"""A repeated train-loss print while another train loss of the same records moves is a coincidence of the print, not
a frozen model (wild-logs-6 F2: a VAE's per-epoch running mean printed to 3 decimals, `loss: 2.684` for 12 records
late in an epoch, while `gen_loss` and `FS_loss` of the same lines kept moving: was ERROR frozen_loss). Frozen needs
every printed loss frozen: with nothing beside it moving, the repeat stays an error."""

from __future__ import annotations

import math

from stethoscope.detect.trend import TrendDetector
from stethoscope.records import StepRecord

from .conftest import of_type, replay


def _records(sibling_moves: bool) -> list[StepRecord]:
    out = []
    for i in range(300):
        step = 15000 + 5 * i
        # a running mean printed to 3 decimals: falling 0.002 a record, held at 2.684 for 12 records
        loss = round(3.084 - 0.002 * min(i, 200) - 0.002 * max(0, i - 211), 3)
        gen = round(14.451 - 0.003 * i, 3) if sibling_moves else 14.451
        out.append(StepRecord(step, {"train/loss": loss, "gen_loss": gen}))
    return out


def test_a_repeat_beside_a_moving_term_is_a_coincidence_of_the_print() -> None:
    found = of_type(replay(TrendDetector(), _records(sibling_moves=True)), "frozen_loss")
    assert found, "the repeat is still noted"
    assert all(f.severity == "info" for f in found), [f.message for f in found]
    assert "gen_loss moved through it" in found[0].message


def test_every_printed_loss_frozen_stays_an_error() -> None:
    found = of_type(replay(TrendDetector(), _records(sibling_moves=False)), "frozen_loss")
    assert [f for f in found if f.severity == "error"], [(f.severity, f.message) for f in found]


def test_a_slow_running_mean_repeating_its_print_is_its_resolution() -> None:
    """No sibling: a running mean falling a printed unit (0.001) every 10 records, printed to 3 decimals, holds 2.684
    for 12 records: under 3 units' worth of records at its pace before, the print's resolution (F2's second half)."""
    out = []
    for i in range(300):
        if i < 200:
            loss = round(2.704 - 0.0001 * i, 3)
        elif i < 212:
            loss = 2.684
        else:
            loss = round(2.684 - 0.0001 * (i - 211), 3)
        out.append(StepRecord(15000 + 5 * i, {"train/loss": loss}))
    found = [f for f in of_type(replay(TrendDetector(), out), "frozen_loss") if f.step >= 15500]
    assert not [f for f in found if f.severity != "info"], [(f.severity, f.message) for f in found]
    held = [f for f in found if f.step <= 16000 and f.end_step is not None and f.end_step >= 16055]
    assert held and "print's resolution" in held[0].message, [(f.step, f.end_step, f.message) for f in found]
