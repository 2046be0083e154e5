"""An episode counter heading a record (a reinforcement-learning loop's `Episode 12 reward: 31.5, Episode loss:
0.42`, `Episode: 12, reward: 31.5, loss: 0.42`): each record is an episode's, and the episode is the step the loss
is logged at. Settled after the line parser (`console_labels.settle`), for a line with no step counter of its own
that holds a loss; the episode's loss (`Episode loss`) is the run's train loss (`names`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stethoscope.logtext.console_line import Line

_EPISODE = re.compile(r"\s*(?i:episode)\s*[:=#]?\s*(\d+)(?:\s*/\s*(\d+))?(?![\d.])(?!\s*[-+*/^%])")


def episode_step(line: Line, text: str, pos: int) -> None:
    """`line`'s step: the episode counter heading its body, when it holds a loss and no other counter."""
    from stethoscope.logtext.console_line import _token_index

    m = _EPISODE.match(line.body)
    if m is None or line.eval or line.progress or not any("loss" in v.key.lower() for v in line.values):
        return
    token = _token_index(text, pos + m.start(1))
    if token is None:
        return
    line.step, line.step_token, line.total, line.record = int(m[1]), token, None, False
    line.values = [v for v in line.values if v.token != token and (m[2] is None or v.token != token + 1)]
