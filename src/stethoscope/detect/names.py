"""Foreign metric names → our vocabulary, with the unit read from the name and a factor to convert it.

`resolve("step_ms")` is `Resolved("perf/step_time_s", 0.001)`: multiply a value by `scale` to get it
in the canonical unit of `name` (seconds, GiB, tokens/s, a fraction for MFU). The quantity comes from
the words of the name (`step`, `iter`, `dt`, `data`, `tokens`, `samples`, `reserved`, `peak`, `rss` …),
the unit from a suffix or a bracket (`_ms`, `_s`, `_sec`, `_us`, `_ns`, `(ms)`, `[ms]`, ` in s`,
`/s`, `per_sec`, `tps`, `_gb`, `_gib`, `_mib`, `_bytes`, `(GiB)`, `(%)` …). A name we do not
understand resolves to itself with scale 1; `recognize` returns None for it instead.

Units are taken at their word: GB/MB/KB are decimal (1e9 bytes, so GB → GiB is × 1e9/2**30 ≈ 0.931)
and GiB/MiB/KiB binary. Trainers that print "GB" over a `/ 1024**3` read 7% low; a leak or a trend
is unaffected (it is relative), and we would rather be wrong the way the log says than guess.

Ambiguities, decided once:
- a bare `time` (no unit) may be a timestamp and `time_s` a cumulative clock: neither is step time;
  `time_ms`/`time (ms)` are (nobody counts a wall clock in milliseconds);
- `elapsed`, `elapsed_time`, `elapsed_s` are the cumulative wall clock (`perf/elapsed_s`);
  `elapsed_ms` and `elapsed time per iteration (ms)` are step time;
- `time/…` is a counter namespace (Composer `time/batch`, Lightning `time/train`): left alone;
- statistics of a series (`_min`, `_max`, `_p95`, `_std`) are not the series; `max`/`peak` on
  memory names the peak series;
- memory figures need both a memory word and a unit (`checkpoint_gb` is not memory); a memory
  figure that names no kind (`memory_gib`) is taken as allocated device memory;
- a step-time word without a unit (`step_time`, `iter_time`) is in seconds; `mfu` without `%` is a
  fraction (nanoGPT's W&B `mfu` is a percentage: its level is 100× off, its trend is right).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from stethoscope.records import (
    CUDA_ALLOCATED, CUDA_PEAK, CUDA_RESERVED, CUDA_TOTAL, DATA_WAIT, EVAL_LOSS, GRAD_NORM, LOSS,
    LOSS_SCALE, LR, MFU, RSS, SAMPLES_PER_S, STEP_TIME, TFLOPS, TOKENS_PER_S,
)

ELAPSED = "perf/elapsed_s"
_GIB = 2.0**30


@dataclass(frozen=True, slots=True)
class Resolved:
    """Our name for a foreign metric, and the factor that takes its values to our unit."""

    name: str
    scale: float = 1.0


_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "secs": 1.0,
               "second": 1.0, "seconds": 1.0}
_MEMORY_UNITS = {"bytes": 1 / _GIB, "kb": 1e3 / _GIB, "kib": 2.0**-20, "mb": 1e6 / _GIB, "mib": 2.0**-10,
                 "gb": 1e9 / _GIB, "gib": 1.0, "tb": 1e12 / _GIB, "tib": 1024.0}
_PERCENT = frozenset({"%", "pct", "percent", "percentage"})
_EVAL = {"val": "eval", "valid": "eval", "validation": "eval", "eval": "eval", "evaluation": "eval",
         "heldout": "eval", "test": "test"}
_EVAL_LOSS_WORDS = frozenset({"nll", "ce", "xent", "xentropy"})  # an eval loss by its maths (val_nll, eval ce)
_PERPLEXITY = frozenset({"ppl", "perplexity"})
CROSS_ENTROPY = "train/cross_entropy"  # the train loss by its maths (`xent`, `nll`): the loss when none is named
# Words that say which value of the train loss a trainer prints, not another quantity: diffusers' `step_loss`,
# kohya's `avr_loss`, Lightning's `loss_step`, `running_loss`, `batch_loss`.
_PER_STEP_LOSS = frozenset({"step", "iter", "batch", "avr", "running", "smoothed"})
# Words that say nothing about the quantity: namespaces, fillers, averaging.
_FILLER = frozenset({"train", "training", "perf", "performance", "metrics", "stats", "timer", "timers", "per",
                     "in", "of", "the", "avg", "mean", "average", "global", "speed", "throughput", "tput", "all",
                     "current", "usage", "torch", "cuda", "gpu", "device", "dev", "sys", "system"})
_DEVICE = frozenset({"device", "dev", "gpu", "rank"})
_TIME_WORDS = frozenset({"time", "timing", "timings", "duration", "latency", "elapsed"})
_STEP_WORDS = frozenset({"step", "steps", "iter", "iters", "iteration", "iterations", "it", "batch", "dt"})
_PHASES = {"data": DATA_WAIT, "dataloader": DATA_WAIT, "dataloading": DATA_WAIT, "reader": DATA_WAIT, "forward": "perf/forward_time_s",
           "fwd": "perf/forward_time_s", "backward": "perf/backward_time_s", "bwd": "perf/backward_time_s",
           "optimizer": "perf/optimizer_time_s", "optim": "perf/optimizer_time_s"}
_PHASE_WORDS = frozenset({"loading", "load", "wait", "inner", "allreduce", "microstep"})
_COUNTED = {**dict.fromkeys(("tokens", "token", "tok", "toks", "tks", "words", "tps", "wps", "tgs"), TOKENS_PER_S),
            **dict.fromkeys(("samples", "sample", "seqs", "sequences", "examples", "images", "imgs"), SAMPLES_PER_S),
            **dict.fromkeys(("it", "its", "iter", "iters", "iterations", "steps", "step", "batches", "batch",
                             "updates", "ups"), "perf/steps_per_s")}
_ITEMS_PER_S = frozenset({"ips", "fps"})  # a rate of items: samples unless its unit says what it counts
_MEMORY_WORDS = frozenset({"mem", "memory", "vram"})
_PEAK = frozenset({"max", "peak"})
_MEMORY_KINDS = {"rss": RSS, "host": RSS, "reserved": CUDA_RESERVED, "cached": CUDA_RESERVED,
                 "allocated": CUDA_ALLOCATED, "alloc": CUDA_ALLOCATED, "active": "memory/cuda_active_gib",
                 "free": "memory/gpu_free_gib", "used": "memory/gpu_used_gib", "total": CUDA_TOTAL,
                 "capacity": CUDA_TOTAL}
_PEAK_KINDS = {CUDA_ALLOCATED: CUDA_PEAK, CUDA_RESERVED: "memory/cuda_max_reserved_gib",
               "memory/cuda_active_gib": "memory/cuda_max_active_gib"}
# Names whose unit the trainer left implicit, or whose words mislead.
_EXACT = {
    # Composer MemoryMonitor: torch.cuda.memory_stats() bytes / 1e9, names without a unit
    **{f"memory/{kind}": Resolved(name, 1e9 / _GIB) for kind, name in (
        ("current_allocated_mem", CUDA_ALLOCATED), ("current_reserved_mem", CUDA_RESERVED),
        ("peak_allocated_mem", CUDA_PEAK), ("peak_reserved_mem", "memory/cuda_max_reserved_gib"),
        ("current_active_mem", "memory/cuda_active_gib"), ("peak_active_mem", "memory/cuda_max_active_gib"))},
    # Composer wall clocks: cumulative seconds
    "wall_clock/train": Resolved("perf/train_wall_s"), "wall_clock/total": Resolved(ELAPSED),
    # DeepSpeed's `step` timer is the optimizer step, not the training step
    "train/samples/elapsed_time_ms_step": Resolved("perf/optimizer_time_s", 1e-3),
    # HF Trainer's end-of-run summary (one whole-run average): kept apart from the per-step series
    "train_runtime": Resolved("train/runtime_s"), "train_samples_per_second": Resolved("train/samples_per_s"),
    "train_steps_per_second": Resolved("train/steps_per_s"), "train_tokens_per_second": Resolved("train/tokens_per_s"),
}
_BRACKET = re.compile(r"[(\[]([^()\[\]]*)[)\]]")
_RATE = re.compile(r"(?:/|\bper )(?:s|sec|secs|second|seconds)\b")
_TIME_PER_STEP = re.compile(r"\b(s|sec|ms)/(it|iter|step|batch)\b")
_SEPARATORS = re.compile(r"[_\-.\s]+")
_WORD = re.compile(r"[a-zµ0-9]+|%")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z][a-z])")  # GradNorm, LearningRate, StepTimeMs: words run together
_UNIT_SUFFIX = re.compile(r"[_\-.](?:ms|s|sec|us|ns)$|\((?:ms|s|sec)\)$")
_LIGHTNING_GRAD_NORM = re.compile(r"^grad_[\d.]+(?:_norm)?_total$")  # Lightning grad_norm(): grad_2.0_norm_total
_LIGHTNING_STATS = re.compile(r"^devicestatsmonitor\.\w+/")


def resolve(raw: str) -> Resolved:
    """Our name for `raw` and the factor to our unit; `Resolved(raw, 1.0)` when we do not know it."""
    return recognize(raw) or Resolved(raw)


@lru_cache(maxsize=4096)  # importers ask once per column, the text importer once per key and line
def recognize(raw: str) -> Resolved | None:
    """Like `resolve`, but None for a name we do not know."""
    text = _LIGHTNING_STATS.sub("", _CAMEL.sub("_", raw.strip()).lower())
    exact = _EXACT.get("_".join(text.replace("-", "_").split()))
    if exact or (text.startswith("time/") and not _UNIT_SUFFIX.search(text)):
        return exact  # time/batch, time/train: counters; time/step_ms carries a unit
    if _LIGHTNING_GRAD_NORM.match(text):
        return Resolved(GRAD_NORM)
    torch_stat = _torch_stat_parts(text)
    if torch_stat:
        return _torch_stat(*torch_stat)
    words = _words(text)
    namespace = next((_EVAL[w] for w in words if w in _EVAL), None)
    if namespace is None and "dev" in words and set(words) & ({"loss", "ppl", "perplexity"} | _EVAL_LOSS_WORDS):
        namespace = "eval"  # dev loss: the development set's (`dev` alone is a device)
    words = [w for w in words if w not in _EVAL and not (namespace == "eval" and w == "dev")]
    found = _loss(words, namespace) or _measure(words, namespace is None)
    if found is None or namespace is None or found.name in (EVAL_LOSS, LOSS):
        return found
    return Resolved(f"{namespace}/{found.name.split('/', 1)[1]}", found.scale)


def _torch_stat_parts(text: str) -> tuple[str, str, str] | None:
    """`<kind>_bytes.<pool>.<stat>` at the end of the name (torch.cuda.memory_stats keys:
    allocated_bytes.all.peak), each part made of word characters, found in linear time (a regex search
    backtracks quadratically over a huge word in a corrupt log)."""
    if "_bytes." not in text:
        return None
    head, _, tail = text.rpartition("_bytes.")
    pool, dot, stat = tail.partition(".")
    if not dot or not _is_word(pool) or not _is_word(stat):
        return None
    i = len(head)
    while i > 0 and _is_word(head[i - 1]):
        i -= 1
    return (head[i:], pool, stat) if i < len(head) else None


def _is_word(s: str) -> bool:
    return bool(s) and (s.replace("_", "a").isalnum())


def _words(text: str) -> list[str]:
    text = _TIME_PER_STEP.sub(r"\1 per step", text).replace("held-out", "heldout").replace("held out", "heldout")
    text = _BRACKET.sub(r" \1 ", " ".join(_SEPARATORS.sub(" ", text).split()))
    text = _RATE.sub(" persec ", text).replace("end to end", "step")  # torchtitan end_to_end(s)
    return _WORD.findall(text)


def _loss(words: list[str], namespace: str | None) -> Resolved | None:
    if "cross" in words:  # beside `cross`, `ent` is entropy's abbreviation (T5X's `cross_ent_loss`)
        words = ["entropy" if w == "ent" else w for w in words]
    if "cost" in words and not set(words) - _FILLER - {"cost", "total", "mean"}:  # the objective (Marian's `Cost`);
        words = ["loss" if w == "cost" else w for w in words]  # a batch's or a reader's cost is its time
    if namespace == "eval" and ({"cross", "entropy"} <= set(words) or _EVAL_LOSS_WORDS & set(words)) and \
            not set(words) - _FILLER - {"language", "lm", "cross", "entropy", "loss", "epoch"} - _EVAL_LOSS_WORDS:
        return Resolved(EVAL_LOSS)  # an eval metric that is the LM loss (LLM Foundry: LanguageCrossEntropy; val_nll)
    if _PERPLEXITY & set(words) and not set(words) - _FILLER - _PERPLEXITY - {"lm", "epoch"}:
        return Resolved(f"{namespace or 'train'}/ppl")  # exp(loss): its trend is the loss's (`detect.overfit`: log)
    if namespace in (None, "train") and "loss" not in words and (
            {"cross", "entropy"} <= set(words) or _EVAL_LOSS_WORDS & set(words)) and \
            not set(words) - _FILLER - {"cross", "entropy", "lm", "token"} - _EVAL_LOSS_WORDS:
        return Resolved(CROSS_ENTROPY)  # OpenNMT's `xent`: the loss by its maths, when no loss is named
    # a loss named by its maths too is the loss (MXNet's `nll-loss`, `ce_loss`, `cross_entropy_loss`); a loss under
    # the name of the model trained is the loss (Chainer's reporter: `main/loss`, `validation/main/loss`)
    rest = set(words) - _FILLER - _PER_STEP_LOSS - {"samples", "reduced", "lm", "loss", "total", "cross",
                                                    "main"} - _EVAL_LOSS_WORDS
    if "cross" in words:  # entropy alone is a policy's entropy term (SB3's `entropy_loss`), not the cross-entropy
        rest.discard("entropy")
    if namespace == "eval":
        rest -= {"epoch"}  # Lightning's val_loss_epoch: an eval is one value per epoch anyway
    if "loss" not in words or rest - {"scale"}:
        return None
    if rest:
        return None if namespace else Resolved(LOSS_SCALE)
    return Resolved({None: LOSS, "eval": EVAL_LOSS}.get(namespace, f"{namespace}/loss"))


def _measure(words: list[str], train: bool) -> Resolved | None:
    units = [w for w in words if w in _TIME_UNITS or w in _MEMORY_UNITS or w in _PERCENT or w == "persec"]
    unit_set = set(units)
    rest = [w for w in words if w not in unit_set]
    if any(w in _MEMORY_UNITS for w in units):
        return _memory(rest, next(_MEMORY_UNITS[w] for w in units if w in _MEMORY_UNITS))
    percent = any(w in _PERCENT for w in units)
    if "mfu" in rest:
        return Resolved(MFU, 0.01 if percent else 1.0) if _only(rest, {"mfu", "estimated"} | _DEVICE) else None
    if {"tflops", "tflop", "gflops", "flops"} & set(rest):
        return _flops(rest, "persec" in units)
    if "persec" in units or {"tps", "wps", "tgs"} & set(rest) or _ITEMS_PER_S & set(rest):
        return _rate(rest)
    if {"lr", "learning"} & set(rest) or {"grad", "gradient", "gnorm"} & set(rest):
        return _optimizer(rest)
    seconds = [_TIME_UNITS[w] for w in units if w in _TIME_UNITS]
    return _time(rest, seconds[-1] if seconds else None, percent, train)


def _only(words: list[str], allowed: frozenset[str] | set[str]) -> bool:
    return all(w in allowed or w in _FILLER for w in words)


def _rate(words: list[str]) -> Resolved | None:
    counted = [_COUNTED[w] for w in words if w in _COUNTED] or [SAMPLES_PER_S] * bool(_ITEMS_PER_S & set(words))
    # PaddlePaddle's `ips`, SB3's `fps` (items, frames per second) count what their unit says, else samples
    if len(set(counted)) != 1 or not _only(words, set(_COUNTED) | _DEVICE | _ITEMS_PER_S | {"timing"}):  # t5x: timing/steps_per_second
        return None
    device = any(w in _DEVICE for w in words) or "tgs" in words
    return Resolved(counted[0] + ("_per_device" if device else ""))


def _flops(words: list[str], per_s: bool) -> Resolved | None:
    if not _only(words, {"tflops", "tflop", "gflops", "flops", "estimated"} | _DEVICE):
        return None
    if "flops" not in words:  # TFLOPs are per device (Megatron, torchtitan, NeMo)
        return Resolved(TFLOPS, 1e-3 if "gflops" in words else 1.0)
    if not per_s:
        return None  # a FLOP count (HF total_flos, Lightning `flops`), not a rate
    return Resolved(TFLOPS if set(words) & _DEVICE else "perf/tflops_total", 1e-12)


def _optimizer(words: list[str]) -> Resolved | None:
    rest = set(words) - _FILLER - {"samples", "opt", "optimizer"}
    if rest in ({"lr"}, {"learning", "rate"}):
        return Resolved(LR)
    if rest in ({"grad", "norm"}, {"gradient", "norm"}, {"gnorm"}, {"grad", "norm", "l2"}):
        return Resolved(GRAD_NORM)
    return None


def _time(words: list[str], unit: float | None, percent: bool, train: bool) -> Resolved | None:
    rest = set(words) - _FILLER
    if unit is not None and "cost" in rest:  # PaddlePaddle's `batch_cost: 0.41 s`: a cost in seconds is a time
        rest = rest - {"cost"} | {"time"}
    phases = {_PHASES[w] for w in rest if w in _PHASES}
    if phases:
        if len(phases) > 1 or not rest <= set(_PHASES) | _PHASE_WORDS | _TIME_WORDS | {"samples"}:
            return None
        if percent:
            return Resolved("perf/data_wait_frac", 0.01) if phases == {DATA_WAIT} else None
        if unit is None and not rest & _TIME_WORDS:
            return None
        name, extra = phases.pop(), sorted(rest & {"inner", "allreduce"})  # DeepSpeed's backward parts
        name = name.replace("_time_s", "".join(f"_{w}" for w in extra) + "_time_s")
        return Resolved(name, 1.0 if unit is None else unit)
    if percent or not rest <= _STEP_WORDS | _TIME_WORDS:
        return None
    if rest & _STEP_WORDS and (unit is not None or rest & _TIME_WORDS):
        return Resolved(STEP_TIME, 1.0 if unit is None else unit)
    if train and unit is not None and unit < 1.0 and rest & _TIME_WORDS:  # time_ms, elapsed_ms (not val_time_ms)
        return Resolved(STEP_TIME, unit)
    if "elapsed" in rest and rest <= {"elapsed", "time"}:  # the cumulative wall clock
        return Resolved(ELAPSED, 1.0 if unit is None else unit)
    return None


def _memory(words: list[str], unit: float) -> Resolved | None:
    rest = set(words) - _FILLER
    if not rest & (_MEMORY_WORDS | set(_MEMORY_KINDS)):
        return None
    kinds = {_MEMORY_KINDS[w] for w in rest if w in _MEMORY_KINDS}
    if len(kinds) > 1 or not rest <= _MEMORY_WORDS | set(_MEMORY_KINDS) | _PEAK:
        return None
    name = kinds.pop() if kinds else CUDA_ALLOCATED
    if rest & _PEAK:
        name = _PEAK_KINDS.get(name)
    return Resolved(name, unit) if name else None


def _torch_stat(kind: str, pool: str, stat: str) -> Resolved | None:
    # torch.cuda.memory_stats() keys (Lightning's DeviceStatsMonitor logs them all): only the
    # all-pools current/peak levels are memory levels; .allocated/.freed are cumulative counters.
    name = _MEMORY_KINDS.get(kind)
    if pool != "all" or stat not in ("current", "peak") or name not in _PEAK_KINDS:
        return None
    return Resolved(_PEAK_KINDS[name] if stat == "peak" else name, 1 / _GIB)


_CLOCK_WORDS = frozenset({"elapsed", "remaining", "eta", "total", "left", "since", "start", "wall", "timestamp",
                          "date", "clock", "tokens", "epoch"})
_BARE_SECONDS = frozenset({"seconds", "secs", "sec"})


@lru_cache(maxsize=4096)
def time_like(raw: str) -> float | None:
    """A name that reads as a time without saying whether it is the step's (`time`, `seconds`, `runtime`,
    `interval_runtime`, `Batch (t)`, `time_s`): the factor to seconds its unit gives, 0.0 when it names none
    (the magnitude decides), None for any other name (known names included). Its values decide whether it
    is a step time: a clock grows on every record, a step time hovers (`detect.throughput`)."""
    if recognize(raw) is not None:
        return None
    words = set(_words(_CAMEL.sub("_", raw.strip()).lower())) - _FILLER
    words -= {"train", "interval", "iteration", "iter", "step", "batch", "loop"}
    words = {"duration" if w == "dur" else w for w in words}  # skorch's epoch table: `dur`
    if not words or words & _CLOCK_WORDS:
        return None
    units = [_TIME_UNITS[w] for w in words if w in _TIME_UNITS and w not in _BARE_SECONDS]
    timing = words & {"time", "timing", "duration", "runtime", "latency"} or words & _BARE_SECONDS or (
        words == {"t"} and raw.strip().lower() != "t")  # Batch (t): a t under a step word, never a bare t
    if not timing or not words <= {"time", "timing", "duration", "runtime", "latency", "t"} | set(_TIME_UNITS):
        return None
    return units[-1] if units else (1.0 if words & _BARE_SECONDS else 0.0)


def names_time_unit(raw: str) -> bool:
    """Whether `raw`'s own words give a time unit (`step_ms`, `iter time (s)`, `seconds`); `step_time` and
    `time` give none: their values' magnitude decides (`detect.step_time_alias.judge_times`)."""
    return any(w in _TIME_UNITS for w in _words(_CAMEL.sub("_", raw.strip()).lower()))
