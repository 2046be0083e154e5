"""A generator of trainer console-log grammars (hypothesis strategies), and the oracle that scores a
reader on what it generates.

A log is drawn part by part: a prefix (date or clock, logger, launcher rank, ANSI colour), a progress
counter, separators, metric names and units, a logging cadence, eval lines and the lines a trainer prints
in between (bars, warnings, checkpoints). Every part has a development pool (used while tuning the
reader) and held-out pools, each fixed before the reader was tuned on the one before and looked at once,
for its figure: `SPENT` (the first, then tuned on), `SPENT2` (the second, then tuned on), `HELD` (the
third). `logs("dev")` draws development parts only; `logs(p)` for another pool draws from it and the pools
before it, with at least one part of its own.

The oracle (`score`) reads a generated log with `read_any`, as `stethoscope import` does, and says
`recovered` (every train loss at its true step), `refused` (nothing read: the CLI exits 2), `partial`
(true steps, the loss missing), or `misread` (a step that is not the log's step, a loss value that is
not the train loss). A sample counter (`[640/60000 (1%)]`) is not a step: its records may be numbered
1, 2, 3 … in file order or refused; reading the sample count as the step is a misread.

Used by tests/importers/test_grammar.py (development and spent parts) and bench/log_grammar_rates.py.
"""

from __future__ import annotations

import math
import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

DEV, SPENT, SPENT2, HELD = "dev", "spent", "spent2", "held"
LONG = 0.05  # the share of long logs in `sample` (thousands of records: the readers' paths for long runs)
HELD_OUT: dict[str, set[str]] = {}  # dimension -> the second held-out pool's part names
SPENT_OUT: dict[str, set[str]] = {}  # dimension -> the first held-out pool's (looked at once: now tuned on)
SPENT2_OUT: dict[str, set[str]] = {}  # ... the second's (looked at once: now tuned on)
_POOLS: dict[str, dict[str, list[str]]] = {}


def _pool(dimension: str, dev: list[str], spent: list[str], spent2: list[str], held: list[str]) -> None:
    _POOLS[dimension] = {DEV: dev, SPENT: spent, SPENT2: spent2, HELD: held}
    SPENT_OUT[dimension], SPENT2_OUT[dimension], HELD_OUT[dimension] = set(spent), set(spent2), set(held)


# Units after the values (PaddlePaddle's `avg_batch_cost: 0.41 s`, a data wait `avg_reader_cost: 0.01 s`, a rate
# `ips: 153.3 samples/s`), a rate key after a value (`loss=4.2 samples/sec=153`), two step times of which the
# larger is the step's (ESPnet's `iter_time=1.2e-04 ... train_time=0.417`).
UNIT_EXTRAS = ["batch_cost_s", "reader_cost_s", "ips_samples", "samples_per_sec_key", "part_and_whole_times"]
# Step times under the names and units trainers print them with (each a step time in seconds, `t`, as
# printed), and a data wait that is not one (`_extra`).
STEP_TIME_EXTRAS = ["batch_t_avg", "time_data_avg", "interval_runtime_s", "duration_ms", "batch_time", "iter_time_ms",
                    "step_time_paren_ms", "elapsed_per_iter_ms", "iteration_time_ms", "data_time"]
_EXTRAS_DEV = ["lr", "grad_norm", "time_s", "seconds", "dt_ms", "mem_gib", "mem_mb", "tok_s", "mfu", "nonascii",
               *STEP_TIME_EXTRAS, "steps_per_s", *UNIT_EXTRAS]
# Cumulative clocks (the time since the start, in whole seconds as OpenNMT prints it, or finer): never a step
# time; a reader may difference one into step times when nothing else gives them (their truth: not known).
CLOCK_EXTRAS = ["sec_clock", "wall_clock", "train_time_clock"]
CLOCK_S = 0.4  # the clocks' seconds per step
_MAX_STEP_S = 1.0  # above every printed step time (0.2 to 0.5 s) and a clock's seconds per step: a clock's value


# -- the parts: development, first held-out (spent), second held-out ------------------------------
_pool("date", ["none", "iso_point", "mmdd", "bracket_iso_comma", "clock", "mmddyyyy"],
      ["ddmmyyyy", "iso_comma", "yyyymmdd_slash", "bracket_clock", "iso_t"], ["bracket_ddmmyyyy", "iso_micro", "syslog"],
      ["utc_word", "bracket_iso_offset", "ddmmyyyy_dash"])
_pool("logger", ["none", "info_root", "bracket_info", "dash_root_info", "glog_file"],
      ["hf_bracket", "ray_pid", "name_warning"], ["bracket_name_level", "angle_info", "file_dash"],
      ["bracket_name_bracket_level", "info_pipe"])
_pool("rank", ["none", "torchrun_rank", "torchrun_default", "bracket_Rank"], ["mpirun", "rank_colon", "gpu"],
      ["bracket_R", "paren_rank_eq", "node_gpu"],
      ["worker", "angle_rank"])
_pool("ansi", ["none", "keys"], ["line_bold"], ["values"],
      [])
_pool("counter", ["bracket_bare", "pipe_epoch_step", "glued_epoch_batch", "glued_iter",
                  "step", "step_colon", "Step_total", "iter_total", "bracket_total", "Iteration", "global_step",
                  "mm_iter", "epoch_samples"],
      ["it_eq", "step_eq", "update", "steps_colon", "mm_epoch", "epoch_batch"],
      ["Iteration_colon_total", "bracket_Step", "ITER", "iteration_eq", "epoch_iter", "epoch_of_step"],
      ["epoch_bracket_batch", "it_colon", "Step_colon_total", "bracket_iter", "iters_eq"])
_pool("kv", ["colon", "equals", "space"], ["colon_tight", "equals_spaced"], ["colon_tab", "colon_padded"],
      [])
_pool("fields", ["two_blanks", "pipe", "comma"], ["dash", "tab"], ["double_pipe", "semicolon"],
      ["box"])
_pool("loss_name", ["loss", "train_loss", "Loss", "train/loss", "lm loss", "xent", "step_loss", "avr_loss", "loss_step"],
      ["training_loss", "Train Loss", "trainLoss", "train-loss"], ["Loss/train", "train_loss_step", "LOSS"],
      ["Training Loss", "loss_train", "train/lm_loss", "TrainingLoss"])
_pool("extras", [*_EXTRAS_DEV, *CLOCK_EXTRAS],
      ["interval_runtime", "batch_t", "us_unit"], ["step_time_ms", "it_s", "grad_dash_norm"],
      ["step_time_s", "samples_s"])
_pool("cadence", ["1", "5", "10", "50", "100"], ["7", "25", "200"], ["3", "20", "250"],
      ["2", "40", "500"])
_pool("eval", ["none", "step_val", "dict", "evaluation_eq", "results_valid"], ["bracket_eval", "validation_pipe"],
      ["stars_eval", "val_pipe_step", "validation_loss"],
      ["eval_colon_step", "valid_loss"])
_pool("between", ["none", "tqdm", "userwarning", "saving", "blank"], ["nccl", "saved_at_step"],
      ["shards", "socket_warning", "wandb", "epoch_header"],
      ["plateau", "elastic", "gc"])

_DIMENSIONS = list(_POOLS)
EPOCHAL = ("mm_epoch", "epoch_batch", "epoch_iter", "epoch_of_step", "epoch_bracket_batch")  # counters within epochs


@dataclass(frozen=True)
class Grammar:
    """One drawn grammar: a part name per dimension (`extras` and `between`: several)."""

    parts: dict[str, object]
    seed: int
    n: int
    start: int

    def held_parts(self, pools: dict[str, set[str]] | None = None) -> list[str]:
        out = []
        for dim, value in self.parts.items():
            for v in value if isinstance(value, tuple) else (value,):
                if v in (HELD_OUT if pools is None else pools)[dim]:
                    out.append(f"{dim}={v}")
        return out


@dataclass
class Log:
    """A generated log and its truth."""

    text: str
    grammar: Grammar
    steps: list[int]  # the true step of each train record
    losses: list[float]  # the train loss of each (as printed)
    ordinal: bool = False  # the counter is a sample counter: the records' steps are not printed
    samples: list[int] = field(default_factory=list)
    evals: list[float] = field(default_factory=list)
    step_time: bool = False  # a step time is printed (under some name)
    step_seconds: list[list[float]] | None = None  # each record's step times printed, in s (None: not known)
    clock: bool = False  # a cumulative clock is printed (never a step time)


def _pools(part: str, dim: str) -> list[str]:
    tiers = {DEV: (DEV,), SPENT: (DEV, SPENT), SPENT2: (DEV, SPENT, SPENT2), HELD: (DEV, SPENT, SPENT2, HELD)}[part]
    return [name for tier in tiers for name in _POOLS[dim][tier]]


def _wanted(part: str) -> dict[str, set[str]] | None:
    return {DEV: None, SPENT: SPENT_OUT, SPENT2: SPENT2_OUT, HELD: HELD_OUT}[part]


@st.composite
def grammars(draw: st.DrawFn, part: str = DEV) -> Grammar:
    """A grammar of `part`'s pools (at least one part of its own held-out pool)."""
    parts: dict[str, object] = {}
    for dim in _DIMENSIONS:
        if dim in ("extras", "between"):
            parts[dim] = tuple(draw(st.lists(st.sampled_from(_pools(part, dim)), max_size=3, unique=True)))
        else:
            parts[dim] = draw(st.sampled_from(_pools(part, dim)))
    wanted = _wanted(part)
    if wanted is not None and not any(_is_in(wanted, dim, parts[dim]) for dim in _DIMENSIONS):
        dim = draw(st.sampled_from([d for d in _DIMENSIONS if _POOLS[d][part]]))
        held = draw(st.sampled_from(_POOLS[dim][part]))
        parts[dim] = (held,) if dim in ("extras", "between") else held
    n = draw(st.integers(min_value=3, max_value=40))
    start = draw(st.sampled_from([0, 1, 1000]))
    seed = draw(st.integers(min_value=0, max_value=2**31))
    return Grammar(parts, seed, n, start)


def sample(part: str, rng: random.Random) -> Grammar:
    """A grammar drawn like `grammars(part)`, from `rng` (for the bench: many logs, reproducible, fast)."""
    wanted = _wanted(part)
    while True:
        parts: dict[str, object] = {}
        for dim in _DIMENSIONS:
            if dim in ("extras", "between"):
                parts[dim] = tuple(rng.sample(_pools(part, dim), rng.randint(0, 3)))
            else:
                parts[dim] = rng.choice(_pools(part, dim))
        if wanted is None or any(_is_in(wanted, dim, parts[dim]) for dim in _DIMENSIONS):
            n = rng.randint(4200, 5000) if rng.random() < LONG else rng.randint(3, 40)
            return Grammar(parts, rng.randrange(2**31), n, rng.choice([0, 1, 1000]))


def _is_in(pools: dict[str, set[str]], dim: str, value: object) -> bool:
    return any(v in pools[dim] for v in (value if isinstance(value, tuple) else (value,)))


def logs(part: str = DEV) -> st.SearchStrategy[Log]:
    """Generated logs with their truth."""
    return grammars(part).map(render)


# -- rendering -----------------------------------------------------------------------------------
class _Rand:
    """A small deterministic generator (a log renders the same from its grammar)."""

    def __init__(self, seed: int) -> None:
        self.state = seed * 6364136223846793005 + 1442695040888963407 & (2**64 - 1)

    def random(self) -> float:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return (self.state >> 11) / 2**53

    def choice(self, items: list):
        return items[int(self.random() * len(items)) % len(items)]


def _date(kind: str, t: int) -> str:
    h, m, s = 11 + t // 3600 % 12, t // 60 % 60, t % 60
    ms = (t * 37) % 1000
    return {"none": "", "iso_point": f"2024-07-24 {h:02d}:{m:02d}:{s:02d}.{ms:03d} ",
            "mmdd": f"07/24 {h:02d}:{m:02d}:{s:02d} ", "bracket_iso_comma": f"[2024-07-24 {h:02d}:{m:02d}:{s:02d},{ms:03d}] ",
            "clock": f"{h:02d}:{m:02d}:{s:02d} ", "mmddyyyy": f"07/24/2024 {h:02d}:{m:02d}:{s:02d} ",
            "ddmmyyyy": f"24.07.2024 {h:02d}:{m:02d}:{s:02d} ", "iso_comma": f"2024-07-24 {h:02d}:{m:02d}:{s:02d},{ms:03d} ",
            "yyyymmdd_slash": f"2024/07/24 {h:02d}:{m:02d}:{s:02d} ", "bracket_clock": f"[{h:02d}:{m:02d}:{s:02d}] ",
            "iso_t": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}.{ms:03d}Z ",
            "bracket_ddmmyyyy": f"[24/07/2024 {h:02d}:{m:02d}:{s:02d}] ",
            "iso_micro": f"2024-07-24 {h:02d}:{m:02d}:{s:02d}.{ms:03d}{(t * 7) % 1000:03d} ",
            "syslog": f"Jul 24 {h:02d}:{m:02d}:{s:02d} ", "utc_word": f"2024-07-24 {h:02d}:{m:02d}:{s:02d} UTC ",
            "bracket_iso_offset": f"[2024-07-24T{h:02d}:{m:02d}:{s:02d}+02:00] ",
            "ddmmyyyy_dash": f"24-07-2024 {h:02d}:{m:02d}:{s:02d} "}[kind]


def _logger(kind: str) -> str:
    return {"none": "", "info_root": "INFO:root:", "bracket_info": "[INFO] ", "dash_root_info": "- root - INFO - ",
            "glog_file": "INFO train.py:80] ", "hf_bracket": "[INFO|trainer.py:2345] ",
            "ray_pid": "(Trainer pid=1234) ", "name_warning": "trainer - WARNING - ",
            "bracket_name_level": "[trainer:INFO] ", "angle_info": "<INFO> ", "file_dash": "train.py:80 - ",
            "bracket_name_bracket_level": "[trainer][INFO] ", "info_pipe": "INFO | "}[kind]


def _rank(kind: str) -> str:
    return {"none": "", "torchrun_rank": "[rank0]:", "torchrun_default": "[default0]:", "bracket_Rank": "[Rank 0] ",
            "mpirun": "[1,0]<stdout>:", "rank_colon": "rank0: ", "gpu": "[GPU0] ", "bracket_R": "[R0] ",
            "paren_rank_eq": "(rank=0) ", "node_gpu": "node0/gpu0: ", "worker": "[worker-0] ", "angle_rank": "<rank 0> "}[kind]


_KV = {"colon": ": ", "equals": "=", "space": " ", "colon_tight": ":", "equals_spaced": " = ", "colon_tab": ":\t",
       "colon_padded": ":   "}
_SEP = {"two_blanks": "  ", "pipe": " | ", "comma": ", ", "dash": " - ", "tab": "\t", "double_pipe": " || ",
        "semicolon": "; ", "box": " │ "}


def _prefix(g: Grammar, t: int) -> str:
    p = g.parts
    return _rank(str(p["rank"])) + _date(str(p["date"]), t) + _logger(str(p["logger"]))


def _counter(kind: str, step: int, total: int, per_epoch: int, kv: str) -> tuple[str, int | None]:
    """The counter's text and, for a sample counter, the sample count it shows."""
    if kind == "epoch_samples":
        batch = 32
        samples_per_epoch = per_epoch * batch
        epoch, seen = 1 + step // per_epoch, (step % per_epoch) * batch
        return f"Train Epoch: {epoch} [{seen}/{samples_per_epoch} ({100 * seen // samples_per_epoch}%)]", seen
    if kind in EPOCHAL:
        epoch, batch = 1 + step // per_epoch, step % per_epoch
        return {"mm_epoch": f"Epoch(train) [{epoch}][{batch:>{len(str(per_epoch))}}/{per_epoch}]",
                "epoch_batch": f"epoch {epoch} batch {batch}/{per_epoch}",
                "epoch_iter": f"Epoch {epoch} Iter {batch}/{per_epoch}",
                "epoch_of_step": f"Epoch {epoch}/99 Step {batch}/{per_epoch}",
                "epoch_bracket_batch": f"Epoch [{epoch}/99] Batch [{batch}/{per_epoch}]"}[kind], None
    return {"step": f"step {step}", "step_colon": f"step: {step}", "Step_total": f"Step {step}/{total}",
            "iter_total": f"iter {step}/{total}", "bracket_total": f"[{step:>{len(str(total))}}/{total}]",
            "Iteration": f"Iteration {step}", "global_step": f"global_step{kv}{step}",
            "mm_iter": f"Iter(train) [{step:>{len(str(total))}}/{total}]", "it_eq": f"it={step}",
            "step_eq": f"step={step}", "update": f"update {step}", "steps_colon": f"steps: {step}",
            "Iteration_colon_total": f"Iteration: {step}/{total}", "bracket_Step": f"[Step {step}]",
            "ITER": f"ITER {step}", "iteration_eq": f"iteration={step}", "it_colon": f"it: {step}",
            "Step_colon_total": f"Step: {step}/{total}", "bracket_iter": f"[iter {step}]", "iters_eq": f"iters={step}",
            # no counter word: t5x's `[N]`, torchtune's `epoch|step|`, ESPnet's glued `3epoch:train:1-10batch:`
            "bracket_bare": f"[{step}]", "pipe_epoch_step": f"{1 + step // per_epoch}|{step}|",
            "glued_epoch_batch": f"{1 + step // per_epoch}epoch:train:{max(step - 9, 0)}-{step}batch:",
            "glued_iter": f"{step}iter:"}[kind], None


def _extra(kind: str, r: _Rand, kv: str, step: int = 0) -> tuple[str, float | None]:
    """One other metric as printed, and the step time in seconds when it is one."""
    t = 0.2 + r.random() * 0.3
    elapsed = CLOCK_S * step + r.random() * 0.01  # a cumulative clock: grows with the step (`step`: since the start)
    out = {"lr": (f"lr{kv}{3e-4 * (0.5 + r.random()):.3e}", False),
           "grad_norm": (f"grad_norm{kv}{0.2 + r.random():.4f}", False),
           "time_s": (f"time{kv}{t:.4f}", True), "seconds": (f"seconds{kv}{t:.3f}", True),
           "dt_ms": (f"dt{kv}{t * 1000:.2f}ms", True), "mem_gib": (f"memory{kv}{30 + r.random():.2f}GiB", False),
           "mem_mb": (f"max_mem{kv}{2600 + int(r.random() * 100)}MB", False),
           "tok_s": (f"{15000 + int(r.random() * 1000)} tok/s", False), "mfu": (f"mfu{kv}{40 + r.random():.2f}%", False),
           "nonascii": (f"débit{kv}{800 + r.random() * 10:.1f}", False),
           "batch_cost_s": (f"avg_batch_cost{kv}{t:.5f} s", True), "reader_cost_s": (f"avg_reader_cost{kv}{t / 40:.5f} s", False),
           "ips_samples": (f"ips{kv}{64 / t:.1f} samples/s", False), "samples_per_sec_key": (f"samples/sec{kv}{64 / t:.2f}", False),
           "part_and_whole_times": (f"iter_time{kv}{t / 3000:.1e}, train_time{kv}{t:.3f}", True),
           "steps_per_s": (f"timing/steps_per_second{kv}{1 / t:.5f}", True),  # t5x: the step time is its inverse
           "sec_clock": (f"{int(elapsed)} sec", False), "wall_clock": (f"wall{kv}{int(elapsed)}", False),
           "train_time_clock": (f"train_time{kv}{elapsed * 1000:.0f}ms", False),
           "batch_t_avg": (f"Batch (t){kv}{t:.3f} ({0.35:.3f})", True),
           "time_data_avg": (f"Time{kv}{t:.3f} ({0.35:.3f})  Data{kv}{t / 20:.3f} ({0.02:.3f})", True),
           "interval_runtime_s": (f"interval_runtime{kv}{t:.3f}", True),
           "duration_ms": (f"duration{kv}{t * 1000:.0f}", True),  # no unit: its magnitude says ms
           "batch_time": (f"batch_time{kv}{t:.3f}", True), "iter_time_ms": (f"iter_time{kv}{t * 1000:.1f}ms", True),
           "step_time_paren_ms": (f"step_time(ms){kv}{t * 1000:.1f}", True),
           "elapsed_per_iter_ms": (f"elapsed_time_per_iteration (ms){kv}{t * 1000:.1f}", True),
           "iteration_time_ms": (f"iteration_time{kv}{t * 1000:.0f}", True),
           "data_time": (f"data_time{kv}{t / 20:.4f}", False),
           "interval_runtime": (f"interval_runtime{kv}{t:.3f}", True), "batch_t": (f"Batch (t){kv}{t:.3f}", True),
           "us_unit": (f"fwd{kv}{1000 + int(r.random() * 100)}µs", False),
           "step_time_ms": (f"step_time{kv}{t * 1000:.0f}ms", True), "it_s": (f"{1 / t:.2f} it/s", True),
           "grad_dash_norm": (f"grad-norm{kv}{0.2 + r.random():.4f}", False),
           "step_time_s": (f"step_time_s{kv}{t:.4f}", True), "samples_s": (f"throughput {800 + int(r.random() * 50)} samples/s", False)}[kind]
    return out[0], (t if out[1] else None)


def _loss_text(r: _Rand) -> str:
    value = 2.0 + 3.0 * r.random()
    return r.choice([f"{value:.4f}", f"{value:.6f}", f"{value:.3f}", f"{value:.5E}"])


def _eval_line(kind: str, step: int, value: str, kv: str) -> str:
    return {"step_val": f"step {step}: val loss {value}",
            "results_valid": f"{1 + step // 1000}epoch results: [valid] loss{kv}{value}, acc{kv}0.5, time{kv}10 seconds",
            "dict": f"{{'eval_loss': {value}, 'eval_runtime': 1.5}}",
            "evaluation_eq": f"Evaluation: eval_loss = {value}", "bracket_eval": f"[Eval] step {step} | loss {value}",
            "validation_pipe": f"Validation | loss: {value}", "stars_eval": f"*** eval *** loss {value}",
            "val_pipe_step": f"val | step {step} | loss {value}", "validation_loss": f"Validation loss: {value}",
            "eval_colon_step": f"EVAL: step {step} loss {value}", "valid_loss": f"valid loss {value}"}[kind]


def _between(kind: str, step: int, r: _Rand) -> str:
    n = int(r.random() * 100)
    return {"none": "", "blank": "", "tqdm": f"Evaluating:  {n}%|{'#' * (n // 10):<10}| {n}/100 [00:0{n % 10}<00:10, 9.{n % 10}it/s]",
            "userwarning": f"/usr/lib/python3/site-packages/torch/utils/data.py:{n + 10}: UserWarning: this DataLoader "
                           "will create 8 worker processes",
            "saving": "Saving model checkpoint to /ckpt/run", "nccl": f"node0:{1200 + n}:{1300 + n} [0] NCCL INFO Channel "
                                                                     f"0{n % 4}/32 : 0[{n % 8}] -> 1[{n % 8}] via P2P/IPC",
            "saved_at_step": f"Saved checkpoint at step {step}",
            "shards": f"Loading checkpoint shards:  50%|█████     | 1/2 [00:0{n % 10}<00:01,  1.{n:02d}s/it]",
            "socket_warning": f"[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:"
                              f"{29500 + n} (errno: 99 - Cannot assign requested address).",
            "wandb": f"wandb: Run data is saved locally in /runs/wandb/run-20240724_1120{n % 60:02d}-{n:04d}",
            "epoch_header": f"Epoch {1 + step // 1000}/10",
            "plateau": f"Epoch {n:05d}: reducing learning rate of group 0 to {1e-4 * (1 + n % 5):.4e}.",
            "elastic": f"INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. "
                       f"Result: restart_count={n % 3} master_port={29500 + n} group_rank=0 group_world_size=1",
            "gc": f"gc: collected {100 + n} objects in 0.0{n % 10}s"}[kind]


def render(g: Grammar) -> Log:
    """The log text of grammar `g`, with its truth."""
    r = _Rand(g.seed)
    p = g.parts
    kv = _KV[str(p["kv"])]
    sep = _SEP[str(p["fields"])]
    cadence = int(str(p["cadence"]))
    counter = str(p["counter"])
    epochal = counter == "epoch_samples" or counter in EPOCHAL
    start = 0 if epochal else g.start
    per_epoch = cadence * (3 + int(r.random() * 5)) + (int(r.random() * cadence) if cadence > 1 else 0)
    total = max(start + cadence * g.n, 100) * 2
    ansi = str(p["ansi"])
    extras = [str(e) for e in p["extras"]]  # type: ignore[attr-defined]
    between = [str(b) for b in p["between"]]  # type: ignore[attr-defined]
    log = Log("", g, [], [], ordinal=counter == "epoch_samples")
    log.step_seconds = [] if all(e in _EXTRAS_DEV for e in extras) else None
    log.clock = any(e in CLOCK_EXTRAS for e in extras)
    lines: list[str] = []
    eval_every = 1 + int(r.random() * 4)
    eval_kind = str(p["eval"])
    if log.ordinal and eval_kind in ("step_val", "bracket_eval", "val_pipe_step", "eval_colon_step"):  # a trainer that prints no step prints none there
        eval_kind = "evaluation_eq"
    for i in range(g.n):
        step = start + i * cadence
        head, seen = _counter(counter, step, total, per_epoch, kv)
        loss = _loss_text(r)
        fields = [f"{str(p['loss_name'])}{kv}{loss}"]
        printed = []
        for e in extras:
            text, seconds = _extra(e, r, kv, step - start)
            fields.append(text)
            log.step_time |= seconds is not None
            printed += [] if seconds is None else [seconds]
        if log.step_seconds is not None:
            log.step_seconds.append(printed)
        if ansi == "values":
            fields = [re.sub(r"(-?\d[\d.eE+\-]*)(?=\S*$)", "\x1b[33m\\1\x1b[0m", f, count=1) for f in fields]
        if ansi == "keys":
            fields = [f"\x1b[3{k % 7 + 1}m{f}\x1b[0m" for k, f in enumerate(fields)]
        line = _prefix(g, step * 3) + head + sep + sep.join(fields)
        if ansi == "line_bold":
            line = f"\x1b[1;32m{line}\x1b[0m"
        lines.append(line)
        log.steps.append(step)
        log.losses.append(float(loss))
        if seen is not None:
            log.samples.append(seen)
        if p["eval"] != "none" and i % eval_every == eval_every - 1:
            value = _loss_text(r)
            lines.append(_prefix(g, step * 3 + 1) + _eval_line(eval_kind, step, value, kv))
            log.evals.append(float(value))
        for b in between:
            if r.random() < 0.4:
                lines.append(_between(b, step, r))
    log.text = "\n".join(lines) + "\n"
    return log


# -- the oracle ----------------------------------------------------------------------------------
RECOVERED, REFUSED, PARTIAL, MISREAD = "recovered", "refused", "partial", "misread"


@dataclass
class Outcome:
    kind: str
    why: str = ""
    step_time: bool | None = None  # a step time printed and read (None: none printed)
    seconds: bool | None = None  # every step time read is one the log printed, in s (None: truth not known)


def score(log: Log, directory: str | None = None) -> Outcome:
    """Read `log` as `stethoscope import` does and compare with its truth."""
    from stethoscope.errors import InputError
    from stethoscope.importers import read_any

    with tempfile.TemporaryDirectory(dir=directory) as d:
        path = Path(d) / "train.log"
        path.write_text(log.text, encoding="utf-8")
        try:
            (run,) = read_any(path)
        except InputError as exc:
            return Outcome(REFUSED, str(exc)[:200])
        names, steps, values, _ = (list(c) for c in run.columns)
    outcome = _outcome(log, names, steps, values)
    outcome.seconds = _seconds_read(log, names, steps, values)
    return outcome


def _outcome(log: Log, names: list, steps: list, values: list) -> Outcome:
    from stethoscope.records import LOSS, STEP_TIME

    if not steps:
        return Outcome(REFUSED, "0 steps")
    losses = [(int(s), float(v)) for n, s, v in zip(names, steps, values) if n == LOSS]
    read_time = (STEP_TIME in names) if log.step_time else None
    all_steps = sorted({int(s) for s in steps})
    if log.ordinal:
        if any(s in set(log.samples[1:]) and s not in range(1, log.grammar.n + 1) for s in all_steps):
            return Outcome(MISREAD, f"a sample count read as the step: {all_steps[:8]}")
        want = list(range(1, log.grammar.n + 1))
        got_steps = [s for s, _ in losses]
        if got_steps and got_steps != want:
            return Outcome(MISREAD, f"steps {got_steps[:8]}, want the records numbered {want[:8]}")
        if [v for _, v in losses] != log.losses:
            return _loss_mismatch(losses, log, read_time)
        return Outcome(RECOVERED, step_time=read_time)
    truth = set(log.steps)
    wrong = [s for s in all_steps if s not in truth]
    if wrong:
        return Outcome(MISREAD, f"steps not in the log: {wrong[:6]} (true {log.steps[:6]})")
    want = list(zip(log.steps, log.losses))
    if losses == want:
        return Outcome(RECOVERED, step_time=read_time)
    return _loss_mismatch(losses, log, read_time, want)


def _loss_mismatch(losses: list[tuple[int, float]], log: Log, read_time: bool | None,
                   want: list[tuple[int, float]] | None = None) -> Outcome:
    if not losses:
        return Outcome(PARTIAL, "no train loss read", read_time)
    truth = set(log.losses)
    bad = [(s, v) for s, v in losses if not any(math.isclose(v, t, rel_tol=1e-9) for t in truth)]
    if bad:
        return Outcome(MISREAD, f"losses not the train loss: {bad[:4]}", read_time)
    return Outcome(PARTIAL, f"{len(losses)} of {len(log.losses)} train losses read"
                            f"{'' if want is None else f' (first {losses[:3]} vs {want[:3]})'}", read_time)


def _seconds_read(log: Log, names: list, steps: list, values: list) -> bool | None:
    """Whether the step times read are the ones printed, in seconds, at their records' steps (and none is
    read where none was printed: a data wait is not one), and no value of a cumulative clock is read as one;
    None when the log's truth is not known."""
    from stethoscope.records import STEP_TIME

    if not steps:
        return None
    per_record = int(str(log.grammar.parts["cadence"])) if log.ordinal else 1  # records numbered 1, 2, 3 …
    if log.clock and any(float(v) > _MAX_STEP_S * per_record for n, v in zip(names, values) if n == STEP_TIME):
        return False  # a clock's value read as a step time
    if log.step_seconds is None:
        return True if log.clock else None
    keys = range(1, len(log.step_seconds) + 1) if log.ordinal else log.steps
    truth = {k: t for k, t in zip(keys, log.step_seconds) if t}
    got = [(int(s), float(v)) for n, s, v in zip(names, steps, values) if n == STEP_TIME]
    return {s for s, _ in got} == set(truth) and all(any(abs(v - t) <= 6e-4 for t in truth[s]) for s, v in got)
