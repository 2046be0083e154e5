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
  eval ran, never which train step it is, and its loss is never a train loss;
- a count of a total before its counter word in the plural (`|   200/ 2983 batches |`, PyTorch's
  word_language_model) is the step within the epoch printed before it: the batches done of the epoch's;
- a count of a total heading the line's metrics, a comma after it (MONAI's tutorial loop: `12/154, train_loss:
  0.61`), is the batch within the epoch; the epoch is the last `epoch 2/5` line's (`console_epochs.EpochHeads`);
- a global counter (`GLOBAL_STEP: 25`, Coqui TTS; `global_batch_idx: 110`, icefall) is the step, whatever
  counter within the epoch comes before it (`STEP: 24/406`, `batch 10`);
- a number that starts a date (`TIME: 2024-07-24 11:00:03`) is a clock, not a metric's value;
- a line headed by `| >` (Coqui TTS: `     | > loss: 0.56  (0.60)`, a value a line under its `--> STEP` head) is
  the record above continued, when a metric follows (`console_epochs.EpochHeads` marks those under an eval
  head the eval's);
- numbers inside a prefix the line parser left (Ray's `(RayTrainWorker pid=N, ip=A.B.C.D) `, `<rank 0> `, absl's
  glog header after another prefix) are no metrics;
- a dict's item on a line of its own (`pprint`'s ` 'Loss/total_loss': 0.76,`, the TensorFlow Object Detection
  API's loss dict after its `Step N` line) continues the record above;
- a value named the step beside a bar's count (`6400/60000 step: 100`, a tqdm postfix's `step=100`) is the
  step: the bar counts samples or batches;
- Darknet's ` N: loss, avg avg loss, rate rate, ..` heads with the iteration and its loss, `avg` its moving average;
- Deeplearning4j's `Score at iteration N is V` is the train loss: a network's score is its loss function's value;
- a call's value shown as `name(args) = value` (Julia's `@show loss(x, y)`, Flux.jl) is `name`'s, and a Float32
  literal's `f` is its exponent (`4.2778687f0` is 4.2778687, `1.5f-3` 0.0015).
"""

from __future__ import annotations

import re
from typing import Any

from stethoscope.logtext.console_epochs import batch_of
from stethoscope.logtext.console_episodes import episode_step
from stethoscope.logtext.console_owners import owned_counters
from stethoscope.logtext.console_line import _EPOCH, NUMBER, Line, Value, _token_index

# after the line's head, a blank, a bracket or a logger's `name:` (`INFO:root:10:\tlearn: ..`)
_ROUND = re.compile(r"(?:^|(?<=[\s\])>])|(?<=[A-Za-z]:))(?:\[(\d+)\]|(\d+):)\t(?=\s*[A-Za-z_])")
# a count before it (not a date's, a clock's or a name's digits: `worker-0: [24/07/2024 11:50:00] 1000:\t`)
_COUNT = re.compile(r"(?<![\w/:.\-])\d+(?![\w/:.\-])")
_QUOTED = re.compile(r"""['"]([A-Za-z_][^'"\n]{0,60}?)['"]\s*[:=]?\s*$""")
_OWNED = re.compile(r"([A-Za-z_]\w*)'s\s+([A-Za-z_][^:='\n]{0,60}?)\s*[:=]?\s*$")
_OF_TOTAL = re.compile(r"(?<![\w./])(\d+)\s*/\s*(\d+)\s+(?i:batches|steps|iters|iterations)\b")
_GLOBAL = re.compile(r"\b(?i:global[_ ](?:step|batch_idx|batch|iter|iteration))['\"]?\s*[:=]?\s*(\d+)(?![\d.])")
_DATE_AFTER = re.compile(r"-\d\d-\d\d\b")
# `| > lm loss: 2.5`, not loguru's `> File "..", line 9`
_CONTINUED = re.compile(r"(?:^|\s\|\s?)>\s+[A-Za-z_][\w./\-]*(?: [A-Za-z_][\w./\-]*)?:\s*[-+]?\.?\d")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\([^()=\n]{0,60}\)\s*=\s*"
                   r"([-+]?(?:\d+\.?\d*|\.\d+))(?:[eEf]([-+]?\d+))?(?![\w.])")
# a dict's item on a line of its own (`pprint`: ` 'Loss/total_loss': 0.76,`), the dict opened on a line above
_DICT_ITEM = re.compile(r"""(?:^|(?<=\s))(['"])[A-Za-z_][^'"\n]{0,80}\1:\s*[-+]?(?:\d|\.\d|nan|inf)[^,}]*,?\}?\s*$""")
_PREFIX_TEXT = re.compile(r"\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\)|<rank \d+>"
                          r"|(?<!\S)[IWEF]\d{4}\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w.\-]+:\d+\]")
# Deeplearning4j's ScoreIterationListener: `Score at iteration 1000 is 1.4989207272913923`; a network's score is its
# loss function's value on the minibatch (with its regularisation terms): the train loss
_SCORE = re.compile(r"\bScore at iteration \d+ is ([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|NaN)")
# Darknet's detector: ` 1000: 6.745184, 6.957540 avg loss, 0.001000 rate, 3.04 seconds, 64000 images, ..`: the
# iteration, its loss (no name before it) and the loss's moving average (`avg`, Darknet's 0.9/0.1 blend)
_DARKNET = re.compile(r"(?<![\w.:/-])(\d+): ([-+]?\d+\.?\d*|-?nan|-?inf), \S+ avg(?: loss)?, \S+ rate, ")
_STEP_NAMES = frozenset({"step", "global_step", "iter", "iteration", "global step"})
_SPLIT_EPOCH = re.compile(r"\b(?i:val|valid|validation|eval|evaluation|test)\b[^\d\n]{0,24}?\b(?i:epoch)\b")


def settle(line: Line, text: str, pos: int) -> Line:
    """`line` (parsed from `text`, its body from `pos`) with its round, its values' own names and its split."""
    if line.step is None and not line.progress and "\t" in line.body:
        _round(line, text, pos)
    if line.step is None and line.count is None and "/" in line.body:
        _of_total(line, text, pos)
        if line.step is None:
            _batch_of(line, text, pos)
    if "lobal" in line.body or "LOBAL" in line.body:
        _global(line, text, pos)
    if line.bar and line.step is not None and line.values:
        _named_step(line)
    if "'" in text or '"' in text:
        _own_names(line, text)
    if ")" in line.body and "=" in line.body:
        _calls(line, text, pos)
    if "-" in text and any(len(v.text) == 4 for v in line.values):
        _no_dates(line, text)
    if line.step is None and ">" in line.body:
        line.record = line.record or _CONTINUED.search(line.body) is not None
    if line.values and ("pid=" in line.body or "<rank " in line.body or ".py:" in line.body):
        _no_prefix_values(line, text)
    if line.step is None and not line.record and len(line.values) == 1 and _DICT_ITEM.search(line.body):
        line.record = True
    if line.step is None and " avg" in line.body and (darknet := _DARKNET.search(line.body)):
        _darknet(line, text, pos, darknet)
    if line.step is not None and " is " in line.body and (score := _SCORE.search(line.body)):
        line.values = [Value("loss", v.text, v.unit, v.token) if v.key == "is" and v.text == score[1] else v
                       for v in line.values]
    if "teps" in line.body or "TEPS" in line.body:
        owned_counters(line, text, pos)
    if line.step is None and line.body[:12].lstrip()[:2] in ("Ep", "ep", "EP"):
        episode_step(line, text, pos)
    if not line.eval and _SPLIT_EPOCH.search(line.body):
        line.eval = True
        if line.step is None:  # when the eval ran, not what it measured (as `console_line.parse` drops it)
            line.values = [v for v in line.values if v.key.lower() != "epoch"]
    return line


def has_loss(names: Any) -> bool:
    """Whether any of the (name, scale) pairs is a loss or a term of one (the Object Detection API's
    `Loss/classification_loss`, its pprinted dict's first item): what makes a dict a metrics record."""
    return any(name == "train/loss" or name.endswith("/loss") or name.startswith("loss/") for name, _ in names)


def _round(line: Line, text: str, pos: int) -> None:
    head = _ROUND.search(line.body)
    if head is None or _COUNT.search(line.body, 0, head.start()):
        return  # a count after another (`Epoch: [0][50]\tTime ..`, SwAV) is a position within it, not a round
    start = pos + head.start(1 if head[1] is not None else 2)
    token = _token_index(text, start)
    if token is None:
        return
    line.step, line.step_token, line.total, line.record = int(head[1] or head[2]), token, None, False
    line.values = [v for v in line.values if v.token != token]


def _of_total(line: Line, text: str, pos: int) -> None:
    m = _OF_TOTAL.search(line.body)
    token = _token_index(text, pos + m.start(1)) if m else None
    if m is None or token is None or int(m[1]) > int(m[2]):
        return
    epoch = _EPOCH.search(line.body, 0, m.start())
    line.step, line.step_token, line.total = int(m[1]), token, int(m[2])
    line.epoch = int(epoch[1]) if epoch else None
    line.values = [v for v in line.values if v.token not in (token, token + 1)]


def _batch_of(line: Line, text: str, pos: int) -> None:
    m = batch_of(line.body)
    token = _token_index(text, pos + m.start(1)) if m else None
    if m is None or token is None or int(m[1]) > int(m[2]):
        return
    line.step, line.step_token, line.total = int(m[1]), token, int(m[2])
    line.values = [v for v in line.values if v.token not in (token, token + 1)]


def _global(line: Line, text: str, pos: int) -> None:
    m = _GLOBAL.search(line.body)
    token = _token_index(text, pos + m.start(1)) if m else None
    if token is None or token == line.step_token or line.eval:
        return
    line.step, line.step_token, line.total, line.epoch, line.progress = int(m[1]), token, None, None, False
    line.values = [v for v in line.values if v.token != token]


def _no_prefix_values(line: Line, text: str) -> None:
    """Numbers inside a prefix the line parser did not strip are no metrics: Ray's `(RayTrainWorker pid=23817,
    ip=10.0.0.12) `, a `<rank 0> ` tag, absl's glog header after another prefix (`I0724 11:50:00.757000 1405..
    model_lib_v2.py:705] `)."""
    spans = [m.span() for m in _PREFIX_TEXT.finditer(text)]
    if spans:
        starts = [m.start() for m in NUMBER.finditer(text)]
        line.values = [v for v in line.values if v.token >= len(starts)
                       or not any(a <= starts[v.token] < b for a, b in spans)]


def _darknet(line: Line, text: str, pos: int, m: re.Match[str]) -> None:
    step, loss = _token_index(text, pos + m.start(1)), _token_index(text, pos + m.start(2))
    if step is None or loss is None:
        return
    line.step, line.step_token, line.total, line.record = int(m[1]), step, None, False
    line.values = [Value("loss", m[2], "", loss)] + [Value("moving_avg_loss", v.text, v.unit, v.token) if v.key ==
                                                     "avg loss" else v for v in line.values if v.token not in (step, loss)]


def _named_step(line: Line) -> None:
    """A bar's count beside a value named the step (`6400/60000 step: 100 loss: 1.9`, a tqdm postfix's
    `step=100`): the bar counts samples or batches, the named value is the step."""
    named = next((v for v in line.values if v.key.lower() in _STEP_NAMES and v.text.isdigit()), None)
    if named is not None:
        line.step, line.step_token, line.total, line.bar = int(named.text), named.token, None, False
        line.values = [v for v in line.values if v is not named]


def _calls(line: Line, text: str, pos: int) -> None:
    for m in _CALL.finditer(line.body):
        token = _token_index(text, pos + m.start(2))
        if token is not None:
            value = m[2] if m[3] is None else f"{m[2]}e{m[3]}"
            kept = [v for v in line.values if v.token != token and v.key != m[1]]
            line.values = [*kept, Value(m[1], value, "", token)]
    line.values.sort(key=lambda v: v.token)


def _no_dates(line: Line, text: str) -> None:
    ends = [m.end() for m in NUMBER.finditer(text)]
    line.values = [v for v in line.values if not (len(v.text) == 4 and v.token < len(ends)
                                                  and _DATE_AFTER.match(text, ends[v.token]))]


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
