"""Plain-text training logs of the small-and-popular trainers, one regex dialect each.

    nanogpt          iter 3010: loss 2.8811, time 98.12ms, mfu 30.12%   |  step 3000: train loss 2.85, val loss 2.87
    litgpt           iter 7 step 1: loss 1.12, iter time: 1819.72ms (optimizer.step)  |  iter 1: loss 11.07,
                     time: 13381.00ms, speed: 306 toks/s/device  |  Epoch 1 | iter 8 step 1 | loss train: 1.234,
                     val: n/a | iter time: 100.00 ms (step)  |  iter 100: val loss 1.9, val time: 1234.00 ms
    llmc             step    1/18865 | train loss 11.009302 | norm 15.3942 | lr 8.57e-07 | (80.05 ms | 6546 tok/s)
                     s:0 trl:11.0091 lr:0.000001 norm:15.37  |  s:0 tel:11.0092  (main.log)
    modded_nanogpt   step:125/3200 train_loss:4.5 train_time:15807ms step_avg:137.46ms  (val_loss:… too)
    nanochat         step 00020/13920 (0.14%) | loss: 6.73 | lrm: 1.00 | dt: 1350.44ms | tok/sec: 388,235 | mfu: 24.27
    progress         Epoch 0:   6%|██  | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, global_step=3.2e+4]

Steps are the log's own counters (nanoGPT/litgpt: the iteration, or litgpt's optimizer step when each record
is one, `logtext/optimizer_steps.py`; llm.c main.log from 0, its stdout
from 1). Known non-problems are not turned into points: modded-nanogpt's `step_avg:nanms` (a division
by zero before timing starts) and nanoGPT's `mfu -100.00%` (not measured yet). A dict repr written
under a bar (the HF Trainer's `{'loss': 2.3, 'grad_norm': 0.4, …}`, through `tqdm.write`) takes the step of
the outer bar's redraw that follows it and is read by the general console reader's line parser. A bar
drawn again at the same count is one record (as it reads last); a bar reset to 0, an inner bar (an
evaluation's, a smaller total) and a postfix still showing the last evaluation add no step and no eval. A line that is a
tqdm bar and something else (an NCCL error glued on without a newline) gives both the metrics and
a log line; `\\r`-separated bar updates are read one by one. A bar's `key=value` fields are named (and
their units converted) like CSV columns; a step time among them (NeMo's `train_step_timing in s`) wins over
the bar's own smoothed rate. A bar with no `Epoch N:` before it that starts over past its half is the next epoch's
(Keras' TqdmCallback through `logging`); an outer bar counting epochs (`s/epoch`) gives that epoch's evals; a bar
counting examples (datasets' `examples/s`) is never the training bar.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stethoscope.importers.base import ImportedRun
from stethoscope.importers.progress_bars import at_records, num as _num, progress as _progress, put as _put, rates, trained
from stethoscope.logtext.console_line import ANSI
from stethoscope.logtext.loglines import LineKeeper, parse_timestamp, strip_rank
from stethoscope.logtext.names import EPOCH
from stethoscope.logtext.optimizer_steps import named_steps
from stethoscope.importers.source import is_text, read_lines
from stethoscope.logtext.table import PointTable, describe
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LR, MFU, STEP_TIME, TOKENS_PER_S

NAME = "textlog"
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf"
OPT_STEP = "train/optimizer_step"

_CUT = re.compile(r"\b(?:iter|step|loss|Epoch)\b.*\d")

Values = dict[str, float]
Parsed = tuple[int, Values] | None


class _State:
    """What some dialects remember between lines."""

    def __init__(self) -> None:
        self.train_time: tuple[int, float] | None = None  # modded-nanogpt: (step, cumulative ms)
        self.epoch_base: dict[int, int] = {}  # progress bars without global_step: first step of each epoch
        self.epoch_total: tuple[int, int] | None = None
        self.last_step: int | None = None
        self.tail = ""  # text after a progress bar on the same line
        self.bar_total: int | None = None  # the total of the bar the segment just read was
        self.main_total = 0  # the largest bar total seen: the outer (training) bar
        self.bar_done = 0  # that bar's count
        self.other_bar = ""  # the bar the segment just read counts other work: "eval", "other" (its name says)
        self.epoch_bar = False  # the bar the segment just read counts epochs (`s/epoch`): an outer bar of epochs
        self.offset = 0  # an exact global_step less the bar's count
        self.restarts = 0  # the steps of the earlier epochs of a bar with no `Epoch N:` that starts over each epoch
        self.bar_last: dict[int, int] = {}  # the last count of each such bar total
        self.val_at: dict[str, set[int]] = {"iter": set(), "step": set()}  # litgpt's evals by their counter word
        self.main_done = self.main_records = False  # the outer bar ran to its end; records came under it
        self.trained: set[int] = set()  # the totals of bars that records came under (`progress_bars`)
        self.rated: set[int] = set()  # the totals of bars whose rate alone was read
        self.dict_steps: set[int] = set()  # the steps the HF Trainer's dicts were read at


# -- dialect handlers: (match, state) -> (step, values) or None -----------------------------------
def _nanogpt_iter(m: re.Match[str], state: _State) -> Parsed:
    values: Values = {}
    _put(values, LOSS, m["loss"])
    _put(values, STEP_TIME, m["ms"], 0.001)
    mfu = _num(m["mfu"])
    if mfu is not None and mfu >= 0:  # nanoGPT prints -100.00% until it has measured
        values[MFU] = mfu / 100.0
    _put(values, "perf/tokens_per_s_per_device", m["speed"])
    return int(m["iter"]), values


def _nanogpt_eval(m: re.Match[str], state: _State) -> Parsed:
    values: Values = {}
    _put(values, "eval/train_loss", m["train"])
    _put(values, EVAL_LOSS, m["val"])
    return int(m["step"]), values


def _litgpt_iter(m: re.Match[str], state: _State) -> Parsed:
    values: Values = {}
    _put(values, LOSS, m["loss"])
    _put(values, STEP_TIME, m["ms"], 0.001)
    _put(values, OPT_STEP, m["step"])
    if m["epoch"]:
        _put(values, EPOCH, m["epoch"])
    return int(m["iter"]), values


def _litgpt_val(m: re.Match[str], state: _State) -> Parsed:
    values: Values = {}
    _put(values, EVAL_LOSS, m["val"])
    _put(values, "eval/time_s", m["ms"], 0.001)
    state.val_at[m["word"]].add(int(m["iter"]))
    return int(m["iter"]), values


def _llmc_stdout(m: re.Match[str], state: _State) -> Parsed:
    values: Values = {}
    _put(values, LOSS, m["loss"])
    _put(values, GRAD_NORM, m["norm"])
    _put(values, LR, m["lr"])
    _put(values, STEP_TIME, m["ms"], 0.001)
    _put(values, MFU, m["mfu"], 0.01)
    _put(values, TOKENS_PER_S, m["toks"])
    return int(m["step"]), values


def _llmc_main(m: re.Match[str], state: _State) -> Parsed:
    name = {"trl": LOSS, "tel": EVAL_LOSS, "eval": "eval/hellaswag_acc"}[m["kind"]]
    values: Values = {}
    _put(values, name, m["value"])
    _put(values, LR, m["lr"])
    _put(values, GRAD_NORM, m["norm"])
    return int(m["step"]), values


def _llmc_val(m: re.Match[str], state: _State) -> Parsed:
    if state.last_step is None:
        return None
    return state.last_step, {EVAL_LOSS: float(m["val"])}


def _modded(m: re.Match[str], state: _State) -> Parsed:
    step = int(m["step"])
    values: Values = {}
    # later records print no train loss on a train step (`step:5/1770 train_time:400ms step_avg:80ms`): its time
    _put(values, EVAL_LOSS if m["kind"] == "val_loss" else LOSS, m["loss"])
    to_ms = 1.0 if m["unit"] == "ms" else 1000.0  # the optimization track prints `train_time:144.468s`
    _put(values, "perf/train_time_s", m["time"], to_ms / 1000.0)
    avg = _num(m["avg"])
    if avg is not None and math.isfinite(avg):  # `step_avg:nanms` before timing starts: not a value
        values["perf/step_avg_s"] = avg / 1000.0
    train_time = float(m["time"]) * to_ms
    if m["kind"] != "val_loss":
        last = state.train_time
        if last is not None and step > last[0] and train_time >= last[1]:
            values[STEP_TIME] = (train_time - last[1]) / (step - last[0]) / 1000.0
        state.train_time = (step, train_time)
    return step, values


_NANOCHAT = {"loss": (LOSS, 1.0), "lrm": ("opt/lr_multiplier", 1.0), "dt": (STEP_TIME, 0.001),
             "tok/sec": (TOKENS_PER_S, 1.0), "mfu": (MFU, 0.01), "bf16_mfu": (MFU, 0.01), "epoch": (EPOCH, 1.0)}


def _nanochat(m: re.Match[str], state: _State) -> Parsed:
    values: Values = {}
    for field in m["fields"].split("|"):
        key, _, text = field.partition(":")
        spec = _NANOCHAT.get(key.strip())
        if spec:
            _put(values, spec[0], text.strip().removesuffix("ms"), spec[1])
    return int(m["step"]), values


def _nanochat_eval(m: re.Match[str], state: _State) -> Parsed:
    return int(m["step"]), {f"eval/{m['what'].strip().lower().replace(' ', '_')}": float(m["value"])}


def _by_epoch(records: list[Values], step: int | None) -> dict[int, int]:
    """{id(values): step} for dicts that waited for one redraw together: with no bar drawn between them (a log
    that kept only the bars' last states) they are records of their own, not one step. The HF Trainer's
    `epoch` is the global step over the steps of an epoch, and the bar's count reached now is the last dict's
    epoch: each dict's step is its epoch in those units. Empty (all at `step`) when fewer than two carry a loss
    or any lacks the epoch."""
    losses = [v for v in records if LOSS in v]
    if step is None or len(losses) < 2 or any(EPOCH not in v for v in records):
        return {}
    top = max(v[EPOCH] for v in records)
    if not top > 0 or any(b[EPOCH] < a[EPOCH] for a, b in zip(records, records[1:])):
        return {}
    at = {id(v): step * v[EPOCH] / top for v in records}
    ends = [at[id(v)] for v in losses]
    if len(set(map(round, ends))) < len(ends):  # an epoch printed to 2 decimals repeats: the Trainer logs every N
        for i, v in enumerate(losses):  # steps, so its train records are spread evenly between the first and last
            at[id(v)] = ends[0] + (ends[-1] - ends[0]) * i / (len(ends) - 1)
    return {key: round(s) for key, s in at.items()}


def _record(body: str, step: int) -> Parsed:
    from stethoscope.importers.console import record_values

    values = record_values(body)
    return (step, values) if values else None


_DIALECTS: list[tuple[str, re.Pattern[str], Callable[[re.Match[str], _State], Parsed]]] = [
    ("nanogpt", re.compile(rf"\biter (?P<iter>\d+): loss (?P<loss>{_NUM}), time (?P<ms>{_NUM})ms"
                           rf"(?:, mfu (?P<mfu>{_NUM})%)?(?P<speed>)"), _nanogpt_iter),
    ("nanogpt", re.compile(rf"\bstep (?P<step>\d+): train loss (?P<train>{_NUM}), val loss (?P<val>{_NUM})"),
     _nanogpt_eval),
    ("litgpt", re.compile(rf"(?:Epoch (?P<epoch>\d+) \| )?\biter (?P<iter>\d+) step (?P<step>\d+)(?::| \|) loss"
                          rf"(?: train)?:? (?P<loss>{_NUM}),(?: val: \S+ \|)? iter time: (?P<ms>{_NUM}) ?ms"),
     _litgpt_iter),
    ("litgpt", re.compile(rf"\biter (?P<iter>\d+): loss (?P<loss>{_NUM}), time: (?P<ms>{_NUM}) ?ms"
                          rf"(?:, speed: (?P<speed>{_NUM}) toks/s/device)?(?P<mfu>)"), _nanogpt_iter),
    ("litgpt", re.compile(rf"\b(?P<word>iter|step) (?P<iter>\d+): val loss (?P<val>{_NUM}), val time: (?P<ms>{_NUM}) ?ms"),
     _litgpt_val),
    ("llmc", re.compile(rf"\bstep\s+(?P<step>\d+)/\d+ \| (?:train )?loss (?P<loss>{_NUM})(?: \([^)]*\))?\s*\| "
                        rf"norm (?P<norm>{_NUM})(?: \([^)]*\))?\s*\| lr (?P<lr>{_NUM}) \| \(?(?P<ms>{_NUM}) ms"
                        rf"(?: \| (?P<mfu>{_NUM})% bf16 MFU)? \| (?P<toks>{_NUM}) tok/s"), _llmc_stdout),
    ("llmc", re.compile(rf"^s:(?P<step>\d+) (?P<kind>trl|tel|eval):(?P<value>{_NUM})(?: lr:(?P<lr>{_NUM}))?"
                        rf"(?: norm:(?P<norm>{_NUM}))?"), _llmc_main),
    ("llmc", re.compile(rf"^val loss (?P<val>{_NUM})\s*$"), _llmc_val),
    ("modded_nanogpt", re.compile(rf"\bstep:(?P<step>\d+)/\d+ (?:(?P<kind>train_loss|val_loss):(?P<loss>{_NUM}) "
                                  rf"(?:\w+:(?:{_NUM}) )*)?"  # (`val_avg_loss:4.4 val_ema_loss:4.4` beside it)
                                  r"train_time:(?P<time>\d+(?:\.\d+)?)(?P<unit>m?s) step_avg:(?P<avg>\S+?)ms"), _modded),
    ("nanochat", re.compile(r"\bstep (?P<step>\d+)(?:/\d+)? \([\d.]+%\) \|(?P<fields>.*)$"), _nanochat),
    ("nanochat", re.compile(rf"\bStep (?P<step>\d+) \| (?P<what>[\w ]+?): (?P<value>{_NUM})\s*$"), _nanochat_eval),
    ("progress", re.compile(r"(?:Epoch (?P<epoch>\d+)(?:/\d+)?:\s*)?\d+%\|[^|]*\|\s*(?P<n>\d+)(?:\.0+)?/(?P<total>\d+) "
                            r"\[[^,\]]*(?:,\s*(?P<rate>[^,\]]*/(?:s|it)))?(?:,\s*(?P<post>[^\]]*))?\]"), _progress),
]


class TextLogImporter:
    """Text logs of nanoGPT, litgpt, llm.c, modded-nanogpt, nanochat and tqdm/Lightning/NeMo bars."""

    name = NAME

    def sniff(self, path: Path, head: str) -> bool:
        if not is_text(head):
            return False
        head = ANSI.sub("", head) if "\x1b" in head else head  # a bar's numbers coloured (rich)
        lines = [strip_rank(ln[parse_timestamp(ln)[1]:].lstrip()) for ln in head.splitlines()[:5000]]
        return any(pattern.search(seg) for ln in lines for seg in ln.split("\r") for _, pattern, _ in _DIALECTS)

    def read(self, path: Path) -> ImportedRun:
        return read_lines(path, _Reader(path), _CUT)


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.table = PointTable()
        self.keeper = LineKeeper()
        self.state = _State()
        self.dialects: Counter[str] = Counter()
        self.order = list(range(len(_DIALECTS)))  # the dialect that matched last is tried first
        self.warnings: list[str] = []
        self.pending: list[tuple[int, float | None, str]] = []  # dicts waiting for their bar
        self.bar_evals: Values = {}  # the eval values the bar showed last
        self.evaluated = False  # an evaluation's bar ran since the bar last showed eval values
        self.bar_row: tuple[tuple[int, int], int, int, float | None, Values] | None = None  # the bar record shown now
        self.bar_started = False  # the training bar was drawn (at 0/N): the HF Trainer's first dict comes under it
        self.glued: int | None = None  # the step of the bar a pending dict was printed right after

    def line(self, line: int, text: str) -> bool:
        """Read one physical line (tqdm's \r-separated updates one by one); True when it had metrics."""
        found = False
        for segment in text.split("\r"):
            found = self._segment(line, segment) or found
        return found

    def _segment(self, line: int, text: str) -> bool:
        time, skip = parse_timestamp(text)
        body = strip_rank(text[skip:].lstrip(" |"))
        if "\x1b" in body:  # tqdm moves the cursor up (`\x1b[A`) before writing under a nested bar
            body = ANSI.sub("", body)
        self.state.bar_total, self.state.other_bar = None, ""
        parsed = self._parse(body)
        if parsed is None and body.startswith("{") and (self.state.last_step is not None or self.bar_started):
            self.pending.append((line, time, body))  # the HF Trainer's dict: its step is the bar's next redraw
            return True
        if parsed is None:
            if text.strip():
                self.keeper.offer(line, text, self.state.last_step)
            return False
        step, values = parsed
        if self.state.bar_total is not None:
            # a bar reset (Lightning's at an epoch's end) shows what was measured before; an inner bar (an
            # evaluation's, a smaller total) counts its own batches: neither is a training step
            inner = bool(self.state.other_bar) or self.state.bar_total < self.state.main_total
            if self.state.bar_done == 0 or inner:
                self.bar_started = self.bar_started or not inner  # a dict written now waits for the next redraw
                evals = {k: v for k, v in values.items() if k.startswith("eval/")}
                if inner and self.state.epoch_bar and evals and self.state.last_step is not None:
                    self._commit()  # an outer bar of epochs (Keras' TqdmCallback): its postfix holds the epoch's evals
                    self.table.add_values(line, self.state.last_step, time, evals)
                if inner and self.state.other_bar != "other" and self.state.bar_done > 0:
                    self.evaluated = True  # an evaluation's bar ran: the postfix's next eval values are its
                return True
            self._redraw(line, step, time, values)
            self._flush(step)
        else:
            self._commit()
            self._flush(self.state.last_step)
            self.table.add_values(line, step, time, values)
        self.state.last_step = step
        if self.state.tail.lstrip().startswith("{"):  # a dict printed right after the bar: the step the bar shows,
            self.pending.append((line, time, self.state.tail.strip()))  # unless more dicts follow it before the
            self.glued = step  # next redraw (a capture that kept the bars' last states: their epochs place them)
        elif self.state.tail.strip():
            self.keeper.offer(line, self.state.tail, step)
        self.state.tail = ""
        return True

    def _redraw(self, line: int, step: int, time: float | None, values: Values) -> None:
        """A bar drawn again at the count it showed is the same record, as it reads last: Lightning draws a
        new count with the old postfix, then again with the new one, and again with `val_loss=` after an
        evaluation; tqdm redraws after a write. The record is kept until the count moves on."""
        key = (self.state.bar_total, step)
        # the postfix keeps showing the last evaluation's values until the next one (Lightning's val_loss=); a
        # value equal to the last one is a new evaluation's only when an evaluation's bar ran in between (the
        # same value again is the sign of weights that stopped changing)
        shown = {k: v for k, v in values.items() if k.startswith("eval/")}
        carried = set() if self.evaluated and shown else {k for k, v in shown.items() if self.bar_evals.get(k) == v}
        if shown:
            self.evaluated = False
        self.bar_evals.update(shown)
        values = {k: v for k, v in values.items() if k not in carried}
        if self.bar_row is not None and self.bar_row[0] == key:
            self.bar_row[4].update(values)
            return
        self._commit()
        self.bar_row = (key, line, step, time, values)

    def _commit(self) -> None:
        if self.bar_row is not None:
            _, line, step, time, values = self.bar_row
            self.table.add_values(line, step, time, values)
            self.bar_row = None

    def _flush(self, step: int | None) -> None:
        """Dicts written through `tqdm.write` take the step of the outer bar's redraw that follows them: tqdm
        redraws the bar at its current count after a write, while the bar drawn before it may lag by a
        refresh interval, and an inner bar (the Trainer's evaluation) counts its own batches."""
        if self.glued is not None and len(self.pending) == 1:
            step = self.glued
        self.glued = None
        records = [(line, time, _record(body, step)) for line, time, body in self.pending] if step is not None else []
        steps = _by_epoch([r[1] for _, _, r in records if r is not None], step)
        for line, time, parsed in records:
            if parsed is not None:
                self.table.add_values(line, steps.get(id(parsed[1]), parsed[0]), time, parsed[1])
                self.state.dict_steps.add(steps.get(id(parsed[1]), parsed[0]))
                trained(self.state, self.state.bar_total or self.state.main_total)
        self.pending.clear()

    def _parse(self, body: str) -> Parsed:
        for position, index in enumerate(self.order):
            name, pattern, handler = _DIALECTS[index]
            m = pattern.search(body)
            if m is None:
                continue
            parsed = handler(m, self.state)
            if parsed is not None:
                self.dialects[name] += 1
                if position:
                    self.order.insert(0, self.order.pop(position))
                return parsed
        return None

    def result(self) -> ImportedRun:
        self._commit()
        self._flush(self.state.last_step)
        columns, rejected = self.table.build_columns(rates(self.state))
        columns = at_records(columns, self.state.dict_steps)  # the bar's redraws between the dicts: no records
        if self.dialects["litgpt"]:
            columns = named_steps(columns, OPT_STEP, *self.state.val_at.values())  # `iter 400 step 100`, a record a step: the optimizer's
        meta: dict[str, Any] = {}
        if self.state.dict_steps:
            meta["bar_dicts"] = len(self.state.dict_steps)  # records under the loop's bar (`console_fallback`)
        if self.dialects:
            meta["dialect"] = self.dialects.most_common(1)[0][0]
            meta["dialects"] = dict(self.dialects)
        warnings = self.warnings + describe(rejected, lambda line: f"{self.path}:{line}")
        return ImportedRun(str(self.path), NAME, None, meta, warnings, self.keeper.lines(), columns=columns)
