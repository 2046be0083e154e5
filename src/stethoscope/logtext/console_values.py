"""The values of one console line (`console_line.parse`): each number a `NUMBER` token of the whole line, its key the
words before it (`loss: 2.3`, `loss=2.3`, `| loss 2.3 |`, `{'loss': 2.3}`) or after it (`3415 tok/s`), its unit glued
or spaced (`45.6ms`, `0.33 GiB`, `%`); a one-number parenthesis right after a value, or one that repeats the units
before it, is a side figure; `key_name` is the name a key as written is resolved by."""

from __future__ import annotations

import re

from stethoscope.logtext.console_line import _LEVEL_HEAD, _LEVELS, NUMBER, Value
from stethoscope.logtext.names import CAMEL, known

_TOKEN = re.compile(
    r"(?P<num>" + NUMBER.pattern + r")"
    r"(?P<unit>(?:(?:[kKMB]|(?-i:G))(?![A-Za-z_])|\s?(?:%|(?:ms|us|µs|ns|s|sec|min)(?:/(?:it|iter|step|batch))?(?![A-Za-z])|"
    r"GiB|MiB|KiB|GB|MB|KB|TB|TiB|(?:tok|toks|tokens|samples|seqs|it|iters|steps)?/s(?:ec)?(?![A-Za-z])"
    r"(?!\s+[-+]?\.?\d)|"  # a rate's unit before a number is that number's key: `loss 4.2 samples/sec 153`
    r"x(?![A-Za-z])))(?!\s*[:=]|/))?"  # a unit before `=`/`:` is the next key (`loss=4.2 samples/sec=153`, `s/it:`)
    r"|(?P<word>[A-Za-z_][\w./\-]*(?:\([A-Za-z%/]+\)|\[[A-Za-z%/]+\]|%(?![\w%]))?)"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])|(?P<assign>[:=]\s*)|(?P<sep>[|,;]|\s-\s|\t)",
    re.IGNORECASE)
_KEY_UNIT = re.compile(r"\([A-Za-z%/]{1,8}\)")  # a unit or a letter in brackets after a key's words
_WORD_AFTER = re.compile(r"[ \t]*[A-Za-z_]")
_KEY_AFTER = re.compile(r"[\w.\-]*\s*[:=]|\s+[-+]?\.?\d")  # the rest of a key, then its value
_TIME_UNITS = {"ms", "us", "µs", "ns", "s", "sec", "min"}
# Words that mean something in a trainer's line but not to the resolver (see the module docstring of
# `detect/names.py`): llm.c's bare `norm` is the gradient norm, `took` a step time.
_SYNONYMS = {"norm": "grad_norm", "took": "time", "took time": "time"}
_SKIP_KEYS = {"eta", "v_num", "epoch_step", "remaining", "remaining time", "total time", "step", "iter", "iteration",
              "global step", "global_step", "micro step", "micro_step"}
_GROUP0_LR = re.compile(r"(?:^|\s)lr-[A-Za-z]\w*/group0$")
_COMPOSER = re.compile(r"^(?:Train|Eval) (?=\S*/)")  # Composer's console prefix: `Train loss/train/total`


def _values(text: str, pos: int, cut: tuple[int, int]) -> list[Value]:
    """The key/value pairs of `text[pos:]`, the step counter's span `cut` excepted."""
    starts = {m.start(): i for i, m in enumerate(NUMBER.finditer(text))}
    values: list[Value] = []
    words: list[str] = []
    keyless: list[tuple[str, str, int]] = []  # numbers without a key before them, waiting for words after
    skip_paren = skip_to = 0
    last_was_value = assigned = False
    for m in _TOKEN.finditer(text, pos):
        if m.start() < skip_to:
            continue
        if cut[0] <= m.start() < cut[1]:
            words, last_was_value = [], False
            continue
        kind = m.lastgroup if m.lastgroup != "unit" else "num"
        after_assign, assigned = assigned, kind == "assign"
        if skip_paren:
            skip_paren += kind == "open"
            skip_paren -= kind == "close"
            continue
        if kind == "num":
            token = starts.get(m.start())
            unit = (m.group("unit") or "").strip()
            if token is None:
                words = []
                continue
            if words and text[m.start() - 1:m.start()] == "@" and _KEY_AFTER.match(text, m.end()):
                words[-1] += f"@{m.group()}"  # `mean@32: 0.51`, `recall@5=0.8`: a number of the key's name
                continue
            if (m.group("num")[-1:].isalpha() and not after_assign and _WORD_AFTER.match(text, m.end())
                    and not (words and known(" ".join(words)))):
                words.append(m.group("num"))  # `number of nan iterations:`: a word of a key, not a NaN
                continue  # (but `loss nan lr 3e-4`: the words before already name a metric, so it is its value)
            if words:
                values.append(Value(" ".join(words), m.group("num"), unit, token))
                words = []
            else:
                keyless.append((m.group("num"), unit, token))
            last_was_value = True
            continue
        if kind == "word":
            if m.group("word") in _LEVELS:  # a log level is a prefix's word (`colossalai - INFO: loss: 2.3`),
                head = _LEVEL_HEAD.match(text, m.start())  # and so is its logger (`INFO:tensorflow:`)
                words, skip_to = [], head.end() if head else skip_to
                continue
            words.append(m.group("word"))
            last_was_value = False
            continue
        if kind == "open" and values and last_was_value and (
                _one_number_group(text, m.end()) or _repeats_units(text, m.end(), values, keyless)):
            skip_paren = 1
            continue
        unit = _KEY_UNIT.match(text, m.start()) if kind == "open" and words else None
        if unit:  # `step time (ms): 350`, `Batch (t) 0.25`: the bracket is part of the key
            words.append(unit.group())
            skip_paren = 1
            continue
        if kind == "assign" or (kind == "open" and words and text[m.start()] == "["):
            continue  # `key: value`, `key=[value]`
        _flush_keyless(values, keyless, words)
        words, last_was_value = [], False
    _flush_keyless(values, keyless, words)
    return values


def _one_number_group(text: str, start: int) -> bool:
    end = text.find(")", start)
    if end < 0:
        return False
    inner = text[start:end]
    return len(NUMBER.findall(inner)) == 1 and not re.search(r"\d\s?(?:ms|s|sec|us)\b", inner)


def _repeats_units(text: str, start: int, values: list[Value], keyless: list[tuple[str, str, int]]) -> bool:
    """Whether the parenthesis opened at `start` repeats the units of the numbers just before it, in order: their
    running averages (timm's `Time: 0.401s, 640.00/s (0.393s, 600.00/s)`), a side figure; llm.c's
    `lr 8.6e-07 | (80.05 ms | 6546 tok/s)` brings numbers of their own."""
    end = text.find(")", start)
    inner = [(m.group("unit") or "").strip() for m in _TOKEN.finditer(text, start, max(end, start))
             if m.lastgroup in ("num", "unit")]
    prior = [u for _, u in sorted([(v.token, v.unit) for v in values] + [(k[2], k[1]) for k in keyless])]
    return 0 < len(inner) <= len(prior) and any(inner) and prior[-len(inner):] == inner


def _flush_keyless(values: list[Value], keyless: list[tuple[str, str, int]], words: list[str]) -> None:
    """Numbers that came without a key: `3415 tok/s`, `0.0% A100 fp16 MFU` take the words after them;
    a bare time (`224.87 ms`, Keras `20ms/step`) is the step time."""
    if not keyless:
        return
    if len(keyless) == 1 and words:
        text, unit, token = keyless[0]
        values.append(Value(" ".join(words), text, unit, token))
    else:
        per_step = [k for k in keyless if "/" in k[1] and k[1].split("/")[0] in _TIME_UNITS]
        times = per_step or [k for k in keyless if k[1] in _TIME_UNITS]
        if len(times) == 1:
            text, unit, token = times[0]
            values.append(Value("time", text, unit.split("/")[0], token))
        for text, unit, token in keyless:
            if "/" in unit and unit.split("/")[0] not in _TIME_UNITS | {""}:  # a bare `640.00/s`: a rate of what?
                values.append(Value(unit, text, "", token))
    keyless.clear()


def key_name(key: str, unit: str) -> str | None:
    """The name to resolve for a key as written and its attached unit; None for keys that are not metrics."""
    if _GROUP0_LR.search(key):  # Composer's LRMonitor: lr-DecoupledAdamW/group0
        return "lr"
    key = _COMPOSER.sub("", key)
    if key.endswith("%"):  # `data_wait% 5`: a percentage, as `data_wait(%)`
        key = f"{key[:-1]}(%)"
    plain = " ".join(CAMEL.sub(" ", key).replace("_", " ").split()).lower()
    if plain in _SKIP_KEYS or not plain:
        return None
    if "mfu" in plain.split():
        plain = "mfu"
    plain = plain.replace("curr ", "current ")
    if plain.endswith(" step") and known(plain[:-5]):  # Lightning's `train_loss_step`: the per-step value
        plain = plain[:-5]
    plain = _SYNONYMS.get(plain, plain)
    if unit in ("k", "K", "M", "G", "B", "x") or not unit:
        return plain
    return f"{plain} ({unit})"


MAGNITUDE = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9}  # a letter glued to a number: its unit, no key
