"""The fourteenth held-out part's printed forms (`log_grammar`), from trainers, solvers and tools whose printed shapes the
earlier parts did not hold, written as they print: BigDL's DistriOptimizer (`2026-11-28 03:04:05 INFO  DistriOptimizer$:426
- [Epoch 2 47680/50000][Iteration 24420][Wall Clock 497.634203315s] Trained 128 records in 0.0225 seconds. Throughput is
177.3476 records/second. Loss is 0.82751834.`: the epoch's records are samples, the Iteration is the step), Vowpal
Wabbit's progress table (`average  since  example  example  current ..`: the counter counts examples, no step is
printed: the records are numbered 1, 2, 3 ..), R's nnet (`# weights:  1063`, `initial  value 123.456789 `, `iter  10
value 85.123456`), SciPy's L-BFGS-B (Fortran's `At iterate    5    f=  1.05058D+00    |proj g|=  2.19824D-06`, a blank
line after each), LIBLINEAR's trust-region Newton (`iter  1 act 1.129e+03 pre 1.027e+03 delta 1.507e+00 f 2.879e+03 |g|
1.543e+03 CG   2`, `[LibLinear]` glued to the first as scikit-learn prints it), GloVe (`11/28/26 - 03:04.05AM, iter:
001, cost: 0.071234`: one record an epoch), YOLOv5's epoch table (`     Epoch   gpu_mem       box       obj       cls
total    labels  img_size`, one row an epoch from 0, the loss the `total` column), luz (`Epoch 1/20`, `Train metrics: Loss:
0.6782 - Acc: 0.51`), tensorpack (`[1128 03:04:05 @base.py:285] Epoch 3 (global_step 1500) finished, time:12.34 sec.`,
then the epoch's statistics, sorted: the loss is `total_cost`, next to `cross_entropy_loss` and `wd_cost`) and Blocks'
Printing extension (`AFTER ANOTHER EPOCH` between rules, `Training status:` with `iterations_done: 705`, `Log records
from the iteration 705:`, tab-indented); unix milliseconds, a Korean locale's `2026. 11. 28. 오전 3:04:05` and
tensorpack's `[1128 03:04:05 @train.py:214] ` before the lines, Rust tracing's and Go zerolog's console loggers,
`podman pod logs`' container ids and pdsh's IP-address hosts; BigDL's validation (`Loss is (Loss: .., count: ..,
Average Loss: ..)`), luz's `Valid metrics: Loss: ..` and tensorpack's `validation_cost: ..`; a log-probability with a
unicode minus (`logprob: −1.2345`), a gradient norm spelled `inf`/`nan`/`NaN`/`Infinity` when it overflows, GPU power
(`power: 287W`) and temperature (`temp: 62°C`), an accuracy in percent; loss names `loss_ema`, `训练损失` and
`smoothed_loss`; cadences 13, 120 and 2000; the lines between the records and the ways the logs are saved are in
`log_grammar_fourteenth_dress.py`.

Each function takes the fourteenth part's names and hands any other to `log_grammar_thirteenth` (the parts before render
as they did). Fixed before it was scored; not scored yet (score it once: `log_grammar_rates.py --held-out`)."""

from __future__ import annotations

import log_grammar_forms as forms
import log_grammar_fourteenth_dress as saved
import log_grammar_thirteenth as thirteenth

FORCED = thirteenth.FORCED
EPOCH_ONLY = {**thirteenth.EPOCH_ONLY, "glove_iter": 1, "yolov5_table": 0, "luz_epoch": 1}  # one record an epoch
EPOCHAL = thirteenth.EPOCHAL
TABLES = ("vw_progress", "yolov5_table")
HEADED = (*thirteenth.HEADED, *TABLES, "r_nnet_iter", "lbfgsb_iterate")
STEPLESS = thirteenth.STEPLESS
ORDINAL = ("vw_progress",)  # a sample counter and no step: the records are numbered 1, 2, 3 .. (or refused)
COUNTERS = ("bigdl_iter", "vw_progress", "r_nnet_iter", "lbfgsb_iterate", "liblinear_tron", "glove_iter", "yolov5_table",
            "luz_epoch", "tensorpack_epoch", "blocks_status")  # records under their own names
FROM_ONE = (*thirteenth.FROM_ONE, "bigdl_iter", "liblinear_tron", "tensorpack_epoch", "blocks_status")
NEW = (*thirteenth.NEW, *COUNTERS)  # the counters of the sixth .. fourteenth parts (records built here)

DATES = ["unix_ms", "ko_locale", "tensorpack_bracket"]
LOGGERS = ["rust_tracing", "zerolog_console"]
RANKS = ["podman_ctr", "pdsh_ip"]
DRESS = saved.DRESS
LOSS_NAMES = ["loss_ema", "训练损失", "smoothed_loss"]
CADENCES = ["13", "120", "2000"]
EVALS = ["bigdl_val_loss", "luz_valid", "tensorpack_val"]
BETWEEN = saved.BETWEEN
STEPLESS_EVALS = ("none", "evaluation_eq", *EVALS)  # the evals a log without steps may print (the others name a step)

_DAY = thirteenth._DAY


def _hms(t: int) -> tuple[int, int, int]:
    return thirteenth._hms(t)


def date(kind: str, t: int) -> str:
    h, m, s = _hms(t)
    if kind == "unix_ms":  # milliseconds since 1970, as Java's System.currentTimeMillis() and JS's Date.now() give them
        return f"{(_DAY + 3 * 3600 + 245 + t) * 1000 + t * 37 % 1000} "
    if kind == "ko_locale":  # JavaScript's toLocaleString('ko-KR'): 오전 (a.m.) / 오후 (p.m.), a 12-hour clock
        return f"2026. 11. 28. {'오전' if h < 12 else '오후'} {(h - 1) % 12 + 1}:{m:02d}:{s:02d} "
    if kind == "tensorpack_bracket":  # tensorpack's logger: month and day glued, then the file and line
        return f"[1128 {h:02d}:{m:02d}:{s:02d} @train.py:214] "
    return thirteenth.date(kind, t)


def logger(kind: str) -> str:
    out = {"rust_tracing": "2026-11-28T03:04:05.123456Z  INFO train{run=7}: burn_train::learner: ",  # a span's fields
           "zerolog_console": "3:04AM INF "}.get(kind)
    return thirteenth.logger(kind) if out is None else out


def rank(kind: str, t: int = 0) -> str:
    out = {"podman_ctr": "3f9a1c0d7e42 ", "pdsh_ip": "10.0.3.17: "}.get(kind)  # a container id; pdsh -w with addresses
    return thirteenth.rank(kind, t) if out is None else out


def table_header(kind: str) -> str:
    if kind == "vw_progress":
        return ("Num weight bits = 18\nlearning rate = 0.5\ninitial_t = 0\npower_t = 0.5\nusing no cache\n"
                "Reading datafile = train.vw\nnum sources = 1\n"
                "average  since         example        example  current  current  current\n"
                "loss     last          counter         weight    label  predict features")
    if kind == "yolov5_table":
        return ("%10s" * 8) % ("Epoch", "gpu_mem", "box", "obj", "cls", "total", "labels", "img_size")
    if kind == "r_nnet_iter":
        return "# weights:  1063"
    if kind == "lbfgsb_iterate":
        return ("RUNNING THE L-BFGS-B CODE\n\n           * * *\n\nMachine precision = 2.220D-16\n N =            4     M = "
                "          10\n\nAt X0         0 variables are exactly at the bounds\n")
    return thirteenth.table_header(kind)


def samples(kind: str, step: int) -> int:
    """The examples a sample counter shows at the record of `step` (Vowpal Wabbit's example counter)."""
    return (step + 1) * 8


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return thirteenth.loss_text(kind, r)
    v = 2.0 + 3.0 * r.random()
    return {"bigdl_iter": f"{v / 3:.8g}", "vw_progress": f"{v / 5:.6f}", "r_nnet_iter": f"{v * 40:f}",
            "lbfgsb_iterate": f"{v / 2:.5E}", "liblinear_tron": f"{v * 400:.3e}", "glove_iter": f"{v / 40:f}",
            "yolov5_table": f"{v / 20:.4g}", "luz_epoch": f"{v / 4:.4g}", "tensorpack_epoch": f"{v / 2:.5g}",
            "blocks_status": f"{v * 20:.12g}"}[kind]


def _fortran(text: str) -> str:
    """A number as Fortran's 1p,d12.5 writes it (`6.40974D-01`)."""
    return text.replace("E", "D")


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a fourteenth-part counter (or an earlier one), as its trainer prints it."""
    if kind not in COUNTERS:
        return thirteenth.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    t = 0.2 + r.random() * 0.3
    pace = 0.25 + per_epoch % 7 / 30  # the run's mean seconds a step: its clocks only go forward
    v = float(loss)
    lr = 6e-4 * (1 - step / total)
    h, m, s = _hms(step * 3)
    if kind == "bigdl_iter":  # the epoch's records so far of its records; the Wall Clock is the time since the start
        batch = 128 if per_epoch % 2 else 32
        epoch, seen = (step - 1) // per_epoch + 1, ((step - 1) % per_epoch + 1) * batch
        hyper = (f" Sequential908171a5's hyper parameters: Current learning rate is {lr * 10:g}. Current dampening is "
                 "1.7976931348623157E308." if per_epoch % 3 == 0 else "")
        return (f"2026-11-28 {h:02d}:{m:02d}:{s:02d} INFO  DistriOptimizer$:426 - [Epoch {epoch} {seen}/{per_epoch * batch}]"
                f"[Iteration {step}][Wall Clock {step * pace + t / 10:.9f}s] Trained {batch} records in {t:.9f} seconds. "
                f"Throughput is {batch / t:.4f} records/second. Loss is {loss}.{hyper}")
    if kind == "vw_progress":  # the average loss so far, the loss since the last line, the example counter ..
        since = v * (0.8 + r.random() * 0.4)
        count = samples(kind, step)
        label = 1.0 if r.random() < 0.5 else 0.0
        return (f"{loss:<8} {since:<8.6f} {count:>12d} {float(count):>14.1f} {label:>8.4f} {r.random():>8.4f} "
                f"{6 + per_epoch % 20:>8d}")
    if kind == "r_nnet_iter":  # vmmin's report: the value of the fitting criterion (its iteration 0 the initial one)
        return f"initial  value {loss} " if step == 0 else f"iter{step:4d} value {loss}"
    if kind == "lbfgsb_iterate":
        return f"At iterate{step:5d}    f= {_fortran(loss):>12}    |proj g|= {_fortran(f'{v * r.random():.5E}'):>12}\n"
    if kind == "liblinear_tron":
        act = v * (0.02 + r.random() / 10)
        first = "[LibLinear]" if step in (1, cadence) and per_epoch % 2 else ""
        boundary = "\ncg reaches trust region boundary" if r.random() < 0.2 else ""
        return (f"{first}iter {step:2d} act {act:5.3e} pre {act * 0.92:5.3e} delta {1 + per_epoch % 9 / 7:5.3e} f {loss} "
                f"|g| {v * (0.1 + r.random()):5.3e} CG {1 + int(r.random() * 9):3d}{boundary}")
    if kind == "glove_iter":  # strftime("%x - %I:%M.%S%p")
        return f"11/28/26 - {(h - 1) % 12 + 1:02d}:{m:02d}.{s:02d}{'AM' if h < 12 else 'PM'}, iter: {step:03d}, cost: {loss}"
    if kind == "yolov5_table":  # the bar's last state at the epoch's end; the validation table after it in some runs
        parts = (v * 0.34, v * 0.5, v * 0.16)
        row = ("%10s" * 2 + "%10.4g" * 6) % (f"{step}/{total - 1}", f"{3 + per_epoch % 5 / 4:.3g}G", *parts, v,
                                             100 + int(r.random() * 200), 640)
        secs = max(1, int(per_epoch * t))
        row += (f": 100%|██████████| {per_epoch}/{per_epoch} [{secs // 60:02d}:{secs % 60:02d}<00:00, "
                f"{per_epoch / secs:5.2f}it/s]")
        if per_epoch % 2:
            row += ("\n" + ("%20s" + "%12s" * 6) % ("Class", "Images", "Labels", "P", "R", "mAP@.5", "mAP@.5:.95")
                    + ": 100%|██████████| 4/4 [00:01<00:00,  3.12it/s]\n"
                    + ("%20s" + "%12i" * 2 + "%12.3g" * 4) % ("all", 128, 929, 0.6 + r.random() / 5, 0.5 + r.random() / 5,
                                                              0.55 + r.random() / 5, 0.35 + r.random() / 5))
        return row
    if kind == "luz_epoch":
        acc = f" - Acc: {0.5 + r.random() / 2:.4g}" if per_epoch % 2 else ""
        return f"Epoch {step}/{total // 2}\nTrain metrics: Loss: {loss}{acc}"
    if kind == "tensorpack_epoch":  # the epoch's line, then ScalarPrinter's statistics in key order
        green = per_epoch % 2

        def at(where: str) -> str:
            stamp = f"[1128 {h:02d}:{m:02d}:{s:02d} @{where}]"
            return f"\x1b[32m{stamp}\x1b[0m " if green else stamp + " "
        wd = f"{v * 0.05:.5g}"
        stats = [f"cross_entropy_loss: {v - float(wd):.5g}", f"learning_rate: {lr * 10:.5g}", f"total_cost: {loss}",
                 f"train_error: {0.1 + r.random() / 3:.5g}", f"wd_cost: {wd}"]
        return "\n".join([f"{at('base.py:285')}Epoch {(step - 1) // cadence + 1} (global_step {step}) finished, time:"
                          f"{t * cadence:.2f} sec.", *(at("monitor.py:467") + x for x in stats)])
    if kind == "blocks_status":  # print("\t", "{}:".format(attr), value) for each attribute, sorted
        rule = "-" * 79
        return "\n".join([rule, "AFTER ANOTHER EPOCH", rule, "Training status:", "\t batch_interrupt_received: False",
                          "\t epoch_interrupt_received: False", "\t epoch_started: False",
                          f"\t epochs_done: {(step - 1) // cadence + 1}", f"\t iterations_done: {step}",
                          "\t received_first_batch: True", "\t resumed_from: None", "\t training_started: True",
                          f"Log records from the iteration {step}:", f"\t loss: {loss}",
                          f"\t time_read_data_this_epoch: {t * cadence / 50:.12g}",
                          f"\t time_train_this_epoch: {t * cadence:.12g}", f"\t time_train_total: {step * pace:.12g}", ""])
    raise KeyError(kind)


def eval_line(kind: str, step: int, value: str, kv: str, counter: str = "") -> str:
    v = float(value)
    if kind == "bigdl_val_loss":  # ValidationResult's toString after the method's name
        return (f"2026-11-28 03:04:05 INFO  DistriOptimizer$:1759 - Loss is (Loss: {v * 1000:.4f}, count: 1000, "
                f"Average Loss: {v:.8g})")
    if kind == "luz_valid":
        return f"Valid metrics: Loss: {v:.4g}"
    if kind == "tensorpack_val":
        return f"[1128 03:04:05 @monitor.py:467] validation_cost: {v:.5g}"
    return thirteenth.eval_line(kind, step, value, kv, counter)


def between(kind: str, step: int, r: forms.Rand, counter: str = "") -> str:
    """A line printed between the records (by another tool)."""
    if kind not in saved.BETWEEN:
        return thirteenth.between(kind, step, r, counter)
    return saved.between(kind, step, int(r.random() * 100))


def _nonfinite(r: forms.Rand) -> str:
    x = r.random()
    if x < 0.12:  # an overflowed step (the loss scaler skips it), spelled as the printing code spells it
        return ("inf", "nan", "NaN", "Infinity")[int(x * 100) % 4]
    return f"{0.2 + x * 2:.3f}"


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A fourteenth-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return thirteenth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv)


_EXTRAS = {
    "logprob_minus": lambda r, kv: (f"logprob{kv}\u2212{0.5 + r.random() * 2:.4f}", False),  # U+2212, not a hyphen
    "gnorm_nonfinite": lambda r, kv: (f"gnorm{kv}{_nonfinite(r)}", False),
    "gpu_power_w": lambda r, kv: (f"power{kv}{200 + int(r.random() * 150)}W", False),
    "gpu_temp_c": lambda r, kv: (f"temp{kv}{55 + int(r.random() * 25)}°C", False),
    "acc_pct": lambda r, kv: (f"acc{kv}{40 + r.random() * 55:.2f}%", False),
}
EXTRAS = list(_EXTRAS)


def dress(kind: str, text: str) -> str:
    """The log as saved (`log_grammar_fourteenth_dress`), or as an earlier part saves it."""
    return saved.dress(kind, text) if kind in saved.DRESS else thirteenth.dress(kind, text)
