"""The ninth held-out part's printed forms (`log_grammar`), from trainers, launchers and tools whose printed shapes
the earlier parts did not hold, written as they print: MONAI's tutorial loop (`----------` / `epoch 2/5`, then
`12/50, train_loss: 0.6100` lines that print the batch within the epoch only, and `epoch 2 average loss: 0.61`),
PaddleSeg (`[TRAIN] epoch: 1, iter: 20/1000, loss: 0.73, lr: .., batch_cost: .., reader_cost: .., ips: .. samples/sec
| ETA 00:07:07`: the iteration counts the run), Stanza's trainers (`2024-07-24 11:20:33: step 20/50000, loss =
0.123456 (0.412 sec/batch), lr: 0.003000`, some with `(epoch 2/30)`), TensorFlow's CIFAR-10 example (`2024-07-24
11:20:33.123456: step 10, loss = 4.68 (310.2 examples/sec; 0.413 sec/batch)`), LitGPT (`Epoch 1 | iter 400 step 100 |
loss train: 2.345, val: n/a | iter time: 412.34 ms (step) remaining time: 0:12:34`: `iter` counts micro-batches,
`step` the optimizer's steps), Caffe's solver (`Iteration 100 (2.41 iter/s, 41.5s/100 iters), loss = 0.21`, `Train
net output #0: loss = ..`, `Iteration 100, lr = 0.01` behind glog's prefix; its `Testing net (#0)` evals and
snapshots), GPyTorch's tutorial (`Iter 10/50 - Loss: 0.942   lengthscale: 0.693   noise: 0.693`) and Pyro's SVI loop
(`[iteration 0101] loss: 123.4567`); RFC 5424 syslog (`<134>1 2024-07-24T11:20:33.123456+00:00 host app pid - - `),
log4j's `yy/MM/dd HH:mm:ss` (Spark), Heroku's `app[worker.1]: `, logzero's `[I 240724 11:20:33 train:88] `, pytest's
live-log `INFO     root:train.py:88 `, PM2's `0|train    | ` and stern's `pod container ` prefixes; Buildkite's raw
log (an `ESC _bk;t=<ms> BEL` timestamp before each line) and a GitLab job trace (its `section_start`/`section_end`
markers and runner lines); Optuna's trial lines, datasets' `Map (num_proc=4)` bars, apex's loss-scale overflow,
Slurm's `srun: job .. queued` lines and MLflow's run links between the records.

Each function takes the ninth part's names and hands any other to `log_grammar_eighth` (the parts before render as
they did). Scored once (session 7, at 719fe35): 84.40% recovered, 1.75% refused, 9.70% partial, 4.15% misread (83
logs); after its classes were fixed (tuned on it), 94.95% and 18 misread."""

from __future__ import annotations

import math

import log_grammar_eighth as eighth
import log_grammar_fifth as fifth
import log_grammar_forms as forms
import log_grammar_sixth as sixth

# counter -> (kv, separator) as the trainer prints them
FORCED = {**eighth.FORCED, "monai_batch": (": ", ", ")}
EPOCH_ONLY = eighth.EPOCH_ONLY
EPOCHAL = (*fifth.EPOCHAL, *sixth.EPOCHAL, "monai_batch")  # counters whose log starts at step 0 (an epoch's start)
HEADED = eighth.HEADED
ACCUM = 4  # LitGPT's gradient accumulation: micro-batches a step
OWN_LINES = ("paddleseg_iter", "stanza_step", "tf_cifar_step", "litgpt_iter", "caffe_iter", "gpytorch_iter", "pyro_svi")
COUNTERS = ("monai_batch", *OWN_LINES)
NEW = (*eighth.NEW, *COUNTERS)  # the counters of the sixth .. ninth parts (records built here)

DATES = ["rfc5424", "spark_yy", "heroku"]
LOGGERS = ["logzero", "pytest_log"]
RANKS = ["pm2_app", "stern_pod"]
DRESS = ["buildkite_ts", "gitlab_trace"]
LOSS_NAMES = ["cross_ent_loss", "train_nll", "loss_total"]
CADENCES = ["24", "90", "750"]
EVALS = ["litgpt_val", "hf_no_trainer", "caffe_test"]
BETWEEN = ["optuna_trial", "hf_map_bar", "apex_overflow", "srun_queue", "mlflow_run", "caffe_snapshot"]


def _hms(t: int) -> tuple[int, int, int]:
    return 11 + t // 3600 % 12, t // 60 % 60, t % 60


def date(kind: str, t: int) -> str:
    h, m, s = _hms(t)
    us = (t * 7919) % 1_000_000
    out = {"rfc5424": f"<134>1 2024-07-24T{h:02d}:{m:02d}:{s:02d}.{us:06d}+00:00 gpu-node1 train.py 12345 - - ",
           "spark_yy": f"24/07/24 {h:02d}:{m:02d}:{s:02d} ",  # log4j's %d{yy/MM/dd HH:mm:ss}
           "heroku": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}.{us:06d}+00:00 app[worker.1]: "}.get(kind)
    return eighth.date(kind, t) if out is None else out


def logger(kind: str) -> str:
    out = {"logzero": "[I 240724 11:20:33 train:88] ", "pytest_log": "INFO     root:train.py:88 "}.get(kind)
    return eighth.logger(kind) if out is None else out


def rank(kind: str) -> str:
    out = {"pm2_app": "0|train    | ", "stern_pod": "trainer-worker-0 pytorch "}.get(kind)
    return eighth.rank(kind) if out is None else out


def dress(kind: str, text: str) -> str:
    """The log as saved: Buildkite's raw log (a timestamp escape before each line), a GitLab job trace."""
    if kind == "buildkite_ts":
        return "".join(f"\x1b_bk;t={1721820033000 + k * 1373 + k * k % 97}\x07{line}\n"
                       for k, line in enumerate(text.split("\n")[:-1]))
    if kind == "gitlab_trace":
        def section(at: int, name: str) -> str:
            return f"\x1b[0Ksection_{at}:{name}\r\x1b[0K"
        return ("\x1b[0KRunning with gitlab-runner 17.2.0 (9dd3eb2a)\x1b[0;m\n\x1b[0K  on gpu-runner-1 t3_Xk2pq, system ID: "
                "s_6b2e4f0c1a7d\x1b[0;m\n" + section("start", "1721820031:step_script") +
                '\x1b[0K\x1b[36;1mExecuting "step_script" stage of the job script\x1b[0;m\n\x1b[32;1m$ python train.py\x1b[0;m\n'
                + text + section("end", "1721826131:step_script") + section("start", "1721826131:cleanup_file_variables")
                + "\x1b[0K\x1b[36;1mCleaning up project directory and file based variables\x1b[0;m\n"
                + section("end", "1721826132:cleanup_file_variables") + "\x1b[32;1mJob succeeded\x1b[0;m\n")
    return eighth.dress(kind, text)


def table_header(kind: str) -> str:
    return eighth.table_header(kind)


def loss_text(kind: str, r: forms.Rand) -> str:
    """The train loss as this counter's trainer prints it."""
    if kind not in COUNTERS:
        return eighth.loss_text(kind, r)
    value = 2.0 + 3.0 * r.random()
    return {"monai_batch": f"{value / 5:.4f}", "paddleseg_iter": f"{value / 2:.4f}", "stanza_step": f"{value / 4:.6f}",
            "tf_cifar_step": f"{value:.2f}", "litgpt_iter": f"{value:.3f}", "caffe_iter": f"{value / 3:.6g}",
            "gpytorch_iter": f"{value / 3:.3f}", "pyro_svi": f"{value * 40:.4f}"}[kind]


def _glog(t: int) -> str:
    h, m, s = _hms(t)
    return f"I0724 {h:02d}:{m:02d}:{s:02d}.{t * 104729 % 1_000_000:06d} 25829 "


def _remaining(seconds: int) -> str:
    """A `datetime.timedelta` as `str` prints it."""
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return f"{days} day{'' if days == 1 else 's'}, {clock}" if days else clock


def record(kind: str, step: int, total: int, per_epoch: int, r: forms.Rand, fields: list[str], sep: str,
           loss: str, cadence: int) -> str:
    """A record of a ninth-part counter (or an earlier one): its head, then the loss and the other metrics."""
    if kind not in COUNTERS:
        return eighth.record(kind, step, total, per_epoch, r, fields, sep, loss, cadence)
    epoch, batch = 1 + step // per_epoch, step % per_epoch
    t = 0.2 + r.random() * 0.3
    h, m, s = _hms(step * 3)
    if kind == "monai_batch":  # the batch within the epoch only: the epoch is the header's, printed at its start
        head = ""
        if step < cadence or (step - cadence) // per_epoch != step // per_epoch:
            if step >= cadence:  # the epoch's mean train loss: not a record
                head = f"epoch {epoch - 1} average loss: {float(loss) * 1.04 + 0.01:.4f}\n"
            head += f"{'-' * 10}\nepoch {epoch}/{total // per_epoch + 1}\n"
        return f"{head}{batch}/{per_epoch}, {sep.join(fields)}"
    if kind == "paddleseg_iter":  # the iteration counts the run; the epoch is derived from it
        eta = int((total - step) * t)
        return (f"[TRAIN] epoch: {(step - 1) // per_epoch + 1}, iter: {step}/{total}, loss: {loss}, "
                f"lr: {0.01 * (1 - step / total) ** 0.9:.6f}, batch_cost: {t:.4f}, reader_cost: {r.random() / 50:.5f}, "
                f"ips: {8 / t:.4f} samples/sec | ETA {eta // 3600:02d}:{eta // 60 % 60:02d}:{eta % 60:02d}")
    if kind == "stanza_step":  # global step / max steps; some trainers add the epoch
        ep = f" (epoch {epoch}/{total // per_epoch + 1})" if per_epoch % 2 else ""
        return f"2024-07-24 {h:02d}:{m:02d}:{s:02d}: step {step}/{total}{ep}, loss = {loss} ({t:.3f} sec/batch), lr: 0.003000"
    if kind == "tf_cifar_step":  # str(datetime.now()), then the step
        return (f"2024-07-24 {h:02d}:{m:02d}:{s:02d}.{step * 7919 % 1_000_000:06d}: step {step}, loss = {loss} "
                f"({128 / t:.1f} examples/sec; {t:.3f} sec/batch)")
    if kind == "litgpt_iter":  # iter: micro-batches (step x accumulation); val: the last eval's loss
        val = "n/a" if step < 3 * cadence else f"{float(loss) * 1.05 + 0.02:.3f}"
        return (f"Epoch {epoch} | iter {step * ACCUM} step {step} | loss train: {loss}, val: {val} | iter time: "
                f"{t * 1000:.2f} ms (step) remaining time: {_remaining(int((total - step) * t * ACCUM))}")
    if kind == "caffe_iter":  # the smoothed loss (average_loss 1: the step's), the net's output, the lr
        g = _glog(step * 3)
        return (f"{g}solver.cpp:218] Iteration {step} ({1 / t:.6g} iter/s, {t * cadence:.6g}s/{cadence} iters), "
                f"loss = {loss}\n{g}solver.cpp:237]     Train net output #0: loss = {loss} (* 1 = {loss} loss)\n"
                f"{g}sgd_solver.cpp:105] Iteration {step}, lr = {0.01 * 0.1 ** (3 * step // total):g}")
    if kind == "gpytorch_iter":
        return f"Iter {step}/{total} - Loss: {loss}   lengthscale: {0.3 + t:.3f}   noise: {r.random() / 3:.3f}"
    if kind == "pyro_svi":
        return f"[iteration {step:04d}] loss: {loss}"
    raise KeyError(kind)


def eval_line(kind: str, step: int, value: str, kv: str, counter: str = "") -> str:
    v = float(value)
    if kind == "litgpt_val":  # LitGPT's `iter` counts micro-batches (its own records say how many a step)
        return f"iter {step * (ACCUM if counter == 'litgpt_iter' else 1)}: val loss {v:.4f}, val time: {900 + step % 97 * 3.1:.2f} ms"
    if kind == "hf_no_trainer":  # run_*_no_trainer.py: the epoch from 0
        return f"epoch {step // 1000}: perplexity: {math.exp(v)!r} eval_loss: {v!r}"
    if kind == "caffe_test":
        g = _glog(step * 3 + 1)
        return (f"{g}solver.cpp:330] Iteration {step}, Testing net (#0)\n{g}solver.cpp:397]     Test net output #0: "
                f"accuracy = {0.9 + step % 9 / 100:.4g}\n{g}solver.cpp:397]     Test net output #1: loss = {v:.6g} "
                f"(* 1 = {v:.6g} loss)")
    return eighth.eval_line(kind, step, value, kv)


def between(kind: str, step: int, r: forms.Rand, counter: str = "") -> str:
    """A line printed between the records (by another tool). Where the epoch is only in a header (MONAI's `epoch 2/5`
    under a rule), another trainer's `Epoch N/M` line would make the step unknowable: it prints blank there."""
    if kind not in _BETWEEN:
        line = eighth.between(kind, step, r)
        return "" if counter == "monai_batch" and kind in ("epoch_header", "ds_chat_epoch") else line
    return _BETWEEN[kind](step, int(r.random() * 100))


_BETWEEN = {
    "optuna_trial": lambda step, n: (f"[I 2024-07-24 11:{n % 60:02d}:{n * 7 % 60:02d},{n * 37 % 1000:03d}] Trial {n % 20} "
                                     f"finished with value: {0.7 + n / 1000!r} and parameters: {{'lr': {1e-4 * (1 + n % 9)!r}, "
                                     f"'batch_size': {32 * (1 + n % 4)}}}. Best is trial {n % 7} with value: {0.69 + n / 1100!r}."),
    "hf_map_bar": lambda step, n: (f"Map (num_proc=4): 100%|{'█' * 10}| {1000 + n * 37}/{1000 + n * 37} "
                                   f"[00:0{n % 10}<00:00, {1000 + n * 91.7:.2f} examples/s]"),
    "apex_overflow": lambda step, n: f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {2.0 ** (16 - n % 6)}",
    "srun_queue": lambda step, n: (f"srun: job {4410000 + n} queued and waiting for resources\n"
                                   f"srun: job {4410000 + n} has been allocated resources"),
    "mlflow_run": lambda step, n: (f"🏃 View run bright-owl-{n} at: http://127.0.0.1:5000/#/experiments/1/runs/"
                                   f"{n * 2654435761 % 2 ** 128:032x}\n🧪 View experiment at: http://127.0.0.1:5000/#/experiments/1"),
    "caffe_snapshot": lambda step, n: (f"{_glog(step * 3 + 2)}solver.cpp:447] Snapshotting to binary proto file "
                                       f"lenet_iter_{step}.caffemodel\n{_glog(step * 3 + 2)}sgd_solver.cpp:273] Snapshotting "
                                       f"solver state to binary proto file lenet_iter_{step}.solverstate"),
}


def extra(kind: str, r: forms.Rand, kv: str, step: int) -> tuple[str, bool] | None:
    """A ninth-part metric as printed (whether it is a step time), or an earlier part's, or None for the others."""
    if kind not in _EXTRAS:
        return eighth.extra(kind, r, kv, step)
    return _EXTRAS[kind](r, kv, 0.2 + r.random() * 0.3, step)


_EXTRAS = {
    "examples_per_sec": lambda r, kv, t, step: (f"examples/sec{kv}{128 / t:.1f}", False),  # a rate, not a time
    "sec_per_batch": lambda r, kv, t, step: (f"sec/batch{kv}{t:.3f}", True),  # a step time
    "loss_scale": lambda r, kv, t, step: (f"loss_scale{kv}{2.0 ** (10 + step % 7)}", False),  # fp16's scaler: not a loss
    "tokens_seen": lambda r, kv, t, step: (f"tokens_seen{kv}{(step + 1) * 8192}", False),  # a count that grows with the step
}
EXTRAS = list(_EXTRAS)
