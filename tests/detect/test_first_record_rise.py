"""The first record is no level: a rise at the second record is worded as a rise from the one record before it,
never as a spike "x1.5 its recent level (10.7 sigma)" (user-trial-4 item 10: the sigma was a prior's, the level one
value). It stays an info, and a jump after a level of several records keeps the spike's words."""

from __future__ import annotations

from .conftest import replay_loss


def _spikes(values):
    return [f for f in replay_loss(values) if f.type == "loss_spike"]


def test_a_rise_at_the_second_record_is_no_spike_from_a_level():
    tail = [3.0 - 0.01 * i for i in range(60)]
    (f,) = [f for f in _spikes([3.318, 4.993, 4.6, 3.4] + tail) if f.step == 1]
    assert f.severity == "info"
    assert "sigma" not in f.message and "recent level" not in f.message, f.message
    assert f.message.startswith("loss rose to 4.993 at step 1, x1.5 the one record before it (3.318)")


def test_a_jump_after_a_level_keeps_the_spike_words():
    level = [2.0 + 0.01 * (i % 3) for i in range(40)]
    (f,) = _spikes(level + [6.0] + level[:20])
    assert f.step == 40 and "its recent level" in f.message and "sigma" in f.message
