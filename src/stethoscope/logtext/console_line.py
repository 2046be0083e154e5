"""One line of a trainer's console output, read by its shape: the general parser behind `console.py`.

A line is a prefix (launcher rank `[rank0]:`, timestamp, logger `[titan] … - root - INFO -`, `[Rank 0]`,
glog `I0724 11:20:07.402 123 train.py:80]`; a date or clock of any common form, `loglines.skip_stamp`: never
a step), then a step counter (a counter word — `step N`, `step: N`, `iter N/TOTAL`, `it=N`, `update N`,
`Iter(train) [N/T]`, `[batch=N/T]`, `global_step=N` — not inside a name (`time/batch`) nor a setting
(`Total optimization steps = 500`); a bracketed `[N/T]`; Keras' `N/TOTAL [==>..]`; tqdm bars are textlog's),
its epoch when one comes before a counter with a total (`console_epochs`), or a sample counter
(`[640/60000 (1%)]`: no step, the record is numbered in file order), and
metrics in any of the usual shapes: `key: value`, `key value`, `key=value`, `| key value |`,
`{'key': value}`, `value unit` (`3415 tok/s`, `0.0% A100 fp16 MFU`, a bare `224.87 ms`); a `nan` that a
word follows is part of a key (`number of nan iterations`) unless the words before it name a metric
(`loss nan lr 3e-4`). Numbers may carry thousands separators
(`15,723`), magnitudes (`3.1k`) and units (`45.6ms`, `0.33GiB`, `%`); a one-number parenthesis right
after a value (`0.33GiB(1.41%)`, `2.31 (+0.12z)`) is a side figure and is skipped.

Every number is a `NUMBER` token of the whole line, so a parsed line also says which tokens it used:
`console_reader.py` turns that into a plan (and a regex) for the lines of the same shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stethoscope.logtext.loglines import parse_timestamp, skip_stamp

NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+(?![\d.])|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
                    r"|(?<![\w.])[-+]?(?:nan|inf(?:inity)?)(?![\w])", re.IGNORECASE)
ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[\]_^P][^\x07\x1b]*(?:\x07|\x1b\\))")
_LAUNCHER = re.compile(r"\s*(?:\[(?:default|rank)?(\d+)\]:|\[(?:\d+,)?(\d+)\]<std(?:out|err)>:) ?")  # horovod: [N]<stdout>:
# A count in brackets before what heads a line (date, logger, indent) labels the process that printed it
# (MPICH's `mpiexec -l`: `[0] 2024-07-24 11:20:33 INFO ...`): a rank, not a step (a step heads the metrics).
_LABEL = re.compile(r"\s*\[(\d+)\] (?=\s|\[|\(|<|(?:DEBUG|INFO|WARNING|ERROR)\b|\d\d[-/.:]|[A-Z][a-z]{2} |[IWEF]\d{4} )")
# A metric alone on a line indented by blanks (after a launcher's tag), after a header line (OLMo: `[step=10/1000]`,
# then `    train/CE=2.3` a line): a record's continuation, as a tab-indented one (a traceback's frames are no
# `name=number` lines).
_TAG_COUNT = re.compile(r"\[\s*\d+\s*(?:/\s*\d+\s*)?\]|\d+(?i:epoch|batch|batches|iter|iters|step|steps)\b")
_PAIR_LINE = re.compile(r"(?P<tag>[(<\[][^)>\]]*[)>\]]|\S+:|\S+\s+\|)? {2,}[A-Za-z_][^=]*=\s*[-+]?(?:\d|\.\d|(?i:nan|inf))[^=]*$")
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
_LEVELS = frozenset(_LEVEL[3:-1].split("|"))
_LEVEL_HEAD = re.compile(rf"{_LEVEL}:[\w.<>]+:")
# glog/absl's header, and torch's logging's (its source as a path: `W1128 03:04:44.348 4312
# torch/_dynamo/convert_frame.py:844]`) with the compile id of a torch.compile message after it (`[0/8]`: frame 0's
# 8th recompile; `[0/1_1]`): no counter. Found inside a line, what comes before it is a wrapper's prefix (Airflow's).
_GLOG = r"[IWEF]\d{4}\s+\d\d:\d\d:\d\d\.\d+\s+\d+\s+[\w.\-/]+:\d+\](?:\s+\[\d+/\d+(?:_\d+)?\](?!\S))?"
_GLOG_IN = re.compile(rf"(?<![\w.:/\-]){_GLOG}")
_PREFIX = re.compile(
    rf"\s*(?:\[(?:[A-Za-z_][\w.\-]*|Rank\s?\d+|[\w.\-]+:\d+(?::[\w<>.]+)?)\]:?"  # [titan] [INFO] [Rank 0] [f.py:9:fn]
    rf"|{_LEVEL}(?::[\w.<>]+:|\s*[-|:]\s|\s+)"  # INFO:root:  INFO -
    rf"|[-|]\s*[\w.<>]+\s*-\s*(?={_LEVEL})"  # - root - (before INFO)
    rf"|{_GLOG}"
    r"|[\w<>\-]+(?:\.[\w<>\-]+)+(?::[\w<>]+)?:\d+\s+-\s|[\w<>\-]+:[\w<>]+:\d+\s+-\s"  # loguru's `name:function:line - `
    r"|1[5-9]\d{8}\.\d+(?=\s)"  # a Unix time in seconds (2017 to 2033) heading the line: a clock
    r"|\([\w.\-]+:\d+\)|[\w\-]+\.\w+:\d+\]|[\w\-]+\.py:\d+(?=\s)"  # a logger's source line: ESPnet's
    # `(trainer:732)`, `INFO train.py:80]`, LeRobot's `INFO 2026-06-12 10:53:24 ot_train.py:357 step:400`
    r"|[-|:]\s)")
_STEP = re.compile(
    r"\[(?:batch|step|iter|iteration|ba)=(?P<a>\d+)(?:/(?P<at>\d+))?\]"  # Composer [batch=10/100]
    r"|\bglobal[_ ]step['\"]?\s*[:=]?\s*(?P<b>\d+)(?:\.0(?!\d))?(?![\d.])"  # global_step=N (Lightning: N.0)
    r"|\bglobal[_ ]step/max[_ ]steps['\"]?\s*[:=]\s*['\"](?P<s>\d+)/(?P<st>\d+)['\"]"  # ms-swift's '1/94' of max_steps
    r"|\b(?:n|num)_updates['\"]?\s*[:=]?\s*(?P<u>\d+)(?![\d.])"  # the updates made so far (SB3, fairseq)
    r"|\b(?:it|It|IT)\s+(?P<e>\d+)\s*/\s*(?P<et>\d+)(?![\d.])"  # `it 10/1200`: `it` only with a total
    r"|\b(?:it|It|IT)\s*[:=]\s*(?P<g>\d+)(?![\d.])"  # ... or assigned: `it=10`
    # a counter word (not the end of a name: `time/batch`), its value after a blank, `:`, `=`, `#` or inside brackets (`Iter(train) [ 50/1000]`)
    # (or abbreviated with a period: Marian's `Up. 1000` is its updates), or quoted as a JSON value (pycls' `"iter": "20/5005"`)
    r"|(?<![/\-.])\b(?P<word>(?i:step|steps|iter|iters|iteration|update|updates|batch)\b|Up\.)['\"]?\s*(?:\(\w+\)\s*)?[:=#]?\s*"
    r"(?:\[\s*|\"(?=\d+(?:/\d+)?\"))?(?:\d+-(?=\d))?(?P<c>\d{1,3}(?:,\d{3})+(?![\d.])|\d+(?!\d|\.\d))(?:\s*/\s*(?P<ct>\d+))?"
    r"|^\s*(?P<d>\d+)/(?P<dt>\d+)(?=\s|\[|$)")  # Keras `10/100 [==>..]` (tqdm bars are textlog's)
# A counter in brackets with no word before it: `[  50/1000]` is a step counter; with a percentage after it
# (`[640/60000 (1%)]`, PyTorch's examples) it says how far through the data set the epoch is: a sample
# counter, which becomes a step only when the output says so (a counter word).
_FRACTION = re.compile(r"\[\s*(?P<f>\d+)\s*/\s*(?P<ft>\d+)\s*(?P<pct>\(\s*\d+(?:\.\d+)?\s*%\s*\))?\s*\]")
# Counters with no counter word around them, tried when no other counter is on the line: a bracketed count
# heading the metrics (t5x after its absl prefix: `[500] train/loss=2.5`), counts heading the line between
# pipes, the step last and the epoch before it (torchtune: `1|500|Loss: 2.5`), a count glued before its
# counter word, a range of batches by its end, the epoch glued likewise before it (ESPnet:
# `3epoch:train:401-500batch:`, `500iter`).
# A metric follows: `loss=2.5`, `Loss: nan`, `lm loss 2.5` (not `NCCL INFO Channel 00/32`)
_KEYED = r"[A-Za-z_][\w./\-]*(?: [A-Za-z_][\w./\-]*)?(?:\s?[:=]\s*|\s+)[-+]?(?:\d|\.\d|(?i:nan|inf)(?![A-Za-z]))"
# The line's head, or after what a prefix it did not shed ends with: a tag (`(Trainer pid=1234) `), a clock,
# ` - `, `INFO:root:`
_HEAD = r"(?:^|(?<=[\])>\d]\s)|(?<=\s[-|]\s)|(?<=[A-Za-z]:))\s*"
_SEPS = r"[\s|,;:\-│]*"
_FIRST_KEYED = re.compile(rf"(?<![\w./\-]){_KEYED}")
_KEY_WORDS = re.compile(r"[A-Za-z_][\w./\-]*(?: [A-Za-z_][\w./\-]*)?")
_BARE = re.compile(
    rf"{_HEAD}\[\s*(?P<h>\d+)\s*\](?={_SEPS}{_KEYED})"
    rf"|{_HEAD}(?:(?P<pe>\d+)\s*\|\s*)?(?P<p>\d+)\s*\|(?={_SEPS}{_KEYED})"
    r"|(?<![\w.\-])(?:(?P<ge>\d+)(?i:epoch)\b[^\d\s]{0,16})?(?:\d+-)?(?P<gl>\d+)"
    r"(?i:batch|batches|iter|iters|step|steps)\b(?!/)")
# A count heading a line whose loss is printed before its name (tinygrad's examples: `100  221.74 ms run,  2.22 ms
# python,  219.52 ms CUDA,  2.31 loss, 0.000807 LR, ..`): such a line names each value after it, so the count before
# its first value names nothing: it is the step.
_LEADING = re.compile(r"(?:^|(?<=[\])>:]\s)|(?<=\s[-|]\s))\s*(?P<l>\d+)\s{2,}(?=[-+]?\d*\.\d+\s*[A-Za-z%])")
_LOSS_AFTER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|nan|inf)(?:[eE][-+]?\d+)?\s+(?i:loss)\b")
_COUNT_BEFORE = re.compile(r"(?<![\w.])(\d+)\s*$")  # a count right before a sample counter is its epoch
# Words that make a counter word a setting or a count: `Total optimization steps = 500`, `warmup steps: 100`.
_SETTING = re.compile(r"\b(?i:total|max|maximum|num|number\s+of|warmup|warm-up|accumulation|every|per|remaining|"
                      r"save|logging)\b[\w\s]{0,20}$")
# A counter after `for` names the step a line reports on, written after it (TensorFlow's `Saving dict for global
# step 10: accuracy = 0.91, loss = 0.3`: the evaluation at step 10), not that step's own record.
_EPOCH_BEFORE = re.compile(r"\b(?i:epoch)\s*[:=#]?\s*\[\s*$")
# A time in brackets right after a step counter: the time of the steps since the last record (`console_clock`).
_STEPS_TIME = re.compile(r"\s*\(\s*(\d+\.?\d*)\s*(?:sec|s)\s*\)")
STEPS_TIME_KEY = "time of the steps since the last record"
_FOR = re.compile(r"\bfor\s+(?:the\s+)?(?:global[_ ])?$", re.IGNORECASE)
# An epoch before a counter: `Epoch 2`, `epoch=2`, `Epoch(train) [2]`, `Epoch 2/90` (with the number of epochs),
# a JSON field's (pycls' `"epoch": "2/100"`).
_EPOCH = re.compile(r"\b(?i:epoch)\b\"?\s*(?:\(\w+\)\s*)?[:=#]?\s*[\[\"]?\s*(\d+)(?:\s*/\s*\d+)?")
_EVAL_LINE = re.compile(r"\b(?:val|valid|validate|validation|eval|evaluate|evaluation|Eval|Val|Validation|Test|TEST|"
                        r"Validate|Evaluation|EVAL|VAL)\b")
_ROUNDED = re.compile(r"[KM](?![A-Za-z])")  # a count in thousands or millions
_EVAL_WORD = re.compile(_EVAL_LINE.pattern + r"[ \t]+$")  # the word right before a counter: the eval loop's


@dataclass(slots=True)
class Value:
    """One number of a line: the key as written (with its unit), the number's text and token index."""

    key: str
    text: str
    unit: str
    token: int


@dataclass(slots=True)
class Line:
    """A parsed line: step counter (None: none), counter total, eval or not, values, rank, time."""

    step: int | None = None
    total: int | None = None
    eval: bool = False
    values: list[Value] = field(default_factory=list)
    rank: str | None = None
    time: float | None = None
    step_token: int | None = None
    time_token: int | None = None
    bar: bool = False  # a progress-bar counter (Keras, tqdm): restarts every epoch
    epoch: int | None = None  # the epoch printed before a counter with a total (which may count within it)
    progress: bool = False  # a sample counter (`[640/60000 (1%)]`) and no step counter: a record of its own
    count: int | None = None  # a sample counter's count (`total`: its total, `epoch`: a count right before it)
    record: bool = False  # a dict repr or a tab-indented continuation line: belongs to the step before it
    rounded: int = 1  # the step counter is printed rounded to this unit (LeRobot's `step:4K`: 1000)
    body: str = ""


def parse(text: str) -> Line:
    """Parse one ANSI-free physical line segment."""
    out = Line()
    pos = 0
    launcher = _LAUNCHER.match(text) or _LABEL.match(text)
    if launcher:
        out.rank = launcher.group(1) or launcher.group(2)
        pos = launcher.end()
    # Tab-indented (Composer's `\t Train loss/train/total: 2.3`); not space-indented like a traceback's frames.
    indented = text[pos:pos + 1] == "\t" and text[pos:].lstrip()[:1].isalpha()
    for _ in range(8):
        rest = text[pos:].lstrip()
        time, skip = parse_timestamp(rest)
        if skip:
            start = len(text) - len(rest)
            out.time, out.time_token = time, _token_index(text, start, start + skip)
            pos = start + skip
            if not start and (launcher := _LAUNCHER.match(text, pos) or _LABEL.match(text, pos)):
                out.rank, pos = launcher[1] or launcher[2], launcher.end()  # after a CI's time (Jenkins)
            continue
        skip = skip_stamp(rest)  # a date or clock of another form: skipped, never a step (its time not read)
        if skip:
            pos = len(text) - len(rest) + skip
            continue
        m = _PREFIX.match(text, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    if (inner := _GLOG_IN.search(text, pos)) and inner.start() > pos:
        pos = inner.end()
    pair = _PAIR_LINE.match(text, pos)
    if pair and not (pair["tag"] and (_TAG_COUNT.search(pair["tag"]) or _STEP.search(pair["tag"]))):
        # what comes before the indent is the line's tag, not the metric's name (unless it counts: `0iter:`)
        indented, pos = True, pair.end("tag") if pair["tag"] else pos
    body = text[pos:]
    out.body = body
    tags = text[launcher.end() if launcher else 0:pos]  # prefixes say what a line is too: `[Eval]`
    step = _STEP.search(body)
    own = bool(step and step["word"] and (_EVAL_LINE.search(step.group())  # mmengine's `Iter(val) [2/2]`
                                          or _EVAL_WORD.search(body, 0, step.start())))  # PaddleVideo's `val step:0`
    own_span = step.span() if step and own else None  # the eval loop's counter: no value either
    if step and step["word"] and (_SETTING.search(body, 0, step.start()) or own or (
            step["word"].lower() == "batch" and _EVAL_LINE.search(body, 0, step.start()))):
        step = None  # a setting (`Total optimization steps = 500`), an eval's batches (`[Eval batch=20/20]`)
    if step is None and not own:
        step = _FRACTION.search(body)
        if step and _EVAL_LINE.search(body, 0, step.start()):  # torchvision's `Test:   [10/50]`: the eval's batches
            own, own_span, step = True, step.span(), None
        if step and (step["pct"] or int(step["f"]) > int(step["ft"])):
            out.progress = step["pct"] is not None
            cut = (step.start() + pos, step.end() + pos)
            out.values = _values(text, pos, cut)
            epoch = _COUNT_BEFORE.search(body, 0, step.start())  # timm's `Train: 3 [100/1251 (8%)]`: the epoch
            at = _token_index(text, pos + epoch.start(1)) if epoch else None
            out.values = [Value("epoch", v.text, v.unit, v.token) if v.token == at else v for v in out.values]
            out.count, out.total, out.epoch = int(step["f"]), int(step["ft"]), int(epoch[1]) if epoch else None
            out.eval = _EVAL_LINE.search(body[:step.start()]) is not None or _EVAL_LINE.search(tags) is not None
            out.body = body
            return out
    if step is None and not own:
        step = _BARE.search(body)
        if step and step["h"] and _EPOCH_BEFORE.search(body, 0, step.start("h")):
            step = None  # torchvision's `Epoch: [0] Total time: 0:00:05 (0.98 s / it)`: an epoch, not a step
        if step and _EVAL_LINE.search(step.group()):  # ESPnet's `3epoch:valid:1-100batch`: the eval's batches
            own, own_span, step = True, step.span(), None
        if step is None and _LOSS_AFTER.search(body):
            step = _LEADING.search(body)
    if step:
        _read_step(out, step, text, pos)
        unit = _ROUNDED.match(body, step.end())
        out.rounded = 1 if unit is None else 1000 if unit[0] == "K" else 1_000_000
        if out.total is not None and not out.bar:
            epoch = _EPOCH.search(body, 0, step.start())
            out.epoch = int(epoch[1]) if epoch else None
        elif "ge" in step.re.groupindex and (step["ge"] or step["pe"]):
            out.epoch = int(step["ge"] or step["pe"])  # an epoch with no total: `console_epochs` learns it
        elif step.re is _STEP and step["c"] is not None:  # MXNet's `Epoch[2] Batch [20-40]`: likewise
            epoch = _EPOCH.search(body, 0, step.start())
            out.epoch = int(epoch[1]) if epoch else None
    out.eval = _EVAL_LINE.search(body[:step.start()] if step else body[:_head_end(body)]) is not None or (
        step is not None and "Eval" in body[:step.start() + 6]) or _EVAL_LINE.search(tags) is not None or (
        step is not None and _FOR.search(body, 0, step.start()) is not None)
    out.record = body.lstrip().startswith("{") or (indented and step is None)
    span = step.span() if step else own_span
    cut = (span[0] + pos, span[1] + pos) if span else (len(text), len(text))
    out.values = _values(text, pos, cut)
    after = _STEPS_TIME.match(text, cut[1]) if step else None
    if after:  # TensorFlow's `loss = 2.3, step = 1000 (41.234 sec)`: the time of the steps since the last record
        at = _token_index(text, after.start(1))
        out.values = [Value(STEPS_TIME_KEY, v.text, v.unit, v.token) if v.token == at else v for v in out.values]
    if out.eval and step is None:  # when an eval ran, not what it measured (Ignite's `... - Epoch[1] Avg loss: 0.5`)
        out.values = [v for v in out.values if v.key.lower() != "epoch"]
    return settle(out, text, pos)  # the round, quoted names, a split named before an epoch


def _head_end(body: str) -> int:
    """Where the words that head a line without a step end: at its first metric (ESPnet's `3epoch results:
    [valid] loss=2.8` is an eval's; `loss=2.5 val_loss=2.6` is not), within its first 12 characters without one."""
    first = _FIRST_KEYED.search(body)
    if not first:
        return 12
    key = _KEY_WORDS.match(body, first.start())  # its own words may say it (`Val loss: 0.5`), the next key's not
    return max(first.start(), key.end() if key else 0)


def launcher_rank(text: str) -> str | None:
    """The launcher's rank prefix of `text` (`[rank3]:` → "3"), None without one."""
    m = _LAUNCHER.match(text)
    return (m.group(1) or m.group(2)) if m else None


def _read_step(out: Line, m: re.Match[str], text: str, offset: int) -> None:
    for name, total in (("a", "at"), ("b", None), ("c", "ct"), ("d", "dt"), ("e", "et"), ("g", None), ("f", "ft"),
                        ("h", None), ("p", None), ("gl", None), ("u", None), ("s", "st"), ("l", None)):
        if name in m.re.groupindex and m.group(name) is not None:
            out.step = int(m.group(name).replace(",", ""))
            out.total = int(m.group(total)) if total and m.group(total) else None
            out.step_token = _token_index(text, m.start(name) + offset)
            out.bar = name == "d"
            return


def _token_index(text: str, start: int, within: int | None = None) -> int | None:
    """The index of the NUMBER token that starts at `start` (or, given `within`, the first one in
    start..within: a bracketed timestamp's year), None when there is none."""
    for i, m in enumerate(NUMBER.finditer(text)):
        if m.start() == start or (within is not None and start <= m.start() < within):
            return i
        if m.start() > start:
            return None
    return None




from stethoscope.logtext.console_labels import has_loss, settle  # noqa: E402,F401 (it reads this module's names)
from stethoscope.logtext.console_values import MAGNITUDE, _values, key_name  # noqa: E402,F401 (likewise)
