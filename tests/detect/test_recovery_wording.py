"""A jump the run had not come back from is measured against the loss level before it, never as a share of the
peak undone: a loss that fell from 1e7 to 264x its level is not "recovered partly (100% of the jump)"."""

from __future__ import annotations

from stethoscope.detect.comeback import how_far_back
from .conftest import replay_loss


def _converged(n=200):
    return [3.0 * 0.97 ** i + 0.017 + 0.001 * ((i * 7) % 5) for i in range(n)]


def test_a_huge_peak_does_not_make_a_stuck_loss_read_recovered():
    # an LR x500 at step 200 (user-trial-4's loop): 0.017 -> 32 -> 1.3e7, then down to ~4.5 and held there
    tail = [32.5, 4e3, 2e5, 1.3e7, 9e5, 3e3] + [4.5 + 0.05 * (i % 3) for i in range(94)]
    div = [f for f in replay_loss(_converged() + tail) if f.type == "divergence" and f.severity == "error"]
    assert len(div) == 1, div
    d = div[0]
    assert "recovered partly" not in d.message and "%" not in d.message, d.message
    assert "still x" in d.message and "its level before the jump" in d.message
    assert d.evidence["last_over_level"] > 100 and "recovered_fraction" not in d.evidence


def test_how_far_back_words():
    how, ev = how_far_back(0.017, 1.3e7, 204, 4.556)
    assert how == "down from its peak (1.3e+07 at step 204) but still x268 its level before the jump (0.017)"
    assert ev["recovered"] == "partly" and ev["peak_undone"] > 0.99 and round(ev["last_over_level"]) == 268
    how, ev = how_far_back(2.5, 4.35, 61, 4.3)
    assert how.startswith("not recovered: still x1.72 its level before the jump") and ev["recovered"] == "not"
    how, ev = how_far_back(-1.0, 3.0, 7, 2.0)  # a loss that can be negative: a difference, not a ratio
    assert "3 above its level before the jump (-1)" in how and "last_over_level" not in ev
