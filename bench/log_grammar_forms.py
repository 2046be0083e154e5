"""The printed forms of `log_grammar`'s parts: how each date, logger, rank tag, counter, metric, eval line and
line in between is written, as the trainers that print it write it (the held-out part's forms: MaxText,
detectron2, torchvision's reference scripts, pytorch/examples' ImageNet, YOLOX, MXNet, minGPT, TensorFlow's
estimator hooks and MNIST tutorial, DeepSpeed-Chat, ColossalAI's rich logger, loguru, horovod, srun, containerd)."""

from __future__ import annotations

import math

EPOCHAL = ("mm_epoch", "epoch_batch", "epoch_iter", "epoch_of_step", "epoch_bracket_batch",  # counters within epochs
           "tv_epoch_batch", "imagenet_epoch_batch", "yolox_epoch_iter", "mxnet_epoch_batch")
TRAILING = ("tf_hook_trailing",)
COLON_HEADS = ("mingpt_iter_dt", "tf_step_colon")  # counters ending in a colon, a blank after it
CLOCK_S = 0.4  # the clocks' seconds per step  # counters printed after the metrics (TensorFlow's LoggingTensorHook)

class Rand:
    """A small deterministic generator (a log renders the same from its grammar)."""

    def __init__(self, seed: int) -> None:
        self.state = seed * 6364136223846793005 + 1442695040888963407 & (2**64 - 1)

    def random(self) -> float:
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return (self.state >> 11) / 2**53

    def choice(self, items: list):
        return items[int(self.random() * len(items)) % len(items)]


def date(kind: str, t: int) -> str:
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
            "ddmmyyyy_dash": f"24-07-2024 {h:02d}:{m:02d}:{s:02d} ",
            # loguru (YOLOX), rich's log time (ColossalAI), containerd's CRI log line (kubectl logs of a node's file)
            "loguru_ms": f"2024-07-24 {h:02d}:{m:02d}:{s:02d}.{ms:03d} | ", "rich_bracket": f"[07/24/24 {h:02d}:{m:02d}:{s:02d}] ",
            "cri": f"2024-07-24T{h:02d}:{m:02d}:{s:02d}.{ms:03d}{(t * 7) % 1000:03d}{(t * 11) % 1000:03d}Z stdout F "}[kind]


def logger(kind: str) -> str:
    return {"none": "", "info_root": "INFO:root:", "bracket_info": "[INFO] ", "dash_root_info": "- root - INFO - ",
            "glog_file": "INFO train.py:80] ", "hf_bracket": "[INFO|trainer.py:2345] ",
            "ray_pid": "(Trainer pid=1234) ", "name_warning": "trainer - WARNING - ",
            "bracket_name_level": "[trainer:INFO] ", "angle_info": "<INFO> ", "file_dash": "train.py:80 - ",
            "bracket_name_bracket_level": "[trainer][INFO] ", "info_pipe": "INFO | ",
            "loguru_level": "INFO     | yolox.core.trainer:253 - ",
            "rich_colossal": "INFO     colossalai - colossalai - INFO: ", "info_tensorflow": "INFO:tensorflow:"}[kind]


def rank(kind: str) -> str:
    return {"none": "", "torchrun_rank": "[rank0]:", "torchrun_default": "[default0]:", "bracket_Rank": "[Rank 0] ",
            "mpirun": "[1,0]<stdout>:", "rank_colon": "rank0: ", "gpu": "[GPU0] ", "bracket_R": "[R0] ",
            "paren_rank_eq": "(rank=0) ", "node_gpu": "node0/gpu0: ", "worker": "[worker-0] ", "angle_rank": "<rank 0> ",
            "horovod_gloo": "[0]<stdout>:", "srun_label": "0: "}[kind]


KV = {"colon": ": ", "equals": "=", "space": " ", "colon_tight": ":", "equals_spaced": " = ", "colon_tab": ":\t",
       "colon_padded": ":   "}
SEP = {"two_blanks": "  ", "pipe": " | ", "comma": ", ", "dash": " - ", "tab": "\t", "double_pipe": " || ",
        "semicolon": "; ", "box": " │ "}


def counter(kind: str, step: int, total: int, per_epoch: int, kv: str, r: Rand | None = None,
            cadence: int = 1) -> tuple[str, int | None, float | None]:
    """The counter's text, for a sample counter the sample count it shows, and a step time it prints (s)."""
    if kind == "epoch_samples":
        batch = 32
        samples_per_epoch = per_epoch * batch
        epoch, seen = 1 + step // per_epoch, (step % per_epoch) * batch
        return f"Train Epoch: {epoch} [{seen}/{samples_per_epoch} ({100 * seen // samples_per_epoch}%)]", seen, None
    if kind in EPOCHAL:
        epoch, batch = 1 + step // per_epoch, step % per_epoch
        return {"mm_epoch": f"Epoch(train) [{epoch}][{batch:>{len(str(per_epoch))}}/{per_epoch}]",
                "epoch_batch": f"epoch {epoch} batch {batch}/{per_epoch}",
                "epoch_iter": f"Epoch {epoch} Iter {batch}/{per_epoch}",
                "epoch_of_step": f"Epoch {epoch}/99 Step {batch}/{per_epoch}",
                "epoch_bracket_batch": f"Epoch [{epoch}/99] Batch [{batch}/{per_epoch}]",
                # torchvision's MetricLogger (epochs from 0, eta after), pytorch/examples' ImageNet ProgressMeter,
                # YOLOX, MXNet's Speedometer (the batches since the last line: the second is the counter)
                "tv_epoch_batch": f"Epoch: [{epoch - 1}]  [{batch:>{len(str(per_epoch))}}/{per_epoch}]  eta: {_eta(per_epoch - batch)}",
                "imagenet_epoch_batch": f"Epoch: [{epoch - 1}][{batch:>{len(str(per_epoch))}}/{per_epoch}]",
                "yolox_epoch_iter": f"epoch: {epoch}/300, iter: {batch}/{per_epoch}",
                "mxnet_epoch_batch": f"Epoch[{epoch - 1}] Batch [{max(batch - cadence, 0)}-{batch}]"}[kind], None, None
    if kind in ("mingpt_iter_dt", "tf_hook_trailing"):  # (only these draw: the other parts render as before)
        t = 0.2 + (r.random() if r is not None else 0.5) * 0.3
        if kind == "mingpt_iter_dt":  # minGPT's callback: the step time before the counter
            return f"iter_dt {t * 1000:.2f}ms; iter {step}:", None, t
        # LoggingTensorHook: `loss = 2.3, step = 100 (41.234 sec)`, the time of the `cadence` steps since the last
        return f"step = {step} ({t * cadence:.3f} sec)", None, None
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
            "glued_iter": f"{step}iter:",
            "completed_step": f"completed step: {step}",  # MaxText
            "d2_eta_iter": f"eta: {_eta(total - step)}  iter: {step}",  # detectron2's CommonMetricPrinter
            "tf_step_colon": f"Step {step}:"}[kind], None, None  # TensorFlow's MNIST tutorial


def extra(kind: str, r: Rand, kv: str, step: int = 0) -> tuple[str, float | None]:
    """One other metric as printed, and the step time in seconds when it is one."""
    t = 0.2 + r.random() * 0.3
    elapsed = CLOCK_S * step + r.random() * 0.01  # a cumulative clock: grows with the step (`step`: since the start)
    if kind in _HELD_EXTRAS:
        out = _HELD_EXTRAS[kind](r, kv, t)
        return out[0], (t if out[1] else None)
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


# The fourth held-out part's metrics (a table of their own, each drawn only when printed, so that the other
# parts render as before): MaxText; detectron2, YOLOX, torchvision (memory, a step time with a glued unit, data
# waits, input size, an ETA with a comma in it); MXNet; TensorFlow's MNIST tutorial (that step's duration);
# the parts of a total loss (detectron2, YOLOX), printed after it, only when the loss is named a loss.
_HELD_EXTRAS = {
    "tflops_device": lambda r, kv, t: (f"TFLOP/s/device{kv}{130 + r.random() * 5:.3f}", False),
    "tokens_device": lambda r, kv, t: (f"Tokens/s/device{kv}{8600 + r.random() * 100:.3f}", False),
    "total_weights": lambda r, kv, t: (f"total_weights{kv}{196608 - int(r.random() * 40000)}", False),
    "max_mem_M": lambda r, kv, t: (f"max_mem{kv}{2400 + int(r.random() * 100)}M", False),
    "mem_Mb": lambda r, kv, t: (f"mem{kv}{2300 + int(r.random() * 100)}Mb", False),
    "iter_time_s": lambda r, kv, t: (f"iter_time{kv}{t:.3f}s", True),
    "data_time_s": lambda r, kv, t: (f"data_time{kv}{t / 40:.3f}s", False),
    "input_size": lambda r, kv, t: (f"size{kv}{r.choice([608, 640, 672])}", False),
    "eta_days": lambda r, kv, t: (f"ETA{kv}{1 + int(r.random() * 2)} day, {int(r.random() * 24)}:{int(r.random() * 60):02d}:07",
                                  False),
    "max_mem_space": lambda r, kv, t: (f"max mem{kv}{2500 + int(r.random() * 100)}", False),
    "data_space": lambda r, kv, t: (f"data{kv}{t / 30:.4f}", False),
    "img_s": lambda r, kv, t: (f"img/s{kv}{64 / t:.3f}", False),
    "speed_samples_sec": lambda r, kv, t: (f"Speed{kv}{64 / t:.2f} samples/sec", False),
    "paren_sec": lambda r, kv, t: (f"({t:.3f} sec)", True),
    "loss_part_cls": lambda r, kv, t: (f"loss_cls{kv}{0.1 + r.random() * 0.6:.4f}", False),
    "loss_part_iou": lambda r, kv, t: (f"iou_loss{kv}{0.5 + r.random():.1f}", False),
}


def _eta(steps_left: int) -> str:
    s = int(steps_left * 0.41)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def loss_text(r: Rand) -> str:
    value = 2.0 + 3.0 * r.random()
    return r.choice([f"{value:.4f}", f"{value:.6f}", f"{value:.3f}", f"{value:.5E}"])


def eval_line(kind: str, step: int, value: str, kv: str) -> str:
    return {"step_val": f"step {step}: val loss {value}",
            "results_valid": f"{1 + step // 1000}epoch results: [valid] loss{kv}{value}, acc{kv}0.5, time{kv}10 seconds",
            "dict": f"{{'eval_loss': {value}, 'eval_runtime': 1.5}}",
            "evaluation_eq": f"Evaluation: eval_loss = {value}", "bracket_eval": f"[Eval] step {step} | loss {value}",
            "validation_pipe": f"Validation | loss: {value}", "stars_eval": f"*** eval *** loss {value}",
            "val_pipe_step": f"val | step {step} | loss {value}", "validation_loss": f"Validation loss: {value}",
            "eval_colon_step": f"EVAL: step {step} loss {value}", "valid_loss": f"valid loss {value}",
            # torchvision's evaluate (its own batch counter), MXNet's fit, TensorFlow's estimator, DeepSpeed-Chat
            "tv_test": f"Test:   [{step % 50:>2}/50]  eta: 0:00:0{step % 10}  loss: {value} ({value})  acc1: 78.1250 (78.1250)"
                       f"  time: 0.1012  data: 0.0512  max mem: 2547",
            "mxnet_validation": f"Epoch[{step // 1000}] Validation-loss={value}",
            "tf_saving_dict": f"Saving dict for global step {step}: accuracy = 0.91, global_step = {step}, loss = {value}",
            "ds_chat_ppl": f"***** Evaluating perplexity, Epoch {1 + step // 1000}/3 *****\n"
                           f"ppl: {math.exp(float(value))}, loss: {value}"}[kind]


def between(kind: str, step: int, r: Rand) -> str:
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
            "gc": f"gc: collected {100 + n} objects in 0.0{n % 10}s",
            "tv_total_time": f"Epoch: [{step // 1000}] Total time: 0:0{n % 10}:{n % 60:02d} (0.{4000 + n} s / it)",
            "mxnet_time_cost": f"Epoch[{step // 1000}] Time cost={10 + n / 7:.3f}",
            "mxnet_train_acc": f"Epoch[{step // 1000}] Train-accuracy={0.5 + n / 250:.6f}",
            "tf_global_step_sec": f"INFO:tensorflow:global_step/sec: {2 + n / 50:.4g}",
            "tf_saving_ckpt": f"INFO:tensorflow:Saving checkpoints for {step} into /tmp/model/model.ckpt.",
            "d2_inference": f"[07/24 11:20:{n % 60:02d} d2.evaluation.evaluator]: Inference done {11 + n}/500. Dataloading: "
                            f"0.0010 s/iter. Inference: 0.0{n % 9 + 1}00 s/iter. Eval: 0.0001 s/iter. Total: 0.0512 s/iter. "
                            f"ETA=0:00:{n % 60:02d}",
            "coco_ap": f" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 0.{300 + n}",
            "ds_chat_epoch": f"Beginning of Epoch {1 + step // 1000}/3, Total Micro Batches {1000 + n}"}[kind]


