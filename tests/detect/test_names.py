"""The unit-aware name resolver, on spellings that real trainers write."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stethoscope.detect.names import Resolved, recognize, resolve
from stethoscope.logtext.names import metric, metric_name
from stethoscope.importers.registry import read_any

GIB = 2.0**30
GB = 1e9 / GIB  # decimal gigabytes → GiB
BYTES = 1 / GIB
MS = 1e-3
NONE = None  # left alone: resolves to itself, scale 1

# (raw name, our name or NONE, scale, where the spelling comes from)
TABLE = [
    # CamelCase tags run words together (TensorBoard dashboards of C#/Java-style trainers, custom loggers)
    ("GradNorm", "grad/norm", 1.0, "CamelCase TensorBoard tag"),
    ("LearningRate", "opt/lr", 1.0, "CamelCase TensorBoard tag"),
    ("LossScale", "amp/loss_scale", 1.0, "CamelCase TensorBoard tag"),
    ("Time/step_ms", "perf/step_time_s", MS, "a `time/` tag that carries a unit is a timing, not a counter"),
    ("grad_2.0_norm_total", "grad/norm", 1.0, "Lightning utilities/grads.py grad_norm(): grad_{norm_type}_norm_total"),
    ("time/batch", NONE, 1.0, "Composer: a counter, left alone"),
    # nanoGPT train.py (wandb.log)
    ("train/loss", "train/loss", 1.0, "nanoGPT train.py"),
    ("val/loss", "eval/loss", 1.0, "nanoGPT train.py"),
    ("lr", "opt/lr", 1.0, "nanoGPT train.py"),
    ("mfu", "perf/mfu", 1.0, "nanoGPT train.py: running_mfu*100 under a bare name; no unit, no factor"),
    # llm.c train_gpt2.py / train_gpt2.cu console
    ("tok/s", "perf/tokens_per_s", 1.0, "llm.c train_gpt2.py step line `(… ms | … tok/s)`"),
    ("time (ms)", "perf/step_time_s", MS, "llm.c-style console column header"),
    # litgpt pretrain.py / finetune (fabric.log_dict)
    ("iter_time", "perf/step_time_s", 1.0, "litgpt pretrain.py: t1 - iter_t0, seconds"),
    ("remaining_time", NONE, 1.0, "litgpt pretrain.py: an ETA, not a step time"),
    ("learning_rate", "opt/lr", 1.0, "litgpt pretrain.py"),
    ("total_tokens", NONE, 1.0, "litgpt pretrain.py: a count"),
    ("toks/s/device", "perf/tokens_per_s_per_device", 1.0, "litgpt pretrain.py console `speed: … toks/s/device`"),
    # torchtitan components/metrics.py (MetricsProcessor.log)
    ("loss_metrics/global_avg_loss", "train/loss", 1.0, "torchtitan components/metrics.py"),
    ("loss_metrics/global_max_loss", NONE, 1.0, "torchtitan components/metrics.py: max over ranks"),
    ("grad_norm", "grad/norm", 1.0, "torchtitan components/metrics.py"),
    ("throughput(tps)", "perf/tokens_per_s", 1.0, "torchtitan components/metrics.py"),
    ("tps", "perf/tokens_per_s", 1.0, "torchtitan components/metrics.py console `tps:`"),
    ("wps", "perf/tokens_per_s", 1.0, "torchtitan train.py (2024, before `throughput(tps)`)"),
    ("tflops", "perf/tflops", 1.0, "torchtitan components/metrics.py"),
    ("mfu(%)", "perf/mfu", 0.01, "torchtitan components/metrics.py"),
    ("time_metrics/end_to_end(s)", "perf/step_time_s", 1.0, "torchtitan components/metrics.py: time_delta / log_freq"),
    ("time_metrics/data_loading(s)", "perf/data_wait_s", 1.0, "torchtitan components/metrics.py"),
    ("time_metrics/data_loading(%)", "perf/data_wait_frac", 0.01, "torchtitan components/metrics.py"),
    ("memory/max_active(GiB)", "memory/cuda_max_active_gib", 1.0, "torchtitan components/metrics.py"),
    ("memory/max_reserved(GiB)", "memory/cuda_max_reserved_gib", 1.0, "torchtitan components/metrics.py"),
    ("memory/max_reserved(%)", NONE, 1.0, "torchtitan components/metrics.py: a share of the device, not GiB"),
    ("memory/num_alloc_retries", NONE, 1.0, "torchtitan components/metrics.py: a count"),
    ("eval/throughput(tps)", "eval/tokens_per_s", 1.0, "torchtitan components/validate.py"),
    # Megatron-LM megatron/training/training.py (training_log: tensorboard tags, console fields)
    ("iteration-time", "perf/step_time_s", 1.0, "Megatron-LM training.py tensorboard tag, seconds"),
    ("elapsed time per iteration (ms)", "perf/step_time_s", MS, "Megatron-LM training.py console"),
    ("throughput per GPU (TFLOP/s/GPU)", "perf/tflops", 1.0, "Megatron-LM training.py console"),
    ("learning-rate", "opt/lr", 1.0, "Megatron-LM training.py tensorboard tag"),
    ("loss-scale", "amp/loss_scale", 1.0, "Megatron-LM training.py tensorboard tag"),
    ("grad-norm", "grad/norm", 1.0, "Megatron-LM training.py tensorboard tag"),
    ("lm loss", "train/loss", 1.0, "Megatron-LM training.py"),
    ("lm loss validation", "eval/loss", 1.0, "Megatron-LM training.py evaluate_and_print_results"),
    ("mem-reserved-bytes", "memory/cuda_reserved_gib", BYTES, "Megatron-LM training.py --log-memory-to-tensorboard"),
    ("mem-allocated-bytes", "memory/cuda_allocated_gib", BYTES, "Megatron-LM training.py"),
    ("mem-max-allocated-bytes", "memory/cuda_max_allocated_gib", BYTES, "Megatron-LM training.py"),
    ("mem-allocated-count", NONE, 1.0, "Megatron-LM training.py: a count of allocations"),
    ("batch-size", NONE, 1.0, "Megatron-LM training.py tensorboard tag"),
    # NeMo: exp_manager.py TimingCallback (1.x), the same keys + " in s" (2.x), FLOPsMeasurementCallback
    ("train_step_timing", "perf/step_time_s", 1.0, "NeMo utils/exp_manager.py TimingCallback"),
    ("train_step_timing in s", "perf/step_time_s", 1.0, "NeMo 2 lightning TimingCallback"),
    ("train_backward_timing in s", "perf/backward_time_s", 1.0, "NeMo 2 lightning TimingCallback"),
    ("validation_step_timing", "eval/step_time_s", 1.0, "NeMo utils/exp_manager.py TimingCallback"),
    ("test_step_timing", "test/step_time_s", 1.0, "NeMo utils/exp_manager.py TimingCallback"),
    ("reduced_train_loss", "train/loss", 1.0, "NeMo megatron_gpt_model.py"),
    ("tflops_per_sec_per_gpu", "perf/tflops", 1.0, "NeMo callbacks/flops_callback.py"),
    ("consumed_samples", NONE, 1.0, "NeMo megatron_gpt_model.py: a count"),
    # DeepSpeed runtime/engine.py monitor events (wall_clock_breakdown / flops profiler)
    ("Train/Samples/train_loss", "train/loss", 1.0, "DeepSpeed runtime/engine.py"),
    ("Train/Samples/lr", "opt/lr", 1.0, "DeepSpeed runtime/engine.py"),
    ("Train/Samples/loss_scale", "amp/loss_scale", 1.0, "DeepSpeed runtime/engine.py"),
    ("Train/Samples/elapsed_time_ms_forward", "perf/forward_time_s", MS, "DeepSpeed runtime/engine.py"),
    ("Train/Samples/elapsed_time_ms_backward", "perf/backward_time_s", MS, "DeepSpeed runtime/engine.py"),
    ("Train/Samples/elapsed_time_ms_backward_inner", "perf/backward_inner_time_s", MS, "DeepSpeed runtime/engine.py"),
    ("Train/Samples/elapsed_time_ms_backward_allreduce", "perf/backward_allreduce_time_s", MS,
     "DeepSpeed runtime/engine.py"),
    ("Train/Samples/elapsed_time_ms_step", "perf/optimizer_time_s", MS, "DeepSpeed runtime/engine.py: optimizer step"),
    # HF Trainer trainer.py / trainer_utils.py speed_metrics
    ("loss", "train/loss", 1.0, "HF trainer.py _maybe_log_save_evaluate"),
    ("grad_norm", "grad/norm", 1.0, "HF trainer.py"),
    ("eval_loss", "eval/loss", 1.0, "HF trainer.py evaluate"),
    ("eval_samples_per_second", "eval/samples_per_s", 1.0, "HF trainer_utils.py speed_metrics"),
    ("eval_steps_per_second", "eval/steps_per_s", 1.0, "HF trainer_utils.py speed_metrics"),
    ("train_runtime", "train/runtime_s", 1.0, "HF trainer_utils.py speed_metrics: run summary"),
    ("train_samples_per_second", "train/samples_per_s", 1.0, "HF trainer_utils.py speed_metrics: run summary"),
    ("train_steps_per_second", "train/steps_per_s", 1.0, "HF trainer_utils.py speed_metrics: run summary"),
    ("train_tokens_per_second", "train/tokens_per_s", 1.0, "HF trainer_utils.py (include_tokens_per_second)"),
    ("total_flos", NONE, 1.0, "HF trainer.py: a FLOP count"),
    # Lightning: ThroughputMonitor (callbacks/throughput_monitor.py), DeviceStatsMonitor + torch.cuda.memory_stats
    ("throughput/samples_per_sec", "perf/samples_per_s", 1.0, "Lightning test_throughput_monitor.py"),
    ("throughput/device/samples_per_sec", "perf/samples_per_s_per_device", 1.0, "Lightning test_throughput_monitor.py"),
    ("throughput/batches_per_sec", "perf/steps_per_s", 1.0, "Lightning test_throughput_monitor.py"),
    ("throughput/items_per_sec", NONE, 1.0, "Lightning throughput_monitor.py: items are whatever length_fn counts"),
    ("throughput/flops_per_sec", "perf/tflops_total", 1e-12, "Lightning test_throughput_monitor.py: all devices"),
    ("throughput/device/flops_per_sec", "perf/tflops", 1e-12, "Lightning test_throughput_monitor.py"),
    ("throughput/device/mfu", "perf/mfu", 1.0, "Lightning test_throughput_monitor.py: a fraction"),
    ("time/train", NONE, 1.0, "Lightning test_throughput_monitor.py: cumulative seconds"),
    ("DeviceStatsMonitor.on_train_batch_end/allocated_bytes.all.current", "memory/cuda_allocated_gib", BYTES,
     "Lightning callbacks/device_stats_monitor.py"),
    ("allocated_bytes.all.peak", "memory/cuda_max_allocated_gib", BYTES, "torch.cuda.memory_stats(), DeviceStatsMonitor"),
    ("reserved_bytes.all.current", "memory/cuda_reserved_gib", BYTES, "torch.cuda.memory_stats()"),
    ("allocated_bytes.all.freed", NONE, 1.0, "torch.cuda.memory_stats(): a cumulative counter"),
    ("allocated_bytes.large_pool.current", NONE, 1.0, "torch.cuda.memory_stats(): one pool only"),
    # Composer callbacks/speed_monitor.py, memory_monitor.py (bytes / 1e9, no unit in the name)
    ("throughput/tokens_per_sec", "perf/tokens_per_s", 1.0, "Composer speed_monitor.py"),
    ("throughput/device/tokens_per_sec", "perf/tokens_per_s_per_device", 1.0, "Composer speed_monitor.py"),
    ("throughput/device/mfu", "perf/mfu", 1.0, "Composer speed_monitor.py"),
    ("time/batch", NONE, 1.0, "Composer Timestamp: a batch counter, not a time"),
    ("time/token", NONE, 1.0, "Composer Timestamp: a token counter"),
    ("wall_clock/train", "perf/train_wall_s", 1.0, "Composer speed_monitor.py: cumulative seconds"),
    ("memory/peak_allocated_mem", "memory/cuda_max_allocated_gib", GB, "Composer memory_monitor.py"),
    ("memory/current_reserved_mem", "memory/cuda_reserved_gib", GB, "Composer memory_monitor.py"),
    ("memory/alloc_retries", NONE, 1.0, "Composer memory_monitor.py: a count"),
    ("loss/train/total", "train/loss", 1.0, "Composer trainer.py"),
    # fairseq fairseq_cli/train.py, trainer.py
    ("wps", "perf/tokens_per_s", 1.0, "fairseq trainer.py: target tokens per second"),
    ("gnorm", "grad/norm", 1.0, "fairseq trainer.py"),
    ("gb_free", "memory/gpu_free_gib", GB, "fairseq trainer.py: mem_get_info / 1024**3, yet called GB"),
    ("train_wall", NONE, 1.0, "fairseq trainer.py (the fairseq importer maps it)"),
    # Axolotl (HF Trainer callbacks) and TRL
    ("memory/max_mem_active(gib)", "memory/cuda_max_active_gib", 1.0, "Axolotl logs (examples/*/README.md)"),
    ("memory/max_mem_allocated(gib)", "memory/cuda_max_allocated_gib", 1.0, "Axolotl logs"),
    ("memory/device_mem_reserved(gib)", "memory/cuda_reserved_gib", 1.0, "Axolotl logs (examples/gpt-oss/README.md)"),
    ("tokens/train_per_sec_per_gpu", "perf/tokens_per_s_per_device", 1.0,
     "Axolotl utils/callbacks/tokens_per_second.py"),
    ("num_tokens", NONE, 1.0, "TRL sft_trainer.py: tokens seen so far, a count"),
    # hand-written CSV/JSONL columns (issue 8)
    ("step_ms", "perf/step_time_s", MS, "issue 8"),
    ("time_ms", "perf/step_time_s", MS, "issue 8"),
    ("iter_ms", "perf/step_time_s", MS, "issue 8"),
    ("dt_ms", "perf/step_time_s", MS, "issue 8 (nanochat's `dt`)"),
    ("elapsed_ms", "perf/step_time_s", MS, "issue 8"),
    ("train/step_time_ms", "perf/step_time_s", MS, "issue 8"),
    ("step_time_us", "perf/step_time_s", 1e-6, "issue 8"),
    ("s/it", "perf/step_time_s", 1.0, "tqdm rate"),
    ("it/s", "perf/steps_per_s", 1.0, "tqdm rate"),
    ("train/mem_rss_gb", "memory/rss_gib", GB, "issue 8"),
    ("memory_gib", "memory/cuda_allocated_gib", 1.0, "issue 8: no kind named, taken as allocated"),
    ("max_memory_allocated (MiB)", "memory/cuda_max_allocated_gib", 1 / 1024, "issue 8"),
    ("tokens_per_sec", "perf/tokens_per_s", 1.0, "issue 8"),
    ("samples/sec", "perf/samples_per_s", 1.0, "issue 8"),
    ("data_time", "perf/data_wait_s", 1.0, "mmengine/timm logger"),
    ("batch_time", "perf/step_time_s", 1.0, "timm train.py"),
    # the ambiguity rules
    ("time", NONE, 1.0, "a timestamp as likely as a duration"),
    ("time_s", NONE, 1.0, "a cumulative clock as likely as a step time"),
    ("elapsed", "perf/elapsed_s", 1.0, "cumulative wall clock"),
    ("elapsed_time", "perf/elapsed_s", 1.0, "cumulative wall clock"),
    ("elapsed_s", "perf/elapsed_s", 1.0, "cumulative wall clock"),
    ("val_time_ms", NONE, 1.0, "a whole validation, not a step"),
    ("checkpoint_time_ms", NONE, 1.0, "another activity's time"),
    ("step_time_ms_p95", NONE, 1.0, "a statistic of the series, not the series"),
    ("checkpoint_size_gb", NONE, 1.0, "a unit of memory on something that is not memory"),
    ("lr_decay", NONE, 1.0, "an LR word that is not the LR"),
    ("my metric", NONE, 1.0, "unknown"),
    # eval losses in shapes trainers print (issue 26): the development set, held-out data, the loss by its maths
    ("dev loss", "eval/loss", 1.0, "fairseq-style `dev loss`: the development set, not a device"),
    ("dev_mem_gb", "memory/cuda_allocated_gib", GB, "`dev` beside memory is the device"),
    ("held-out loss", "eval/loss", 1.0, "held-out data"),
    ("val_nll", "eval/loss", 1.0, "an eval loss named by its maths"),
    ("valid nll_loss", "eval/loss", 1.0, "fairseq valid nll_loss"),
    ("val_ce", "eval/loss", 1.0, "cross-entropy, abbreviated"),
    ("val_loss_epoch", "eval/loss", 1.0, "Lightning on_epoch aggregate of the eval loss"),
    ("train_loss_epoch", NONE, 1.0, "Lightning's epoch mean of the train loss: another series than the steps'"),
    ("eval_ppl", "eval/ppl", 1.0, "perplexity: exp(eval loss)"),
    ("validation perplexity", "eval/ppl", 1.0, "perplexity: exp(eval loss)"),
]


@pytest.mark.parametrize("raw,name,scale,source", TABLE, ids=[row[0] for row in TABLE])
def test_spellings_of_real_trainers(raw: str, name: str | None, scale: float, source: str) -> None:
    found = resolve(raw)
    assert found.name == (raw if name is None else name), source
    assert math.isclose(found.scale, scale, rel_tol=1e-12), source
    assert (recognize(raw) is None) == (name is None)


def test_gigabytes_are_decimal_and_gibibytes_binary() -> None:
    assert resolve("rss_gb") == Resolved("memory/rss_gib", 1e9 / 2**30)
    assert resolve("rss_gib") == Resolved("memory/rss_gib", 1.0)
    assert resolve("rss_mb") == Resolved("memory/rss_gib", 1e6 / 2**30)
    assert resolve("rss_mib") == Resolved("memory/rss_gib", 1 / 1024)
    assert resolve("rss_kb").scale == 1e3 / 2**30 and resolve("rss_bytes").scale == 1 / 2**30


def test_brackets_suffixes_and_words_spell_the_same_unit() -> None:
    spellings = ("step_time_ms", "step time (ms)", "step_time[ms]", "step time ms", "step-time-ms", "STEP_TIME_MS")
    assert {resolve(s) for s in spellings} == {Resolved("perf/step_time_s", 1e-3)}
    seconds = ("step_time_s", "step_time_sec", "step_time_secs", "step_time_seconds", "step_time (s)")
    assert {resolve(s) for s in seconds} == {Resolved("perf/step_time_s", 1.0)}
    assert resolve("step_time_ns") == Resolved("perf/step_time_s", 1e-9)
    rates = ("tokens/s", "tokens_per_s", "tokens_per_sec", "tokens_per_second", "tokens/sec", "tokens per second")
    assert {resolve(s) for s in rates} == {Resolved("perf/tokens_per_s")}


def test_the_importers_vocabulary_still_wins_and_namespaces_still_apply() -> None:
    assert metric("lr-AdamW/pg2") == Resolved("opt/lr/group1")
    assert metric("eval_runtime") == Resolved("eval/runtime_s")
    assert metric("step_ms") == Resolved("perf/step_time_s", 1e-3)
    assert metric("step_ms", "eval") == Resolved("eval/step_time_s", 1e-3)
    assert metric_name("val_acc") == "eval/acc" and metric_name("Accuracy/val") == "eval/Accuracy"


CSV = """step,loss,step_ms,mem_rss_gb
1,2.5,100,4.0
2,2.4,250,4.5
"""
JSONL = """{"step": 1, "loss": 2.5, "step_ms": 100, "mem_rss_gb": 4.0}
{"step": 2, "loss": 2.4, "step_ms": 250, "mem_rss_gb": 4.5}
"""


@pytest.mark.parametrize("file,text", [("log.csv", CSV), ("log.jsonl", JSONL)])
def test_imported_columns_come_out_in_our_units(tmp_path: Path, file: str, text: str) -> None:
    path = tmp_path / file
    path.write_text(text)
    [run] = read_any(path)
    got = {(p.name, p.step): p.value for p in run.points}
    assert got[("perf/step_time_s", 1)] == pytest.approx(0.1) and got[("perf/step_time_s", 2)] == pytest.approx(0.25)
    assert got[("memory/rss_gib", 2)] == pytest.approx(4.5e9 / 2**30)
    assert got[("train/loss", 2)] == 2.4


def test_two_units_for_one_series_do_not_mix(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 1, "step_time": 0.2, "step_ms": 150}\n')
    [run] = read_any(path)
    assert {p.name: p.value for p in run.points} == {"perf/step_time_s": 0.2, "step_ms": 150.0}


def test_lightning_csv_and_progress_bar_fields_are_converted(tmp_path: Path) -> None:
    folder = tmp_path / "lightning_logs" / "version_0"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text("epoch,step,train_loss_step,step_time_ms_step\n0,1,2.5,120\n0,2,2.4,300\n")
    [run] = read_any(folder / "metrics.csv")
    assert {p.step: p.value for p in run.points if p.name == "perf/step_time_s"} == pytest.approx({1: 0.12, 2: 0.3})
    bar = tmp_path / "nemo.log"  # the field's step time wins over the bar's smoothed it/s
    bar.write_text("Epoch 0:   6%|██  | 30/500 [00:43<09:17,  1.37it/s, loss=2.6, train_step_timing in s=0.5, "
                   "global_step=30]\n")
    [run] = read_any(bar)
    assert {p.name: p.value for p in run.points} == {"train/loss": 2.6, "perf/step_time_s": 0.5}


def test_tensorboard_tags_are_converted(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    torch.set_num_threads(1)
    writer = SummaryWriter(str(tmp_path))
    for step in range(3):
        writer.add_scalar("mem-reserved-bytes", 2.0**31, step)
        writer.add_scalar("iter_ms", 250.0, step)
    writer.close()
    [run] = read_any(next(tmp_path.glob("events.out.tfevents.*")))
    assert {(p.name, p.value) for p in run.points} == {("memory/cuda_reserved_gib", 2.0), ("perf/step_time_s", 0.25)}
    assert run.meta["tags"]["iter_ms"] == "perf/step_time_s"


@pytest.mark.timeout(120)
def test_one_huge_token_is_not_a_hang():
    """A corrupt log can hold a single 1 MB 'word' where a metric name goes; the torch memory-stat
    pattern used to backtrack over it quadratically (hours at this size)."""
    from stethoscope.detect.names import recognize

    for tok in ("1" * 1_000_000, "aB" * 500_000, "x_bytes." * 100_000):
        assert recognize(tok) is None
