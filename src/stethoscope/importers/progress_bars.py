"""tqdm's progress bar in a text log (`Epoch 0:   6%|██  | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6]`),
read for `textlog.py`: the bar's step (its count, `global_step=` when exact, the earlier epochs' totals for a bar
that starts over each epoch), its postfix `key=value` metrics and its rate, and which bar is the training loop's.

The training loop's bar is the one its records come under: a bar with a metric postfix, or the outer bar whose
redraw the HF Trainer's dicts wait for. A bar that ran to its end with no record under it counted other work (a
data set's preparation, `10000/10000 [00:01, 9479.50it/s]`, then `71514/71514`), however large its total: the
next bar, of another total, is the loop's. A bar that carries no metric postfix is a record only of the loop's
bar (its rate is the step time); the rate of another loop's bar (data preparation, an evaluation) is no step's.
"""

from __future__ import annotations

import math
import re
from typing import Any

from stethoscope.logtext.names import metric
from stethoscope.logtext.table import to_float
from stethoscope.records import STEP_TIME

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf"
_RATE = re.compile(rf"\s*({_NUM})\s*(it/s|s/it)")
Values = dict[str, float]
Parsed = tuple[int, Values] | None


_NONFINITE_POINT = re.compile(r"^([-+]?(?:nan|inf))\.0+$", re.IGNORECASE)


def num(text: str | None) -> float | None:
    """A number as a log prints it; a NaN through a format that pads decimals (Lightning's bar: `nan.0`)."""
    if text is None:
        return None
    return to_float(_NONFINITE_POINT.sub(r"\1", text.replace(",", "")))


def put(values: Values, name: str, text: str | None, scale: float = 1.0) -> None:
    number = num(text)
    if number is not None:
        values[name] = number * scale


_EVAL_BAR = re.compile(r"(?i)\b(?:eval(?:uat(?:e|ing|ion))?|valid(?:ation|ating)?|test(?:ing)?|predict(?:ing|ion)?)\b")
"""A bar named so (`Evaluating:`, `Validation DataLoader 0:`) counts an evaluation's batches, never training steps."""


_OTHER_BAR = re.compile(r"(?i)\b(?:load|download|sav|map|tokeni[sz]|preprocess|fetch|convert|writ|read)\w*")
"""...nor does a bar of other work (`Loading checkpoint shards:`, datasets' `Map:`, `Downloading`)."""


_EXAMPLES = re.compile(r"\bexamples/s\b")
"""...nor does a bar that counts examples (datasets' `Adding EOS to train dataset: .. 8939/8939 [..,
5.8e4 examples/s]`): its total is the data set's size, never the count of optimizer steps an epoch takes."""


def progress(m: re.Match[str], state: Any) -> Parsed:
    name = m.string[:m.start()]
    other = _OTHER_BAR.search(name) or _EXAMPLES.search(m.group())
    kind = "eval" if _EVAL_BAR.search(name) else "other" if other else ""
    if kind:
        state.other_bar, state.bar_total, state.bar_done = kind, int(m["total"]), int(m["n"])
        return 0, {}
    fields = dict(_pairs(m["post"] or ""))
    values: Values = {}
    smoothed = "reduced_train_loss" in fields or "train_loss" in fields
    for key, text in fields.items():
        if key in ("global_step", "v_num", "step"):
            continue
        found = metric(key)  # NeMo's `train_step_timing in s=3.13` → perf/step_time_s
        put(values, "train/loss_smoothed" if key == "loss" and smoothed else found.name, text, found.scale)
    rate = _RATE.match(m["rate"] or "")
    if rate and STEP_TIME not in values:  # a step time in the fields is exact; the bar's rate is smoothed
        number = float(rate.group(1))
        if number > 0:
            values[STEP_TIME] = 1.0 / number if rate.group(2) == "it/s" else number
    state.tail = m.string[m.end():]
    state.epoch_bar = re.search(r"\ds/epoch|epoch/s", m.group()) is not None
    step = _progress_step(m, fields, state)
    total = state.bar_total
    if values.keys() - {STEP_TIME}:  # a metric postfix: this bar's loop is the training's
        trained(state, total)
    elif STEP_TIME in values:  # its rate alone: a step time only if this bar turns out to be the loop's
        state.rated.add(total)
        values = {rate_name(total): values[STEP_TIME]}
    return step, values


def rate_name(total: int) -> str:
    """The name a bar's rate is held under until the reader knows whether the bar of `total` is the loop's."""
    return f"{STEP_TIME}@{total}"


def trained(state: Any, total: int | None) -> None:
    """Records came under the bar of `total` (its postfix, the dicts its redraw took): it is the training loop's."""
    if total is not None:
        state.trained.add(total)
        state.main_records = state.main_records or total == state.main_total


def at_records(columns: Any, steps: set[int]) -> Any:
    """`columns` with the bar's step times only at `steps`, the counts the HF Trainer's dicts were read at: where
    the loop's records are the dicts under its bar, the redraws between them (`249/5500`, `250/5500`, then the
    dict) are no records, and the rate the bar showed when a dict came is that record's step time."""
    if not steps or STEP_TIME not in columns.names:
        return columns
    keep = [n != STEP_TIME or s in steps for n, s in zip(columns.names, columns.steps)]
    return type(columns)(*([x for x, k in zip(column, keep) if k] for column in columns))


def rates(state: Any) -> dict[str, str | None]:
    """What each bar's rate is named at the end: the step time of the loop's bars, none of another loop's bars
    (when no bar had a record under it, each bar's rate stays: `console.console_fallback` weighs such a read)."""
    keep = state.trained or state.rated
    return {rate_name(total): STEP_TIME if total in keep else None for total in state.rated}


def _pairs(text: str) -> list[tuple[str, str]]:
    """A bar's postfix `key=value` pairs; a value is its first figure (a bracketed one after it is a running
    average or a time: `loss=2.34 (2.41)`)."""
    out = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            out.append((key.strip(), value.split(" (", 1)[0].strip()))
    return out


def _progress_step(m: re.Match[str], fields: dict[str, str], state: Any) -> int:
    """The global step: `global_step=` when exact; else the bar's counter (when it agrees with a rounded
    `global_step=3.2e+4`), offset by the earlier epochs' totals for bars that restart each epoch."""
    done, total = int(m["n"]), int(m["total"])
    if total != state.main_total and state.main_done and not state.main_records:
        state.main_total = 0  # the bar before ran to its end with no record under it: other work, not the loop
    if total > state.main_total:
        state.main_records = False
    state.bar_total, state.main_total, state.bar_done = total, max(state.main_total, total), done
    state.main_done = done >= total if total == state.main_total else state.main_done
    epoch = int(m["epoch"]) if m["epoch"] else 0
    text = fields.get("global_step") or fields.get("step")
    exact = num(text) if text and "e" not in text.lower() else None
    if epoch not in state.epoch_base:
        last_epoch = state.epoch_total
        state.epoch_base[epoch] = 0 if last_epoch is None else state.epoch_base[last_epoch[0]] + last_epoch[1]
    state.epoch_total = (epoch, total)
    if not m["epoch"] and total >= state.main_total:  # a bar past its half that starts over: an epoch on
        last = state.bar_last.get(total, 0)
        state.restarts += total if done < last and 2 * done < total <= 2 * last else 0
        state.bar_last[total] = done
    step = state.epoch_base[epoch] + done + (0 if m["epoch"] else state.restarts)
    if exact is not None and exact.is_integer():  # the offset to the bar's count (Lightning's global_step counts
        state.offset = int(exact) - step  # from 0, its bar from 1): the same where it prints rounded (`1e+3`)
        return int(exact)
    step += state.offset
    rounded = num(text)
    if rounded is not None and not _agrees(step, rounded, text or ""):
        return int(rounded)
    return step


def _agrees(step: int, rounded: float, text: str) -> bool:
    digits = len(text.lower().split("e")[0].replace(".", "").lstrip("-+0")) or 1
    unit = 10 ** (math.floor(math.log10(abs(rounded))) - digits + 1) if rounded else 1
    return abs(step - rounded) <= unit / 2
