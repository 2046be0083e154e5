"""A generator of trainer console-log grammars (hypothesis strategies), and the oracle that scores a
reader on what it generates.

A log is drawn part by part: a prefix (date or clock, logger, launcher rank, ANSI colour), a progress
counter, separators, metric names and units, a logging cadence, eval lines and the lines a trainer prints
in between (bars, warnings, checkpoints). Every part has a development pool (used while tuning the
reader) and held-out pools, each fixed before the reader was tuned on the one before and looked at once,
for its figure, then tuned on: `SPENT` .. `SPENT13` (forms in `log_grammar_forms.py`, `_fifth.py` .. `_thirteenth.py`;
figures in `log_grammar_rates.py`), and `HELD` (the fourteenth, in `log_grammar_fourteenth.py` and `_fourteenth_dress.py`).
`logs("dev")` draws development parts only; `logs(p)` for another pool draws from it and the pools before
it, with at least one part of its own.

The oracle (`score`, in `log_grammar_oracle.py`) reads a generated log with `read_any`, as `stethoscope
import` does, and says `recovered` (every train loss at its true step), `refused` (nothing read: the CLI exits 2), `partial`
(true steps, the loss missing), or `misread` (a step that is not the log's step, a loss value that is
not the train loss). A sample counter (`[640/60000 (1%)]`) is not a step: its records may be numbered
1, 2, 3 … in file order or refused; reading the sample count as the step is a misread.

Used by tests/importers/test_grammar.py (development and spent parts) and bench/log_grammar_rates.py.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

import log_grammar_eighth as eighth
import log_grammar_eleventh as eleventh
import log_grammar_fifth as fifth
import log_grammar_forms as forms
import log_grammar_fourteenth as fourteenth
import log_grammar_ninth as ninth
import log_grammar_seventh as seventh
import log_grammar_sixth as sixth
import log_grammar_tenth as tenth
import log_grammar_thirteenth as thirteenth
import log_grammar_twelfth as twelfth
from log_grammar_oracle import MISREAD, PARTIAL, RECOVERED, REFUSED, Outcome, score  # noqa: F401 (the oracle)

DEV, SPENT, SPENT2, SPENT3, SPENT4, SPENT5, SPENT6, SPENT7, SPENT8, SPENT9, SPENT10, SPENT11, SPENT12, SPENT13, HELD = (
    "dev", "spent", "spent2", "spent3", "spent4", "spent5", "spent6", "spent7", "spent8", "spent9", "spent10", "spent11",
    "spent12", "spent13", "held")
TIERS = (DEV, SPENT, SPENT2, SPENT3, SPENT4, SPENT5, SPENT6, SPENT7, SPENT8, SPENT9, SPENT10, SPENT11, SPENT12, SPENT13,
         HELD)
LONG = 0.05  # the share of long logs in `sample` (thousands of records: the readers' paths for long runs)
HELD_OUT: dict[str, set[str]] = {}  # dimension -> the fourteenth held-out pool's part names
SPENT_OUT: dict[str, set[str]] = {}  # dimension -> the first held-out pool's (looked at once, tuned on)
SPENT2_OUT: dict[str, set[str]] = {}  # ... the second's, ..
SPENT3_OUT: dict[str, set[str]] = {}
SPENT4_OUT: dict[str, set[str]] = {}
SPENT5_OUT: dict[str, set[str]] = {}
SPENT6_OUT: dict[str, set[str]] = {}
SPENT7_OUT: dict[str, set[str]] = {}
SPENT8_OUT: dict[str, set[str]] = {}
SPENT9_OUT: dict[str, set[str]] = {}
SPENT10_OUT: dict[str, set[str]] = {}
SPENT11_OUT: dict[str, set[str]] = {}
SPENT12_OUT: dict[str, set[str]] = {}
SPENT13_OUT: dict[str, set[str]] = {}
OUT = {SPENT: SPENT_OUT, SPENT2: SPENT2_OUT, SPENT3: SPENT3_OUT, SPENT4: SPENT4_OUT, SPENT5: SPENT5_OUT,
       SPENT6: SPENT6_OUT, SPENT7: SPENT7_OUT, SPENT8: SPENT8_OUT, SPENT9: SPENT9_OUT,
       SPENT10: SPENT10_OUT, SPENT11: SPENT11_OUT, SPENT12: SPENT12_OUT, SPENT13: SPENT13_OUT, HELD: HELD_OUT}
_POOLS: dict[str, dict[str, list[str]]] = {}


def _pool(dimension: str, *tiers: list[str]) -> None:
    _POOLS[dimension] = dict(zip(TIERS, tiers, strict=True))
    for tier, names in zip(TIERS[1:], tiers[1:]):
        OUT[tier][dimension] = set(names)


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
# The fourth held-out part's metrics: MaxText's, detectron2's, YOLOX's, torchvision's, MXNet's, TensorFlow's.
HELD_EXTRAS = ["tflops_device", "tokens_device", "total_weights", "max_mem_M", "mem_Mb", "iter_time_s", "data_time_s",
               "input_size", "eta_days", "max_mem_space", "data_space", "img_s", "speed_samples_sec", "paren_sec",
               "loss_part_cls", "loss_part_iou"]
LOSS_PARTS = ("loss_part_cls", "loss_part_iou")
CLOCK_S = forms.CLOCK_S


# -- the parts: development, then the held-out pools in the order they were made (HELD last) --
_pool("date", ["none", "iso_point", "mmdd", "bracket_iso_comma", "clock", "mmddyyyy"],
      ["ddmmyyyy", "iso_comma", "yyyymmdd_slash", "bracket_clock", "iso_t"], ["bracket_ddmmyyyy", "iso_micro", "syslog"],
      ["utc_word", "bracket_iso_offset", "ddmmyyyy_dash"],
      ["loguru_ms", "rich_bracket", "cri"],
      ["rfc3339_nano", "paddle_bracket", "aws_tail"], sixth.DATES, seventh.DATES, eighth.DATES, ninth.DATES, tenth.DATES,
      eleventh.DATES, twelfth.DATES, thirteenth.DATES, fourteenth.DATES)
_pool("logger", ["none", "info_root", "bracket_info", "dash_root_info", "glog_file"],
      ["hf_bracket", "ray_pid", "name_warning"], ["bracket_name_level", "angle_info", "file_dash"],
      ["bracket_name_bracket_level", "info_pipe"],
      ["loguru_level", "rich_colossal", "info_tensorflow"],
      ["ppdet_engine", "paddlenlp_level", "nemo_bracket"], sixth.LOGGERS, seventh.LOGGERS, eighth.LOGGERS, ninth.LOGGERS, tenth.LOGGERS,
      eleventh.LOGGERS, twelfth.LOGGERS, thirteenth.LOGGERS, fourteenth.LOGGERS)
_pool("rank", ["none", "torchrun_rank", "torchrun_default", "bracket_Rank"], ["mpirun", "rank_colon", "gpu"],
      ["bracket_R", "paren_rank_eq", "node_gpu"],
      ["worker", "angle_rank"],
      ["horovod_gloo", "srun_label"],
      ["ray_train_worker", "sagemaker_mpi"], sixth.RANKS, seventh.RANKS, eighth.RANKS, ninth.RANKS, tenth.RANKS,
      eleventh.RANKS, twelfth.RANKS, thirteenth.RANKS, fourteenth.RANKS)
_pool("ansi", ["none", "keys"], ["line_bold"], ["values"],
      [],
      ["rich_numbers"],
      [], ["crlf"], seventh.DRESS, eighth.DRESS, ninth.DRESS, tenth.DRESS,
      eleventh.DRESS, twelfth.DRESS, thirteenth.DRESS, fourteenth.DRESS)  # how a line is dressed: colours, line ends, wrappers
_pool("counter", ["bracket_bare", "pipe_epoch_step", "glued_epoch_batch", "glued_iter",
                  "step", "step_colon", "Step_total", "iter_total", "bracket_total", "Iteration", "global_step",
                  "mm_iter", "epoch_samples"],
      ["it_eq", "step_eq", "update", "steps_colon", "mm_epoch", "epoch_batch"],
      ["Iteration_colon_total", "bracket_Step", "ITER", "iteration_eq", "epoch_iter", "epoch_of_step"],
      ["epoch_bracket_batch", "it_colon", "Step_colon_total", "bracket_iter", "iters_eq"],
      ["completed_step", "d2_eta_iter", "tv_epoch_batch", "imagenet_epoch_batch", "yolox_epoch_iter",
       "mxnet_epoch_batch", "mingpt_iter_dt", "tf_step_colon", "tf_hook_trailing"],
      [*fifth.COUNTERS], [*sixth.COUNTERS], [*seventh.COUNTERS], [*eighth.COUNTERS], [*ninth.COUNTERS], [*tenth.COUNTERS],
      [*eleventh.COUNTERS], [*twelfth.COUNTERS], [*thirteenth.COUNTERS],
      [*fourteenth.COUNTERS])
_pool("kv", ["colon", "equals", "space"], ["colon_tight", "equals_spaced"], ["colon_tab", "colon_padded"],
      [],
      [],
      [], [], [], [], [], [], [], [], [], [])
_pool("fields", ["two_blanks", "pipe", "comma"], ["dash", "tab"], ["double_pipe", "semicolon"],
      ["box"],
      [],
      [], [], [], [], [], [], [], [], [], [])
_pool("loss_name", ["loss", "train_loss", "Loss", "train/loss", "lm loss", "xent", "step_loss", "avr_loss", "loss_step"],
      ["training_loss", "Train Loss", "trainLoss", "train-loss"], ["Loss/train", "train_loss_step", "LOSS"],
      ["Training Loss", "loss_train", "train/lm_loss", "TrainingLoss"],
      ["total_loss", "nll-loss"],
      ["main/loss"], sixth.LOSS_NAMES, seventh.LOSS_NAMES, eighth.LOSS_NAMES, ninth.LOSS_NAMES, tenth.LOSS_NAMES,
      eleventh.LOSS_NAMES, twelfth.LOSS_NAMES, thirteenth.LOSS_NAMES, fourteenth.LOSS_NAMES)
_pool("extras", [*_EXTRAS_DEV, *CLOCK_EXTRAS],
      ["interval_runtime", "batch_t", "us_unit"], ["step_time_ms", "it_s", "grad_dash_norm"],
      ["step_time_s", "samples_s"],
      [*HELD_EXTRAS],
      [*fifth.EXTRAS], sixth.EXTRAS, seventh.EXTRAS, eighth.EXTRAS, ninth.EXTRAS, tenth.EXTRAS,
      eleventh.EXTRAS, twelfth.EXTRAS, thirteenth.EXTRAS, fourteenth.EXTRAS)
_pool("cadence", ["1", "5", "10", "50", "100"], ["7", "25", "200"], ["3", "20", "250"],
      ["2", "40", "500"],
      ["4", "30", "1000"],
      ["6", "64", "125"], sixth.CADENCES, seventh.CADENCES, eighth.CADENCES, ninth.CADENCES, tenth.CADENCES,
      eleventh.CADENCES, twelfth.CADENCES, thirteenth.CADENCES, fourteenth.CADENCES)
_pool("eval", ["none", "step_val", "dict", "evaluation_eq", "results_valid"], ["bracket_eval", "validation_pipe"],
      ["stars_eval", "val_pipe_step", "validation_loss"],
      ["eval_colon_step", "valid_loss"],
      ["tv_test", "mxnet_validation", "tf_saving_dict", "ds_chat_ppl"],
      ["lightning_box", "ckpt_reached", "sb_test"], sixth.EVALS, seventh.EVALS, eighth.EVALS, ninth.EVALS, tenth.EVALS,
      eleventh.EVALS, twelfth.EVALS, thirteenth.EVALS, fourteenth.EVALS)
_pool("between", ["none", "tqdm", "userwarning", "saving", "blank"], ["nccl", "saved_at_step"],
      ["shards", "socket_warning", "wandb", "epoch_header"],
      ["plateau", "elastic", "gc"],
      ["tv_total_time", "mxnet_time_cost", "mxnet_train_acc", "tf_global_step_sec", "tf_saving_ckpt",
       "d2_inference", "coco_ap", "ds_chat_epoch"],
      ["ds_step_report", "ds_throughput", "ds_timers", "accelerate_defaults", "lightning_params", "wandb_history",
       *fifth.AT_END], sixth.BETWEEN, seventh.BETWEEN, eighth.BETWEEN, ninth.BETWEEN, tenth.BETWEEN,
      eleventh.BETWEEN, twelfth.BETWEEN, thirteenth.BETWEEN, fourteenth.BETWEEN)

_pool("avg", ["none"], [], [], [], ["paren_avg", "padded_avg"], [], [], [], [], [], [], [], [], [], [])  # a running average after the loss (torchvision, ImageNet)

_DIMENSIONS = list(_POOLS)
EPOCHAL, TRAILING = forms.EPOCHAL, forms.TRAILING
EPOCH_ONLY, FORCED = {**fifth.EPOCH_ONLY, **fourteenth.EPOCH_ONLY}, {**fifth.FORCED, **fourteenth.FORCED}


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
    tiers = TIERS[:TIERS.index(part) + 1]
    return [name for tier in tiers for name in _POOLS[dim][tier]]


def _wanted(part: str) -> dict[str, set[str]] | None:
    return OUT.get(part)


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
def _prefix(g: Grammar, t: int) -> str:
    p = g.parts
    return fourteenth.rank(str(p["rank"]), t) + fourteenth.date(str(p["date"]), t) + fourteenth.logger(str(p["logger"]))


def _with_avg(kind: str, loss: str) -> str:
    """The loss as printed with its running average after it (the average is not the loss)."""
    avg = f"{float(loss) * 1.01 + 0.001:.4f}"
    return {"none": loss, "paren_avg": f"{loss} ({avg})", "padded_avg": f"{loss:>9} ({avg:>9})"}[kind]


def render(g: Grammar) -> Log:
    """The log text of grammar `g`, with its truth."""
    r = forms.Rand(g.seed)
    p = g.parts
    kv = forms.KV[str(p["kv"])]
    sep = forms.SEP[str(p["fields"])]
    cadence = int(str(p["cadence"]))
    counter = str(p["counter"])
    epochal = counter == "epoch_samples" or counter in EPOCHAL or counter in fourteenth.EPOCHAL
    start = 0 if epochal else g.start
    per_epoch = cadence * (3 + int(r.random() * 5)) + (int(r.random() * cadence) if cadence > 1 else 0)
    if counter in EPOCH_ONLY:  # one record an epoch: the step is the epoch as printed
        start, cadence = EPOCH_ONLY[counter], 1
    elif counter == "chainer_table" and start == 0:  # its first row is at the first logging interval
        start = cadence
    elif counter == sixth.PER_ROLLOUT:  # a record a rollout of `cadence` steps, the first after one
        start = cadence
    elif counter in fourteenth.FROM_ONE and start == 0:  # counted after the step is taken: the first at one cadence
        start = cadence
    if counter in FORCED:
        kv, sep = FORCED[counter]
    total = max(start + cadence * g.n, 100) * 2
    ansi = str(p["ansi"])
    loss_name = str(p["loss_name"])
    extras = [str(e) for e in p["extras"]  # type: ignore[attr-defined]
              if e not in LOSS_PARTS or "loss" in loss_name.lower()]  # parts of a loss named a loss
    between = [str(b) for b in p["between"]]  # type: ignore[attr-defined]
    log = Log("", g, [], [], ordinal=counter in ("epoch_samples", *fourteenth.ORDINAL) or (counter, ansi) in fourteenth.STEPLESS)
    untimed = counter in TRAILING or counter in fifth.COUNTERS or counter in fourteenth.NEW  # a bar's rate: not judged
    log.step_seconds = [] if all(e in _EXTRAS_DEV for e in extras) and not untimed else None
    log.clock = any(e in CLOCK_EXTRAS for e in extras)
    lines: list[str] = []
    eval_every = 1 + int(r.random() * 4)
    eval_kind = str(p["eval"])
    if log.ordinal and eval_kind in ("step_val", "bracket_eval", "val_pipe_step", "eval_colon_step"):  # a trainer that prints no step prints none there
        eval_kind = "evaluation_eq"
    if counter in fourteenth.ORDINAL and eval_kind not in fourteenth.STEPLESS_EVALS:  # nor one a later part names
        eval_kind = "evaluation_eq"
    if counter in fourteenth.HEADED:  # a table's header (a launcher's tag on each line)
        lines.append(_prefix(g, start * 3) + fourteenth.table_header(counter).replace("\n", "\n" + fourteenth.rank(str(p["rank"]), start * 3)))
    for i in range(g.n):
        step = start + i * cadence
        if counter in fifth.COUNTERS:
            head, seen, head_time = ("" if counter in fifth.TABLES else fifth.counter(counter, step, total, per_epoch, r),
                                     None, None)
        elif counter in fourteenth.NEW:
            head, seen, head_time = "", None, None
        else:
            head, seen, head_time = forms.counter(counter, step, total, per_epoch, kv, r, cadence)
        loss = fourteenth.loss_text(counter, r) if counter in fourteenth.NEW else forms.loss_text(r)
        if counter == "sb_epoch":  # SpeechBrain: 2 decimals between 1 and 100
            loss = f"{float(loss):.2f}"
        if counter in fifth.TABLES:
            row, loss = fifth.table_row(counter, step, per_epoch, float(loss), r)
            lines.append(_prefix(g, step * 3) + row)
            log.steps.append(step)
            log.losses.append(float(loss))
            _after_record(g, log, lines, r, i, step, eval_every, eval_kind, kv, between)
            continue
        fields = [f"{loss_name}{kv}{_with_avg(str(p['avg']), loss)}"]
        printed = [] if head_time is None else [head_time]
        log.step_time |= head_time is not None
        for e in extras:
            new = fourteenth.extra(e, r, kv, step)
            text, seconds = forms.extra(e, r, kv, step - start) if new is None else (new[0], new[1] or None)
            if text.startswith("("):  # a figure in brackets belongs to the metric before it (TensorFlow's `(0.41 sec)`)
                fields[-1] += " " + text
            else:
                fields.append(text)
            log.step_time |= seconds is not None
            printed += [] if seconds is None else [seconds]
        if log.step_seconds is not None:
            log.step_seconds.append(printed)
        if ansi == "values":
            fields = [re.sub(r"(-?\d[\d.eE+\-]*)(?=\S*$)", "\x1b[33m\\1\x1b[0m", f, count=1) for f in fields]
        if ansi == "keys":
            fields = [f"\x1b[3{k % 7 + 1}m{f}\x1b[0m" for k, f in enumerate(fields)]
        joint = " " if counter in forms.COLON_HEADS else sep  # `Step 100: loss = 2.3`: the counter's colon parts it
        body = sep.join(fields) + sep + head if counter in TRAILING else head + joint + sep.join(fields)
        if counter in fifth.COUNTERS:  # the fifth part's heads carry their own separator
            body = head + sep.join(fields) + {"tqdm_postfix": "]", "torchtune_disk": " "}.get(counter, "")
            if counter == "sb_epoch":
                body += f" - valid loss: {float(forms.loss_text(r)):.2f}, valid error: {r.random() / 5:.2e}"
        if counter in fourteenth.NEW:
            body = fourteenth.record(counter, step, total, per_epoch, r, fields, sep, loss, cadence)
        if ansi == "rich_numbers":  # rich's log handler: every number bold cyan
            body = re.sub(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", "\x1b[1;36m\\g<0>\x1b[0m", body)
        line = _prefix(g, step * 3) + body.replace("\n", "\n" + fourteenth.rank(str(p["rank"]), step * 3))  # a launcher's tag on each line
        if ansi == "line_bold":
            line = f"\x1b[1;32m{line}\x1b[0m"
        lines.append(line)
        log.steps.append(step)
        log.losses.append(float(loss))
        if seen is not None:
            log.samples.append(seen)
        elif counter in fourteenth.ORDINAL:
            log.samples.append(fourteenth.samples(counter, step))
        _after_record(g, log, lines, r, i, step, eval_every, eval_kind, kv, between)
    for b in between:
        if b in fifth.AT_END:
            lines.append(fifth.train_runtime(g.n, log.losses))
    log.text = "\n".join(lines) + "\n"
    log.text = fourteenth.dress(ansi, log.text)
    return log


def _after_record(g: Grammar, log: Log, lines: list[str], r: forms.Rand, i: int, step: int, eval_every: int,
                  eval_kind: str, kv: str, between: list[str]) -> None:
    """The eval line and the lines in between printed after record `i`."""
    c = str(g.parts["counter"])
    if g.parts["eval"] != "none" and i % eval_every == eval_every - 1:
        value = forms.loss_text(r)
        lines.append(_prefix(g, step * 3 + 1) + fourteenth.eval_line(eval_kind, step, value, kv, c))
        log.evals.append(float(value))
    for b in between:
        if b not in fifth.AT_END and r.random() < 0.4:
            lines.append(fourteenth.between(b, step, r, c))
