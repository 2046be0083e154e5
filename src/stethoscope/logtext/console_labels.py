"""What a console line says of itself beyond its counter and its `key: value` pairs, settled after the line
parser (`console_line.parse`) has read them:

- a count heading the line before a tab, `[N]\\t` or `N:\\t`, is the boosting round, the step (XGBoost's
  `[10]\\ttrain-logloss:0.61\\teval-logloss:0.62`, LightGBM's `[10]\\ttraining's binary_logloss: 0.53`, CatBoost's
  `10:\\tlearn: 0.68\\ttest: 0.69`); without the tab `0: ` is a launcher's rank label (`srun -l`), not a round;
- a quoted name right before a value is the value's own name, whatever words come before it (GluonTS's
  `Epoch[3] Evaluation metric 'epoch_loss'=0.87` is the epoch's train loss, `'validation_epoch_loss'` the eval's);
- a data set's possessive names its split (LightGBM's `training's`, `valid_1's`: `names.metric` reads it);
- a line that names its split before an epoch (`Validation Results - Epoch[1] Avg loss: 0.18`, PyTorch-Ignite;
  `eval epoch: 1, loss: 1.23`, Flax) is an eval's, wherever the prefixes before it end: its epoch says when the
  eval ran, never which train step it is, and its loss is never a train loss.
"""

from __future__ import annotations

import re

from stethoscope.logtext.console_line import NUMBER, Line, _token_index

# after the line's head, a blank, a bracket or a logger's `name:` (`INFO:root:10:\tlearn: ..`)
_ROUND = re.compile(r"(?:^|(?<=[\s\])>])|(?<=[A-Za-z]:))(?:\[(\d+)\]|(\d+):)\t(?=\s*[A-Za-z_])")
_QUOTED = re.compile(r"""['"]([A-Za-z_][^'"\n]{0,60}?)['"]\s*[:=]?\s*$""")
_OWNED = re.compile(r"([A-Za-z_]\w*)'s\s+([A-Za-z_][^:='\n]{0,60}?)\s*[:=]?\s*$")
_SPLIT_EPOCH = re.compile(r"\b(?i:val|valid|validation|eval|evaluation|test)\b[^\d\n]{0,24}?\b(?i:epoch)\b")


def settle(line: Line, text: str, pos: int) -> Line:
    """`line` (parsed from `text`, its body from `pos`) with its round, its values' own names and its split."""
    if line.step is None and not line.progress and "\t" in line.body:
        _round(line, text, pos)
    if "'" in text or '"' in text:
        _own_names(line, text)
    if not line.eval and _SPLIT_EPOCH.search(line.body):
        line.eval = True
        if line.step is None:  # when the eval ran, not what it measured (as `console_line.parse` drops it)
            line.values = [v for v in line.values if v.key.lower() != "epoch"]
    return line


def _round(line: Line, text: str, pos: int) -> None:
    head = _ROUND.search(line.body)
    if head is None or any(c.isdigit() for c in line.body[:head.start()]):
        return  # a count after another (`Epoch: [0][50]\tTime ..`, SwAV) is a position within it, not a round
    start = pos + head.start(1 if head[1] is not None else 2)
    token = _token_index(text, start)
    if token is None:
        return
    line.step, line.step_token, line.total, line.record = int(head[1] or head[2]), token, None, False
    line.values = [v for v in line.values if v.token != token]


def _own_names(line: Line, text: str) -> None:
    starts = [m.start() for m in NUMBER.finditer(text)]
    for v in line.values:
        if v.token >= len(starts):
            continue
        before = text[max(0, starts[v.token] - 80):starts[v.token]]
        quoted = _QUOTED.search(before)
        if quoted and v.key.endswith(quoted[1]):
            v.key = quoted[1]
            continue
        owned = _OWNED.search(before)
        if owned and v.key.endswith(owned[2]):
            v.key = f"{owned[1]}'s {owned[2]}"
