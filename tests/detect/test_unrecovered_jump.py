"""A stream that ends inside a loss jump that never started to come back is a divergence."""

from __future__ import annotations

from .conftest import replay_loss


def _steady(n=60):
    return [2.5 + 0.01 * ((i * 7) % 5) for i in range(n)]


def test_jump_held_to_the_end_is_one_divergence():
    found = replay_loss(_steady() + [4.3, 4.35, 4.32, 4.3])
    div = [f for f in found if f.type == "divergence"]
    assert len(div) == 1 and div[0].step == 60 and div[0].severity == "error"
    assert div[0].evidence["peak_undone"] < 0.25


def test_huge_last_jump_alone_is_a_divergence():
    found = replay_loss(_steady() + [11.0])
    assert [f.step for f in found if f.type == "divergence"] == [60]


def test_moderate_jump_on_the_last_record_is_only_a_spike():
    found = replay_loss(_steady() + [6.0])
    assert not [f for f in found if f.type == "divergence"]
    assert [f.step for f in found if f.type == "loss_spike"] == [60]


def test_jump_coming_back_is_not_a_divergence():
    found = replay_loss(_steady() + [7.0, 6.0, 4.5, 3.6, 3.0])
    assert not [f for f in found if f.type == "divergence"]
