"""Console logs of real trainers, line formats quoted from each trainer's source (file @ commit or tag), read
through `read_any` as a user's `stethoscope diagnose FILE` would; plus made-up trainers, noise, resumes and
the 0-step report. Values are asserted in our units (seconds, GiB, tokens/s, MFU as a fraction)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

import numpy as np
import pytest

from stethoscope.importers import read_any
from stethoscope.importers.console import ConsoleImporter, ConsoleReader, strip_ansi
from stethoscope.logtext import linescan
from stethoscope.logtext.names import EPOCH
from stethoscope.records import (
    CUDA_ALLOCATED, CUDA_PEAK, EVAL_LOSS, GRAD_NORM, LOSS, LR, MFU, SAMPLES_PER_S, STEP_TIME, TFLOPS, TOKENS_PER_S,
)
from tests.conftest import run_cli
from tests.importers.series import names, series


@pytest.fixture(autouse=True, params=["native", "tokens"] if linescan.available() else ["tokens"])
def _token_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here reads through the native scanner's token columns (where it was built) and through
    the token lists: the same answers."""
    monkeypatch.setenv("STETHOSCOPE_NATIVE", "1" if request.param == "native" else "0")

GB = 1e9 / 2**30  # "GB" is read as 10^9 bytes (detect/names.py)
R, G, O, T, B, C, M, Y, X = ("\x1b[31m", "\x1b[32m", "\x1b[38;2;180;60;0m", "\x1b[38;2;54;234;195m", "\x1b[34m",
                             "\x1b[36m", "\x1b[35m", "\x1b[33m", "\x1b[39m")  # torchtitan tools/utils.py Color


@dataclass
class Case:
    trainer: str
    source: str  # where the format string lives: repository file @ commit or tag
    text: str
    expect: dict[str, dict[int, float]]
    format: str = "console"
    extra: dict[str, object] = field(default_factory=dict)


def _titan(step: int, loss: float, gn: float, mem: float, tps: str, tflops: float, mfu: str) -> str:
    return (f"[rank0]:[titan] 2024-07-24 11:20:{step:02d},402 - root - INFO - {R}step: {step:2}  {G}loss: {loss:8.5f}  "
            f"{O}grad_norm: {gn:7.4f}  {T}memory: {mem:5.2f}GiB(41.20%)  {B}tps: {tps}  {C}tflops: {tflops:,.2f}  "
            f"{M}mfu: {mfu}{X}")


LLMC = "karpathy/llm.c train_gpt2.cu @ "
CASES = [
    Case("torchtitan", "pytorch/torchtitan torchtitan/components/metrics.py @ b5bcd76c66d0acb1a08b176d9639425bc55e0b2a "
         "(log and log_validation; logger format '[titan] %(asctime)s - %(name)s - %(levelname)s - ')",
         "\n".join([
             "[rank0]:[titan] 2024-07-24 11:19:59,001 - root - INFO - Training starts at step 1",
             _titan(10, 8.1234, 1.3444, 30.33, "15,723", 91.02, "29.17%"),
             _titan(20, 7.9, 1.1, 30.35, "15,801", 91.5, "29.30%"),
             _titan(30, 7.5, 0.9, 30.36, "15,900", 92.0, "29.50%"),
             (f"[rank0]:[titan] 2024-07-24 11:20:31,000 - root - INFO - {Y}validate step: 30  {G}loss:  7.6000  "
              f"{T}memory: 30.36GiB(41.20%)  {B}tps: 1,723{X}"),
         ]) + "\n",
         {LOSS: {10: 8.1234, 20: 7.9, 30: 7.5}, GRAD_NORM: {10: 1.3444, 20: 1.1, 30: 0.9},
          CUDA_ALLOCATED: {10: 30.33, 20: 30.35, 30: 30.36}, TOKENS_PER_S: {10: 15723, 20: 15801, 30: 15900},
          TFLOPS: {10: 91.02, 20: 91.5, 30: 92.0}, MFU: {10: 0.2917, 20: 0.293, 30: 0.295}, EVAL_LOSS: {30: 7.6}}),
    Case("llm.c 1 (printf step %d: train loss %f (took %f ms))", LLMC + "80f52e5290ad70f46166082d186751818718f80a",
         "step 0: train loss 5.356086 (took 1433.125000 ms)\nstep 1: train loss 4.300641 (took 1407.600000 ms)\n"
         "val loss 4.327394\nstep 2: train loss 4.623083 (took 1410.220000 ms)\n",
         {LOSS: {0: 5.356086, 1: 4.300641, 2: 4.623083}, STEP_TIME: {0: 1.433125, 1: 1.4076, 2: 1.41022},
          EVAL_LOSS: {1: 4.327394}}),
    Case("llm.c 2 (step %d/%d: train loss %f (%f ms))", LLMC + "fdd66082814cc47a41e205420c7d30eb37451899",
         "step 1/37: train loss 4.367857 (80.095544 ms)\nstep 2/37: train loss 4.031402 (79.871010 ms)\n"
         "step 3/37: train loss 3.785437 (79.976530 ms)\n",
         {LOSS: {1: 4.367857, 2: 4.031402, 3: 3.785437}, STEP_TIME: {1: 0.080095544, 3: 0.07997653}}),
    Case("llm.c 3 (… (%f ms, %d tok/s))", LLMC + "e55ed0a4e647e4cd1965f404b106a4b54d068408",
         "step 1/37: train loss 4.367857 (80.095544 ms, 51141 tok/s)\n"
         "step 2/37: train loss 4.031402 (79.871010 ms, 51285 tok/s)\n"
         "step 3/37: train loss 3.785437 (79.976530 ms, 51217 tok/s)\n",
         {LOSS: {1: 4.367857, 2: 4.031402, 3: 3.785437}, STEP_TIME: {2: 0.07987101}, TOKENS_PER_S: {1: 51141, 3: 51217}}),
    Case("llm.c 4 (step %4d/%d: …)", LLMC + "48f2170e7bc7689d984d4f966bbb639b284857f3",
         "step    1/74: train loss 4.367857 (80.095544 ms, 51141 tok/s)\n"
         "step    2/74: train loss 4.031402 (79.871010 ms, 51285 tok/s)\n"
         "step   10/74: train loss 3.785437 (79.976530 ms, 51217 tok/s)\n",
         {LOSS: {1: 4.367857, 2: 4.031402, 10: 3.785437}, TOKENS_PER_S: {10: 51217}}),
    Case("llm.c 5 (… (acc %f) (%f ms, %d tok/s))", LLMC + "d49e8301ebe330c2b25c2535fcaafda581fdc851",
         "step    1/74: train loss 4.367857 (acc 4.367857) (80.095544 ms, 51141 tok/s)\n"
         "step    2/74: train loss 4.031402 (acc 4.031402) (79.871010 ms, 51285 tok/s)\n"
         "step    3/74: train loss 3.785437 (acc 3.785437) (79.976530 ms, 51217 tok/s)\n",
         {LOSS: {1: 4.367857, 2: 4.031402, 3: 3.785437}, STEP_TIME: {3: 0.07997653}, TOKENS_PER_S: {2: 51285}}),
    Case("llm.c 6 (… (%f ms, %0f tok/s))", LLMC + "ce333de156edda1e3de7ad7b72c23ad2b5471168",
         "step    1/74: train loss 4.367857 (acc 4.367857) (80.095544 ms, 51141.250000 tok/s)\n"
         "step    2/74: train loss 4.031402 (acc 4.031402) (79.871010 ms, 51285.500000 tok/s)\n"
         "step    3/74: train loss 3.785437 (acc 3.785437) (79.976530 ms, 51217.750000 tok/s)\n",
         {LOSS: {1: 4.367857, 3: 3.785437}, TOKENS_PER_S: {1: 51141.25, 3: 51217.75}}),
    Case("llm.c 7 (… norm %.4f (%.2f ms, %.0f tok/s))", LLMC + "bc58cd1dc1aa6a3aa121033616ffc7f6f01871b5",
         "step    1/74: train loss 4.367857 norm 5.1234 (80.10 ms, 51141 tok/s)\n"
         "step    2/74: train loss 4.031402 norm 3.2001 (79.87 ms, 51285 tok/s)\n"
         "step    3/74: train loss 3.785437 norm 2.0040 (79.98 ms, 51217 tok/s)\n",
         {LOSS: {1: 4.367857, 3: 3.785437}, GRAD_NORM: {1: 5.1234, 2: 3.2001, 3: 2.004}, STEP_TIME: {1: 0.0801}}),
    Case("llm.c 8 (… norm %.4f lr %.2e (%.2f ms, %.0f tok/s))", LLMC + "661975cc3c6a0e1684dcc91430f4e0fb4ebbdf23",
         "step    1/74: train loss 4.367857 norm 5.1234 lr 6.00e-06 (80.10 ms, 51141 tok/s)\n"
         "step    2/74: train loss 4.031402 norm 3.2001 lr 1.20e-05 (79.87 ms, 51285 tok/s)\n"
         "step    3/74: train loss 3.785437 norm 2.0040 lr 1.80e-05 (79.98 ms, 51217 tok/s)\n",
         {LOSS: {2: 4.031402}, GRAD_NORM: {3: 2.004}, LR: {1: 6e-6, 2: 1.2e-5, 3: 1.8e-5}, TOKENS_PER_S: {3: 51217}}),
    Case("llm.c 9 (| train loss %7.4f | … | %.1f%% A100 fp16 MFU | …)", LLMC + "90a745c40c57527d038d002f51d7eef4d4e1b849",
         "step    1/800 | train loss  4.9883 | norm 1.5812 | lr 6.10e-05 | 224.87 ms | 0.0% A100 fp16 MFU | 3415 "
         "tok/s\n"
         "step    2/800 | train loss  4.7120 | norm 1.4001 | lr 1.22e-04 | 221.04 ms | 38.2% A100 fp16 MFU | "
         "3471 tok/s\n"
         "val loss 4.701200\n"
         "step    3/800 | train loss  4.5003 | norm 1.2222 | lr 1.83e-04 | 220.50 ms | 38.3% A100 fp16 MFU | "
         "3480 tok/s\n",
         {LOSS: {1: 4.9883, 2: 4.712, 3: 4.5003}, GRAD_NORM: {1: 1.5812}, LR: {2: 1.22e-4}, STEP_TIME: {1: 0.22487},
          MFU: {1: 0.0, 2: 0.382}, TOKENS_PER_S: {1: 3415, 3: 3480}, EVAL_LOSS: {2: 4.7012}}),
    Case("llm.c 10 (| train loss %7.6f | … A100 fp16 MFU)", LLMC + "c6680a25ae56415daad5c60c8f630ea1aa590725",
         "step    1/800 | train loss 4.988302 | norm 1.5812 | lr 6.10e-05 | 224.87 ms | 0.0% A100 fp16 MFU | "
         "3415 tok/s\n"
         "step    2/800 | train loss 4.712000 | norm 1.4001 | lr 1.22e-04 | 221.04 ms | 38.2% A100 fp16 MFU | "
         "3471 tok/s\n"
         "step    3/800 | train loss 4.500300 | norm 1.2222 | lr 1.83e-04 | 220.50 ms | 38.3% A100 fp16 MFU | "
         "3480 tok/s\n",
         {LOSS: {1: 4.988302, 2: 4.712, 3: 4.5003}, MFU: {3: 0.383}, STEP_TIME: {3: 0.2205}}),
    Case("llm.c 11 (… bf16 MFU …)", LLMC + "9374d751de4da08f6b7aade24e766e2e4ec1e34d",
         "step    1/800 | train loss 4.988302 | norm 1.5812 | lr 6.10e-05 | 224.87 ms | 0.0% bf16 MFU | 3415 tok/s\n"
         "step    2/800 | train loss 4.712000 | norm 1.4001 | lr 1.22e-04 | 221.04 ms | 38.2% bf16 MFU | 3471 tok/s\n"
         "step    3/800 | train loss 4.500300 | norm 1.2222 | lr 1.83e-04 | 220.50 ms | 38.3% bf16 MFU | 3480 tok/s\n",
         {LOSS: {1: 4.988302, 3: 4.5003}, GRAD_NORM: {2: 1.4001}, MFU: {2: 0.382}, TOKENS_PER_S: {2: 3471}},
         format="textlog"),
    Case("llm.c 12 (| loss %7.6f (z %+.2f)| …)", LLMC + "569f9f16f9468587a65d8a2678114de1a5596946",
         "step    1/800 | loss 4.988302 (z +0.00)| norm 1.5812 | lr 6.10e-05 | 224.87 ms | 0.0% bf16 MFU | 3415 tok/s\n"
         "step    2/800 | loss 4.712000 (z -0.71)| norm 1.4001 | lr 1.22e-04 | 221.04 ms | 38.2% bf16 MFU | 3471 "
         "tok/s\n"
         "step    3/800 | loss 4.500300 (z -0.70)| norm 1.2222 | lr 1.83e-04 | 220.50 ms | 38.3% bf16 MFU | 3480 "
         "tok/s\n",
         {LOSS: {1: 4.988302, 2: 4.712, 3: 4.5003}, GRAD_NORM: {3: 1.2222}, LR: {1: 6.1e-5}}, format="textlog"),
    Case("llm.c 13 (| loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| …)", LLMC + "59830367f253a4b22205740a199d79966b639836",
         "step    1/800 | loss 4.988302 (+0.00z)| norm 1.5812 (+0.00z)| lr 6.10e-05 | 224.87 ms | 0.0% bf16 MFU "
         "| 3415 tok/s\n"
         "step    2/800 | loss 4.712000 (-0.71z)| norm 1.4001 (-0.70z)| lr 1.22e-04 | 221.04 ms | 38.2% bf16 MFU "
         "| 3471 tok/s\n"
         "step    3/800 | loss 4.500300 (-0.70z)| norm 1.2222 (-0.71z)| lr 1.83e-04 | 220.50 ms | 38.3% bf16 MFU "
         "| 3480 tok/s\n",
         {LOSS: {1: 4.988302, 3: 4.5003}, GRAD_NORM: {1: 1.5812, 2: 1.4001}, STEP_TIME: {2: 0.22104}}, format="textlog"),
    Case("nanoGPT", "karpathy/nanoGPT train.py @ 3adf61e154c3fe3fca428ad6bc3818b27a3b8291",
         "step 0: train loss 10.9876, val loss 10.9901\niter 0: loss 10.9812, time 9123.45ms, mfu -100.00%\n"
         "iter 10: loss 9.1234, time 45.67ms, mfu 12.34%\niter 20: loss 8.0001, time 44.10ms, mfu 12.50%\n",
         {LOSS: {0: 10.9812, 10: 9.1234, 20: 8.0001}, STEP_TIME: {10: 0.04567, 20: 0.0441}, MFU: {10: 0.1234},
          EVAL_LOSS: {0: 10.9901}}, format="textlog"),
    Case("nanochat", "karpathy/nanochat scripts/base_train.py @ 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd",
         "step 00020/13920 (0.14%) | loss: 6.730000 | lrm: 1.00 | dt: 1350.44ms | tok/sec: 388,235 | bf16_mfu: 24.27 "
         "| epoch: 1 | total time: 0.45m\n"
         "step 00021/13920 (0.15%) | loss: 6.710000 | lrm: 1.00 | dt: 1349.00ms | tok/sec: 388,600 | bf16_mfu: 24.30 "
         "| epoch: 1 | total time: 0.47m\n"
         "Step 00021 | Validation bpb: 0.812345\n"
         "step 00022/13920 (0.16%) | loss: 6.690000 | lrm: 1.00 | dt: 1351.10ms | tok/sec: 388,100 | bf16_mfu: 24.20 "
         "| epoch: 1 | total time: 0.49m\n",
         {LOSS: {20: 6.73, 21: 6.71, 22: 6.69}, STEP_TIME: {20: 1.35044}, TOKENS_PER_S: {20: 388235}, MFU: {22: 0.242},
          "eval/validation_bpb": {21: 0.812345}}, format="textlog"),
    Case("modded-nanogpt (2024, train_loss)", "KellerJordan/modded-nanogpt records/track_1_short/2024-12-04_ValueEmbed/"
         "train_gpt2.py @ f411b3d346aa52d3504324ca93c230fd84c6c07f",
         "step:0/1530 val_loss:10.8258 train_time:0ms step_avg:nanms\n"
         "step:1/1530 train_loss:10.8258 train_time:28113ms step_avg:nanms\n"
         "step:11/1530 train_loss:9.1234 train_time:29450ms step_avg:133.70ms\n"
         "step:12/1530 train_loss:9.0000 train_time:29584ms step_avg:134.00ms\n",
         {LOSS: {1: 10.8258, 11: 9.1234, 12: 9.0}, EVAL_LOSS: {0: 10.8258}, STEP_TIME: {12: 0.134}},
         format="textlog"),
    Case("modded-nanogpt (2025, no train loss)", "KellerJordan/modded-nanogpt train_gpt.py @ "
         "f411b3d346aa52d3504324ca93c230fd84c6c07f",
         "step:1/1770 train_time:1234ms step_avg:1234.00ms\nstep:2/1770 train_time:1357ms step_avg:678.50ms\n"
         "step:3/1770 train_time:1480ms step_avg:493.33ms\n",
         {"perf/train_time_s": {1: 1.234, 2: 1.357, 3: 1.48}, "perf/step_avg_s": {2: 0.6785},
          STEP_TIME: {2: 0.123, 3: 0.123}}, format="textlog"),  # its own dialect reads steps without a loss
    Case("litgpt", "Lightning-AI/litgpt litgpt/pretrain.py @ 26857050fe3ff627cd714fe92f5838f51a3d5efa",
         "Epoch 1 | iter 8 step 1 | loss train: 10.912, val: n/a | iter time: 512.30 ms (step) remaining time: "
         "0:10:00\n"
         "Epoch 1 | iter 16 step 2 | loss train: 10.500, val: n/a | iter time: 510.00 ms (step) remaining time: "
         "0:09:59\n"
         "iter 16: val loss 10.4000, val time: 1234.00 ms\n"
         "Epoch 1 | iter 24 step 3 | loss train: 10.100, val: 10.400 | iter time: 509.00 ms (step) remaining "
         "time: 0:09:58\n",
         # `iter` counts micro-batches (8 a step here): the optimizer's step is the step, the eval's iter over 8
         {LOSS: {1: 10.912, 2: 10.5, 3: 10.1}, STEP_TIME: {1: 0.5123}, EVAL_LOSS: {2: 10.4}}, format="textlog"),
    Case("Megatron-LM", "NVIDIA/Megatron-LM megatron/training/training.py @ 86df799dc4c78e4bd7fbae972b3ee743e8b14f02 "
         "(training_log; the dedicated parser reads it)",
         "".join(f" [2024-05-01 10:00:{s:02d}] iteration {s:8d}/     100 | consumed samples: {16 * s:12d} | elapsed time per "
                 f"iteration (ms): {500.0 + s:.1f} | learning rate: {s * 1e-5:.6E} | global batch size:    16 | "
                 f"lm loss: "
                 f"{3 - s / 10:.6E} | loss scale: 1.0 | grad norm: {0.5 + s / 100:.3f} | number of skipped "
                 f"iterations:   0 | "
                 "number of nan iterations:   0 |\n" for s in (1, 2, 3)),
         {LOSS: {1: 2.9, 2: 2.8, 3: 2.7}, LR: {1: 1e-5, 3: 3e-5}, GRAD_NORM: {2: 0.52}, STEP_TIME: {1: 0.501}},
         format="megatron"),
    Case("GPT-NeoX", "EleutherAI/gpt-neox megatron/logging.py @ ea7aefd8f8e183256992d9fede4d7c71a46d67a5 "
         "(training_log; the dedicated parser reads it)",
         "".join(f" samples/sec: 12.345 | iteration {s:8d}/    1000 | elapsed time per iteration (ms): {500.0 + s:.1f} | "
                 f"learning rate: {s * 1e-5:.3E} | approx flops per GPU: 100.0TFLOPS | lm_loss: {3 - s / 10:.6E} | "
                 "loss scale: 1024.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
                 for s in (10, 20, 30)),
         {LOSS: {10: 2.0, 20: 1.0, 30: 0.0}, LR: {10: 1e-4}, STEP_TIME: {20: 0.52}}, format="megatron"),
    Case("DeepSpeed", "microsoft/DeepSpeed deepspeed/runtime/engine.py (_report_progress) and deepspeed/utils/timer.py "
         "(ThroughputTimer.stop) @ 38327e07f6cd39b63418f60cedd1651b0be3e7c3; log_dist adds '[Rank N] '",
         "".join(f"[2025-02-21 12:05:{s:02d},123] [INFO] [logging.py:128:log_dist] [Rank 0] step={s}, skipped=0, "
                 f"lr=[{s * 1e-5:.5f}], mom=[(0.9, 0.999)]\n"
                 f"[2025-02-21 12:05:{s:02d},456] [INFO] [timer.py:264:stop] "
                 f"epoch=0/micro_step={2 * s}/global_step={s}, "
                 f"RunningAvgSamplesPerSec=31.2{s}, CurrSamplesPerSec=30.{s}, MemAllocated=4.2{s}GB, "
                 f"MaxMemAllocated=9.8{s}GB\n" for s in (10, 20, 30)),
         {LR: {10: 1e-4, 20: 2e-4, 30: 3e-4}, SAMPLES_PER_S: {10: 30.1, 20: 30.2, 30: 30.3},
          CUDA_ALLOCATED: {10: 4.21 * GB, 30: 4.23 * GB}, CUDA_PEAK: {20: 9.82 * GB}}),
    Case("HF Trainer (tqdm bar + dicts)", "huggingface/transformers src/transformers/trainer_callback.py @ "
         "55093b758b338fdc7903e778509523d755ae080d (ProgressCallback.on_log: training_bar.write(str(logs)); tqdm redraws the bar after a write, the evaluation's bar "
         "counts its own batches)",
         "  0%|          | 0/30 [00:00<?, ?it/s]\r  3%|▎         | 1/30 [00:01<00:29,  1.00it/s]"
         "\r 33%|███▎      | 10/30 [00:10<00:20,  1.00it/s]\r                                              \r"
         "{'loss': 2.3456, 'grad_norm': 0.4123, 'learning_rate': 4.9e-05, 'epoch': 0.33}\n"
         "\r 33%|███▎      | 10/30 [00:10<00:20,  1.00it/s]\r 67%|██████▋   | 20/30 [00:20<00:10,  1.00it/s]"
         "\r                                              \r"
         "{'loss': 2.1, 'grad_norm': 0.39, 'learning_rate': 4.8e-05, 'epoch': 0.67}\n"
         "\r 67%|██████▋   | 20/30 [00:20<00:10,  1.00it/s]\n\r  0%|          | 0/2 [00:00<?, ?it/s]\x1b[A\n"
         "{'eval_loss': 2.2, 'eval_runtime': 1.5, 'eval_samples_per_second': 66.7, 'eval_steps_per_second': 8.3, "
         "'epoch': 0.67}\n"
         "\r 67%|██████▋   | 20/30 [00:20<00:10,  1.00it/s]"
         "\r100%|██████████| 30/30 [00:30<00:00,  1.00it/s]\r                                              \r"
         "{'loss': 1.9, 'grad_norm': 0.35, 'learning_rate': 4.7e-05, 'epoch': 1.0}\n"
         "{'train_runtime': 30.5, 'train_samples_per_second': 7.9, 'train_steps_per_second': 0.98, 'train_loss': 2.1, "
         "'epoch': 1.0}\n",
         {LOSS: {10: 2.3456, 20: 2.1, 30: 1.9}, GRAD_NORM: {10: 0.4123}, LR: {20: 4.8e-5}, EVAL_LOSS: {20: 2.2},
          EPOCH: {10: 0.33}}, format="textlog"),
    Case("HF Trainer (PrinterCallback, no bar; a config dict before it)",
         "huggingface/transformers src/transformers/trainer_callback.py @ "
         "55093b758b338fdc7903e778509523d755ae080d (PrinterCallback.on_log: print(logs))",
         "{'learning_rate': 5e-05, 'per_device_train_batch_size': 8, 'warmup_steps': 100}\n"
         "{'loss': 2.3456, 'grad_norm': 0.4123, 'learning_rate': 4.9e-05, 'epoch': 0.33}\n"
         "{'loss': 2.1, 'grad_norm': 0.39, 'learning_rate': 4.8e-05, 'epoch': 0.67}\n"
         "{'loss': 1.9, 'grad_norm': 0.35, 'learning_rate': 4.7e-05, 'epoch': 1.0}\n",
         {LOSS: {1: 2.3456, 2: 2.1, 3: 1.9}, LR: {1: 4.9e-5, 3: 4.7e-5}}),
    Case("TRL SFTTrainer (HF Trainer dicts with TRL's keys)", "huggingface/trl trl/trainer/sft_trainer.py @ "
         "d11f0f530ee585d0c691ebb78eb36e9f34c1a59f (num_tokens, mean_token_accuracy in _metrics, printed by "
         "transformers' ProgressCallback)",
         "{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'num_tokens': 10240.0, "
         "'mean_token_accuracy': 0.71, 'epoch': 0.01}\n"
         "{'loss': 1.1, 'grad_norm': 0.45, 'learning_rate': 1.9e-05, 'num_tokens': 20480.0, "
         "'mean_token_accuracy': 0.72, 'epoch': 0.02}\n"
         "{'loss': 1.0, 'grad_norm': 0.41, 'learning_rate': 1.8e-05, 'num_tokens': 30720.0, "
         "'mean_token_accuracy': 0.74, 'epoch': 0.03}\n",
         {LOSS: {1: 1.2345, 2: 1.1, 3: 1.0}, GRAD_NORM: {3: 0.41}, "mean_token_accuracy": {2: 0.72}}),
    Case("Composer", "mosaicml/composer composer/loggers/console_logger.py @ 6405188805a0054b4551ec49e4919c54c971d0e8 "
         "(log_to_console: '[epoch=E][batch=N/T]:' then '\\n\\t {prefix}{name}: {value:.4f}'; an eval's header "
         "'[Eval batch=B/T] Eval on {label} data', its metrics LLM Foundry's)",
         "".join(f"[epoch=1][batch={s}/100]:\n\t Train time/batch: {s - 1}\n\t Train loss/train/total: {3 - s / 100:.4f}\n"
                 f"\t Train lr-DecoupledAdamW/group0: {s * 1e-5:.4f}\n" for s in (10, 20, 30))
         + "[Eval batch=20/20] Eval on eval data:\n\t Eval metrics/eval/LanguageCrossEntropy: 2.6500\n",
         {LOSS: {10: 2.9, 20: 2.8, 30: 2.7}, LR: {10: 1e-4, 20: 2e-4}, EVAL_LOSS: {30: 2.65}}),
    Case("fairseq", "facebookresearch/fairseq fairseq/logging/progress_bar.py (SimpleProgressBar, JsonProgressBar); "
         "the dedicated parser reads it",
         "2020-03-23 11:37:00 | INFO | train_inner | epoch 002:    300 / 356 loss=9.9, nll_loss=9.1, ppl=549.2, "
         "wps=31000.5, ups=0.07, wpb=430000, bsz=14000, num_updates=650, lr=0.0001625, gnorm=40.5, loss_scale=0.5, "
         "train_wall=300, wall=9500\n"
         "2020-03-23 11:38:13 | INFO | train_inner | epoch 002:    345 / 356 loss=9.8, nll_loss=8.9, ppl=474.3, "
         "wps=31194.9, ups=0.07, wpb=430000, bsz=14000, num_updates=695, lr=0.00017375, gnorm=55.0, loss_scale=0.5, "
         "train_wall=310, wall=9786\n"
         "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, "
         "num_updates=700, "
         "lr=0.000175, gnorm=156.036, loss_scale=0.5, wall=9877\n",
         {LOSS: {650: 9.9, 695: 9.8, 700: 9.44}, GRAD_NORM: {700: 156.036}}, format="fairseq"),
    Case("Lightning progress bar", "Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/progress/"
         "tqdm_progress.py (TQDMProgressBar: tqdm bar with get_metrics() postfix, v_num)",
         "Epoch 0:  10%|█         | 100/1000 [00:10<01:30, 10.00it/s, v_num=0, train_loss=2.310]\r"
         "Epoch 0:  20%|██        | 200/1000 [00:20<01:20, 10.00it/s, v_num=0, train_loss=2.100]\r"
         "Epoch 0:  30%|███       | 300/1000 [00:30<01:10,  8.00it/s, v_num=0, train_loss=1.900]\n",
         {LOSS: {100: 2.31, 200: 2.1, 300: 1.9}, STEP_TIME: {100: 0.1, 300: 0.125}}, format="textlog"),
    Case("Keras 2 progress bar", "keras-team/keras keras/utils/generic_utils.py (Progbar.update, verbose=1, not a "
         "tty) @ v2.15.0 (601488fd4c1468ae7872e132e0f1c9843df54182)",
         "Epoch 1/2\n"
         " 10/100 [==>...........................] - ETA: 1s - loss: 2.3000\n"
         " 50/100 [==============>...............] - ETA: 0s - loss: 2.1000\n"
         "100/100 [==============================] - 2s 20ms/step - loss: 1.9000\n"
         "Epoch 2/2\n"
         " 10/100 [==>...........................] - ETA: 1s - loss: 1.8000\n"
         "100/100 [==============================] - 2s 19ms/step - loss: 1.7000\n",
         {LOSS: {10: 2.3, 50: 2.1, 100: 1.9, 110: 1.8, 200: 1.7}, STEP_TIME: {100: 0.02, 200: 0.019}}),
    Case("Keras 3 progress bar", "keras-team/keras keras/src/utils/progbar.py (Progbar.update, verbose=1) @ "
         "3422977a5e38fb2f7709aaa9a08e47f0c43d0f60",
         "Epoch 1/1\n"
         "\x1b[1m 10/100\x1b[0m \x1b[32m━━\x1b[0m\x1b[37m━━━━━━━━━━━━━━━━━━\x1b[0m \x1b[1m1s\x1b[0m 12ms/step - "
         "loss: 2.3000\n"
         "\x1b[1m 50/100\x1b[0m \x1b[32m━━━━━━━━━━\x1b[0m\x1b[37m━━━━━━━━━━\x1b[0m \x1b[1m0s\x1b[0m 11ms/step - "
         "loss: 2.1000\n"
         "\x1b[1m100/100\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m\x1b[37m\x1b[0m \x1b[1m1s\x1b[0m 10ms/step - "
         "loss: 1.9000\n",
         {LOSS: {10: 2.3, 50: 2.1, 100: 1.9}, STEP_TIME: {10: 0.012, 100: 0.010}}),
]

# Two trainers nobody listed, in the shapes above: read without new code.
MADE_UP = [
    Case("made-up: key=value with units", "(held out: no trainer)",
         "".join(f"[trainer] step={s}/5000 loss={3 - s / 1000:.3f} lr={s * 1e-6:.1e} grad_norm=0.{s // 10} "
                 f"throughput={800 + s}.0 samples/s peak_mem=12.{s // 100}GiB\n" for s in (100, 200, 300)),
         {LOSS: {100: 2.9, 200: 2.8, 300: 2.7}, LR: {100: 1e-4, 300: 3e-4}, GRAD_NORM: {100: 0.1, 300: 0.3},
          SAMPLES_PER_S: {100: 900, 200: 1000}, "memory/cuda_max_allocated_gib": {300: 12.3}}),
    Case("made-up: Iteration N :: key value", "(held out: no trainer)",
         "".join(f"2025-06-01 08:00:0{i} Iteration {s} :: loss {2 - s / 1000:.4f} :: val_loss {2.1 - s / 1000:.4f} :: "
                 f"step_time {0.5 + i / 100:.2f}s :: tokens/s 12.{i}k\n" for i, s in enumerate((100, 200, 300))),
         {LOSS: {100: 1.9, 300: 1.7}, EVAL_LOSS: {200: 1.9}, STEP_TIME: {100: 0.5, 300: 0.52},
          TOKENS_PER_S: {100: 12000, 200: 12100, 300: 12200}}),
]


@pytest.mark.parametrize("case", CASES + MADE_UP, ids=lambda c: c.trainer)
def test_real_line_formats(write, case: Case) -> None:
    (run,) = read_any(write("train.log", case.text))
    assert run.format == case.format, run.warnings
    for name, expected in case.expect.items():
        got = series(run, name)
        for step, value in expected.items():
            assert step in got, f"{name} has no step {step}: {got}"
            assert got[step] == pytest.approx(value, rel=1e-6, abs=1e-12), (name, step)


def test_the_table_covers_every_trainer_of_the_issue() -> None:
    trainers = {c.trainer.split(" ")[0] for c in CASES}
    assert {"torchtitan", "llm.c", "nanoGPT", "nanochat", "modded-nanogpt", "litgpt", "Megatron-LM", "GPT-NeoX",
            "DeepSpeed", "HF", "TRL", "Composer", "fairseq", "Lightning", "Keras"} <= trainers
    assert sum(c.trainer.startswith("llm.c") for c in CASES) == 13  # every printf of train_gpt2.cu's history
    assert all(len(re.split(r"[\r\n]+", c.text.strip())) >= 3 for c in CASES + MADE_UP)


def _noisy() -> str:
    lines = ["W0724 11:19:58.000000 140 torch/distributed/run.py:779] Setting OMP_NUM_THREADS environment variable",
             "Loading checkpoint shards: 100%|██████████| 8/8 [00:01<00:00,  5.10it/s]"]
    for s in (1, 2, 3):
        lines.append(_titan(s, 9 - s, 1.0 + s, 30.0, "15,000", 90.0, "29.00%"))
        lines.append(_titan(s, 19 - s, 9.0, 31.0, "14,000", 80.0, "25.00%").replace("[rank0]", "[rank1]"))
    lines += ["[rank1]:Traceback (most recent call last):", '[rank1]:  File "train.py", line 9, in <module>',
              "[rank1]:RuntimeError: CUDA error: an illegal memory access was encountered",
              "[rank0]:/usr/lib/python3/warnings.py:10: UserWarning: something deprecated",
              "Traceback (most recent call last):", '  File "/opt/loader.py", line 42, in prefetch',
              "    batch = next(it)", "StopIteration"]
    lines.append(_titan(4, 5.0, 0.5, 30.0, "15,100", 90.0, "29.10%"))
    return "\n".join(lines) + "\n"


def test_noise_ansi_ranks_traceback_and_a_bar_are_read_not_refused(write) -> None:
    (run,) = read_any(write("slurm-1234.out", _noisy()))
    assert run.format == "console"
    assert series(run, LOSS) == {1: 8, 2: 7, 3: 6, 4: 5.0}  # rank 0's
    assert any("several ranks" in w and "rank 0" in w for w in run.warnings)
    assert any("illegal memory access" in ln.text for ln in run.lines)
    assert names(run) == {LOSS, GRAD_NORM, CUDA_ALLOCATED, TOKENS_PER_S, TFLOPS, MFU}  # no `line 42` from a frame
    assert 0 < run.meta["confidence"] < 1


def test_a_resume_keeps_both_passes_in_file_order(write) -> None:
    steps = [1, 2, 3, 4, 5, 3, 4, 5, 6]
    text = "".join(f"step {s:4d}/100 | train loss {5 - i / 10:.4f} | norm 1.0 | lr 1.00e-04 | 100.00 ms | "
                   f"1.0% A100 fp16 MFU | 1000 tok/s\n" + ("resuming from checkpoint at step 3\n" if i == 4 else "")
                   for i, s in enumerate(steps))
    (run,) = read_any(write("train.log", text))
    cols = run.columns
    assert [s for n, s in zip(cols.names, cols.steps) if n == LOSS] == steps
    assert run.meta["resumes"] == 1


def test_bracketed_timestamps_stamp_every_row(write) -> None:
    deepspeed = next(c for c in CASES if c.trainer == "DeepSpeed")
    (run,) = read_any(write("ds.log", deepspeed.text))
    times = {(p.name, p.step): p.time for p in run.points}
    assert times[(LR, 10)] == 1740139510.123 and times[(LR, 30)] == 1740139530.123  # 2025-02-21 12:05:SS,123 UTC
    assert times[(SAMPLES_PER_S, 30)] == 1740139530.456


def test_fast_path_reads_like_the_line_parser(write) -> None:
    text = "".join(_titan(s % 60, 3 - s / 1000, 1.0, 30.0, f"{15000 + s:,}", 90.0, "29.00%") + "\n"
                   for s in range(1, 200))
    path = write("titan.log", text)
    fast = ConsoleImporter().read(path)
    slow = ConsoleReader(str(path))  # every line through the full line parser
    for number, line in enumerate(strip_ansi(text.encode()).split(b"\n"), 1):
        slow.line(number, line)
    assert fast.columns == slow.result().columns and len(fast.columns.names) == 6 * 199


def test_shapes_read_alike_are_read_as_one_run(monkeypatch) -> None:
    # the HF Trainer's dicts: an LR written 1e-05 on one line and 0.00012 on the next changes the shape
    text = "".join(f"{{'loss': {2 + i % 7 / 10}, 'grad_norm': {0.5 + i % 3 / 10}, 'learning_rate': "
                   f"{(1e-05, 0.00012)[i % 3 == 0]}, 'epoch': {i / 100}}}\n" for i in range(1, 3000))
    merged: list[int] = []
    real = ConsoleReader._interleaved
    monkeypatch.setattr(ConsoleReader, "_interleaved",
                        lambda self, lines, a, b, *rest: (ok := real(self, lines, a, b, *rest)) and merged.append(b - a) or ok)
    fast = ConsoleReader("log")
    fast.feed(text.encode())
    slow = ConsoleReader("log")
    for number, line in enumerate(text.encode().split(b"\n"), 1):
        slow.line(number, line)
    got, want = fast.result().columns, slow.result().columns
    assert sum(merged) > 1000 and len(got.names) == 4 * 2999
    assert got == want and fast.result().warnings == slow.result().warnings


def test_an_exponent_does_not_change_the_shape() -> None:
    from stethoscope.logtext.console_runs import shape_of

    assert shape_of(b"{'learning_rate': 1.5e-05}") == shape_of(b"{'learning_rate': 0.00012}")
    assert shape_of(b"lr 3.1E+02 | pre-train | loss -0.5") == shape_of(b"lr 310.0 | pre-train | loss 0.5")
    assert shape_of(b"loss 2.5") != shape_of(b"loss 25")  # a point stays: a number of another kind
    assert shape_of(b"loss nan") != shape_of(b"loss 2.5")


@pytest.mark.parametrize("case", CASES + MADE_UP, ids=lambda c: c.trainer)
def test_long_runs_read_as_arrays_like_lists(case: Case, monkeypatch) -> None:
    import stethoscope.logtext.console_reader as reader

    data = (case.text * 300).encode()  # runs of hundreds of lines of a shape: read as arrays
    coded = ConsoleReader("coded")
    coded.feed(data)
    monkeypatch.setattr(reader, "CODED_ROWS", 10**9)
    lists = ConsoleReader("lists")
    lists.feed(data)
    got, want = coded.result().columns, lists.result().columns
    assert (got.names, got.steps, got.times) == (want.names, want.steps, want.times)
    assert [v if v == v else "nan" for v in got.values] == [v if v == v else "nan" for v in want.values]


@pytest.mark.parametrize("case", CASES + MADE_UP, ids=lambda c: c.trainer)
def test_runs_of_a_shape_read_like_single_lines(case: Case) -> None:
    data = (case.text * 3).encode()  # every shape recurs: its later lines take the token or regex path
    fast = ConsoleReader("fast")
    fast.feed(data)
    slow = ConsoleReader("slow")
    for number, line in enumerate(data.split(b"\n"), 1):
        slow.line(number, line)
    got, want = fast.result().columns, slow.result().columns
    assert (got.names, got.steps, got.times) == (want.names, want.steps, want.times)
    assert [v if v == v else "nan" for v in got.values] == [v if v == v else "nan" for v in want.values]


def test_zero_step_log_exits_2_naming_the_closest_shape(tmp_path, cli_env) -> None:
    log = tmp_path / "nohup.out"
    log.write_text("starting\n" + "".join(f"loss: {2 - i / 10:.2f} | lr: 0.001\n" for i in range(5)))
    out = run_cli("diagnose", str(log), env=cli_env)
    assert out.returncode == 2, out.stdout
    assert f"read 0 training steps from {log}" in out.stderr
    assert "metrics without a step counter" in out.stderr and "line 2" in out.stderr
    assert "no problems" not in out.stdout


def test_a_dedicated_reader_that_reads_nothing_hands_over(write) -> None:
    # textlog claims it (a `val loss` line) but reads no step from the A100 variant of llm.c
    text = CASES[9].text
    (run,) = read_any(write("train.log", text))
    assert run.format == "console" and series(run, LOSS)[1] == pytest.approx(4.9883)
    assert math.isclose(series(run, EVAL_LOSS)[2], 4.7012)


def test_orjson_columns_are_the_same_doubles_as_float() -> None:
    from stethoscope.logtext.console_tokens import _floats

    rng = random.Random(0)
    texts = [f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 12)}e}" for _ in range(5000)]
    texts += [f"{rng.random() * 10 ** rng.randint(-8, 8):.6f}" for _ in range(5000)]
    texts += ["-0.0", "0.0", "1e-310", "4.9e-324", "1.7976931348623157e308", "2.2250738585072014e-308"]
    got = _floats([t.encode() for t in texts], True)
    assert [repr(g) for g in got] == [repr(float(t)) for t in texts]
    assert _floats([b"07.5", b"+1.0"], True) == [7.5, 1.0]  # not JSON: float() reads them


def test_an_it_counter_with_a_total_is_a_step(write) -> None:
    """`it N/TOTAL` (a made-up trainer's shape): `it` counts steps only when a total follows."""
    lines = [f"it {s}/300 | loss {3.0 - s / 1000:.4f} | lr 3.00e-04 | grad_norm 0.500 | 41.5ms" for s in (10, 20, 30)]
    (run,) = read_any(write("train.log", "\n".join(lines + ["it works, but nothing to read here"]) + "\n"))
    assert series(run, LOSS) == {10: 2.99, 20: 2.98, 30: 2.97}
    assert series(run, STEP_TIME)[20] == pytest.approx(0.0415)


def test_cycles_of_record_lines_read_like_single_lines(monkeypatch) -> None:
    """Composer's blocks (a `[batch=N/T]:` header, then one metric per line) are read a shape at a time,
    merged back in line order; what breaks the cycle (a missing line, a warning, `nan`, a resume that sends the
    batch back) is read line by line, and the points are the same either way, in the same order."""
    def block(batch: int, loss: str = "") -> str:
        return (f"[epoch=1][batch={batch}/5000]:\n\t Train loss/train/total: {loss or f'{3 - batch / 1e4:.4f}'}\n"
                f"\t Train lr-DecoupledAdamW/group0: {1e-4 * (1 + batch % 5):.4e}\n"
                f"\t Train throughput/samples_per_sec: {1000 + batch % 13:.2f}\n")

    text = "".join(block(b) for b in range(1, 400))
    text += "".join(block(b) for b in range(400, 420)).replace(
        "\t Train lr-DecoupledAdamW/group0: 5.0000e-04\n", "", 1)  # a cycle missing a line
    text += "UserWarning: something odd\n" + block(420, "nan") + "".join(block(b) for b in range(421, 600))
    text += "".join(block(b) for b in range(300, 500))  # resumed from batch 300
    data = text.encode()
    cycles: list[int] = []
    real = ConsoleReader._interleaved
    monkeypatch.setattr(ConsoleReader, "_interleaved",
                        lambda self, lines, a, b, *rest: (ok := real(self, lines, a, b, *rest)) and cycles.append(b - a) or ok)
    fast = ConsoleReader("fast")
    fast.feed(data)
    slow = ConsoleReader("slow")
    for number, line in enumerate(data.split(b"\n"), 1):
        slow.line(number, line)
    got, want = fast.result(), slow.result()
    assert sum(cycles) > 3000  # most of the log was read a shape at a time
    assert (got.columns.names, got.columns.steps) == (want.columns.names, want.columns.steps)
    assert [v if v == v else "nan" for v in got.columns.values] == [v if v == v else "nan" for v in want.columns.values]
    assert got.warnings == want.warnings and got.meta == want.meta
    assert len(set(got.columns.steps)) == 599


def _fast_and_slow(data: bytes) -> tuple:
    """What `feed` reads from `data` and what the full line parser reads line by line."""
    fast = ConsoleReader("log")
    fast.feed(data)
    slow = ConsoleReader("log")
    for number, line in enumerate(data.split(b"\n"), 1):
        slow.line(number, line)
    out = []
    for reader in (fast, slow):
        run = reader.result()
        c = run.columns
        out.append((list(c.names), list(c.steps), [v if v == v else "nan" for v in c.values], list(c.times),
                    run.warnings, run.meta, sorted(reader.ranks)))  # which ranks (a block counts once)
    return out[0], out[1]


@pytest.mark.parametrize("case", CASES + MADE_UP, ids=lambda c: c.trainer)
def test_interleaved_shapes_read_like_single_lines(case: Case) -> None:
    """A trainer's lines repeated hundreds of times: its shapes interleave (step, eval, record lines), read
    a shape at a time and merged back in line order; the same points, warnings and meta as line by line."""
    got, want = _fast_and_slow((case.text * 200).encode())
    assert got == want


def test_a_keras_bar_over_epochs_reads_like_single_lines() -> None:
    """Keras redraws its bar: the bar's width changes the shape every few lines, the counter restarts each
    epoch (bar steps go on from the epoch before)."""
    lines = []
    for epoch in range(3):
        for n in range(1, 301):
            bar = "=" * (n * 30 // 300 - 1) + (">" if n < 300 else "=")
            tail = f"- ETA: {(300 - n) // 50}s" if n < 300 else "- 6s 20ms/step"
            lines.append(f"{n:3d}/300 [{bar:.<30}] {tail} - loss: {2 - epoch / 10 - n / 1e4:.4f} - accuracy: "
                         f"{0.5 + n / 1e3:.4f}")
        lines.append(f"Epoch {epoch + 2}/4")
    got, want = _fast_and_slow(("\n".join(lines) + "\n").encode())
    assert got == want and max(got[1]) == 900


def test_a_bar_s_fill_is_not_part_of_its_shape(monkeypatch) -> None:
    """Keras' bar at every width is one shape (`=`, `>` and `.` alike in a shape), so a bar of thousands of
    lines per epoch is learnt once per shape, not once per width, and read as runs; the same points."""
    from stethoscope.logtext.console_runs import shape_of

    assert shape_of(b"12/300 [=>............] - loss: 2.1") == shape_of(b"99/300 [======>.......] - loss: 1.95")
    assert shape_of(b"loss 2.5") != shape_of(b"loss 25")  # a point stays: a number of another kind
    lines = []
    for epoch in range(3):
        for n in range(1, 3001):
            bar = "=" * (n * 30 // 3000 - 1) + (">" if n < 3000 else "=")
            tail = f"- ETA: {(3000 - n) // 50}s" if n < 3000 else "- 60s 20ms/step"
            lines.append(f"{n:4d}/3000 [{bar:.<30}] {tail} - loss: {2 - epoch / 10 - n / 1e5:.4f}")
        lines.append(f"Epoch {epoch + 2}/4")
    parsed: list[int] = []
    real = ConsoleReader.line
    monkeypatch.setattr(ConsoleReader, "line", lambda self, number, raw: parsed.append(number) or real(self, number, raw))
    fast = ConsoleReader("log")
    fast.feed(("\n".join(lines) + "\n").encode())
    monkeypatch.setattr(ConsoleReader, "line", real)
    got, want = _fast_and_slow(("\n".join(lines) + "\n").encode())
    assert got == want and max(got[1]) == 9000
    # one bar line per shape learnt (4 counter widths, the epoch's last line), not one per width
    bar_lines = [n for n in parsed if n <= len(lines) and "/3000 [" in lines[n - 1]]
    assert len(bar_lines) == 5, bar_lines


def test_a_long_run_after_a_short_one_is_read_as_a_run(monkeypatch) -> None:
    """A window of shapes after a short run stops where a run long enough to be read in pieces starts:
    that run is read as one (on threads), not line by line in the window; the same points."""
    import stethoscope.logtext.console_reader as reader

    text = "".join(f"step {s} | loss {3 - s / 1e5:.4f}\n" + (f"step {s} | val loss {3 - s / 1e5:.4f}\n"
                                                              if s % 10 == 0 and s < 1000 else "")
                   for s in range(1, 12001))
    runs: list[int] = []
    real = reader.ConsoleReader._run
    monkeypatch.setattr(reader.ConsoleReader, "_run", lambda self, a, b, *rest: runs.append(b - a) or real(self, a, b, *rest))
    got, want = _fast_and_slow(text.encode())
    assert got == want and len(set(got[1])) == 12000
    assert max(runs) >= 11000, runs  # the steps after the last eval line: one run


@pytest.mark.parametrize("window", [1000, 1020, 1040], ids=["loss-first", "header-first", "lr-first"])
@pytest.mark.parametrize("stamped", [False, True], ids=["plain", "stamped"])
def test_lines_that_take_turns_are_read_as_rows_and_merged_without_a_sort(monkeypatch, stamped: bool,
                                                                           window: int) -> None:
    """Composer's header and record lines: the cycle is read as rows of its k lines (one pass of the scanner,
    `_turns`), each record line takes the step of the header earlier in its turn and the points are merged
    side by side (`_turns_taken`, `_periodic`); the same points as each shape read alone and merged by
    sorting. Groups that do not take turns are merged by sorting."""
    from stethoscope.logtext import console_segment

    stamp = "[2024-07-24 11:20:07,402] " if stamped else ""
    text = "".join(f"{stamp}[epoch=1][batch={b}/9000]:\n\t Train loss/train/total: {3 - b / 1e4:.4f}\n"
                   f"\t Train lr-DecoupledAdamW/group0: {1e-4 * (1 + b % 5):.4e}\n" for b in range(1, 3001))
    import stethoscope.logtext.console_walk as reader

    monkeypatch.setattr(reader, "MIN_WINDOW_BYTES", window)  # where the first window ends, the cycle starts
    used: list[str] = []
    turns, taken = console_segment._turns, console_segment._turns_taken
    monkeypatch.setattr(console_segment, "_turns", lambda *a: (r := turns(*a)) is not None and used.append("rows") or r)
    monkeypatch.setattr(console_segment, "_turns_taken",
                        lambda *a: (r := taken(*a)) is not None and used.append("turns") or r)
    fast = ConsoleReader("log")
    fast.feed(text.encode())
    monkeypatch.setattr(console_segment, "_turns", lambda *a: None)
    monkeypatch.setattr(console_segment, "_turns_taken", lambda *a: None)
    slow = ConsoleReader("log")
    slow.feed(text.encode())
    assert "turns" in used and ("rows" in used or not linescan.available())
    assert fast.result().columns == slow.result().columns and len(set(fast.result().columns.steps)) == 3000
    assert (fast.last_step, fast.step_lines, fast.lines) == (slow.last_step, slow.step_lines, slow.lines)
    assert taken([np.array(at) for at in ([0, 2, 4], [1, 5, 6])]) is None
    assert taken([np.array(at) for at in ([1, 4, 7], [0, 3, 6], [2, 5, 8])]) == [1, 0, 2]


def test_shapes_in_equal_numbers_that_do_not_take_turns_are_not_read_as_rows() -> None:
    """Step and eval lines of the same width in the order A B B A: as many of each, but not a cycle; read as
    rows of two lines, every other row's values would land on the other shape's names."""
    lines = []
    for s in range(1, 801, 2):
        lines += [f"step {s} | loss {3 - s / 1e4:.4f}", f"step {s} | val loss {4 - s / 1e4:.4f}",
                  f"step {s + 1} | val loss {4 - (s + 1) / 1e4:.4f}", f"step {s + 1} | loss {3 - (s + 1) / 1e4:.4f}"]
    got, want = _fast_and_slow(("\n".join(lines) + "\n").encode())
    assert got == want and len(set(got[1])) == 800


def test_two_ranks_interleaving_several_shapes_read_like_single_lines() -> None:
    """Two ranks print step lines and eval lines; rank 0's are kept, through the shape-at-a-time path."""
    lines = []
    for s in range(1, 400):
        for rank in (0, 1):
            lines.append(f"[rank{rank}]: step {s} | loss {3 - s / 1000 + rank / 100:.4f} | lr 3.0e-04")
            if s % 10 == 0:
                lines.append(f"[rank{rank}]: step {s} | val loss {3.1 - s / 1000:.4f}")
    got, want = _fast_and_slow(("\n".join(lines) + "\n").encode())
    assert got == want and got[6] and len(set(got[1])) == 399


def test_a_cycle_of_shapes_is_found_like_a_run(monkeypatch) -> None:
    """Composer's header and its three record lines, repeated: found as one cycle of four shapes (no window
    of shapes split line by line), read a shape at a time, the same points as line by line."""
    text = "".join(f"[epoch=1][batch={b}/9000]:\n\t Train loss/train/total: {3 - b / 1e4:.4f}\n"
                   f"\t Train lr-DecoupledAdamW/group0: {1e-4 * (1 + b % 5):.4e}\n"
                   f"\t Train throughput/samples_per_sec: {1000 + b % 13:.2f}\n" for b in range(1, 3001))
    import stethoscope.logtext.console_walk as reader

    monkeypatch.setattr(reader, "WINDOW_BYTES", 4096)  # the first shapes are learnt in a small window
    found: list[tuple[int, int]] = []
    real = reader.find_cycle
    monkeypatch.setattr(reader, "find_cycle", lambda *a: (c := real(*a)) and found.append((len(c[0]), c[1])) or c)
    got, want = _fast_and_slow(text.encode())
    assert got == want and len(set(got[1])) == 3000
    assert found and found[0][0] == 4 and sum(count for _, count in found) >= 2900


def test_repeats_counts_the_copies_of_a_shape_like_a_plain_loop() -> None:
    """`_repeats` (doubling then halving blocks, each checked by counting) against one compare per copy,
    on random texts: runs ending anywhere, at the end of the text, a unit that could match off its copies."""
    from stethoscope.logtext.console_runs import repeats as _repeats

    rng = random.Random(0)
    for _ in range(5000):
        unit = bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 4))) + b"\n"
        head = bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 3)))
        text = head + unit * rng.randint(0, 70) + bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 6)))
        want = 0
        while text.startswith(unit, len(head) + want * len(unit)):
            want += 1
        assert _repeats(text, len(head), unit) == want, (text, unit)


@pytest.mark.parametrize("line, expected", [
    ("step 3 loss nan lr 3e-4", {LOSS: math.nan, LR: 3e-4}),  # `nan lr`: not the key `loss nan lr`
    ("step 3 loss nan grad norm: 1.2", {LOSS: math.nan, GRAD_NORM: 1.2}),
    ("step 3 train loss nan garbage ]]]", {LOSS: math.nan}),
    ("step 3 loss -inf (skipped)", {LOSS: -math.inf}),
    ("step 3 | number of nan iterations: 1 | loss 2.2", {LOSS: 2.2, "number_of_nan_iterations": 1.0}),
])
def test_a_nan_that_words_follow_is_the_value_of_the_metric_before_it(write, line: str, expected: dict) -> None:
    """A NaN loss must never vanish into a key: `nan` followed by a word is a word of a key (Megatron's
    `number of nan iterations:`) only where the words before it name no metric."""
    run = ConsoleImporter().read(write("train.log", f"step 1 loss 2.5\nstep 2 loss 2.4\n{line}\nstep 4 loss 2.3\n"))
    got = {p.name: p.value for p in run.points if p.step == 3}
    assert got.keys() == expected.keys(), got
    for name, value in expected.items():
        assert (math.isnan(got[name]) and math.isnan(value)) or got[name] == value, (name, got)
