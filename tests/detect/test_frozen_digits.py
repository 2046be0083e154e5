"""A train loss printed with 3 significant digits or fewer repeats by chance (Lightning's bar prints a running
mean as `loss=1.350`: an untrained start sat at 1.35 for three records), so its frozen finding is `info`; a
print of 5 digits repeated is no chance (SwAV's 2.3026 for many epochs) and stays an error."""

from __future__ import annotations

import math

from stethoscope.detect.trend import TrendDetector

from .conftest import make_records, of_type, replay


def _run(plateau: float, digits: int) -> list:
    steps = list(range(4, 404, 4))
    loss = [round(plateau if s <= 24 else plateau - 0.3 * (1 - math.exp(-(s - 24) / 100)) + 0.01 * math.sin(s),
                  digits) for s in steps]
    return make_records(steps, LOSS=loss)


def test_a_three_digit_print_repeating_at_the_start_is_info() -> None:
    found = of_type(replay(TrendDetector(), _run(1.35, 2)), "frozen_loss")
    assert found and all(f.severity == "info" for f in found), [f.message for f in found]
    assert "significant digits" in found[0].message


def test_a_five_digit_print_repeating_is_an_error() -> None:
    steps = list(range(1, 60))
    loss = [round(4.0 * math.exp(-s / 10) + 2.3026, 4) if s < 30 else 2.3026 for s in steps]
    found = of_type(replay(TrendDetector(), make_records(steps, LOSS=loss)), "frozen_loss")
    assert found and found[0].severity == "error"
