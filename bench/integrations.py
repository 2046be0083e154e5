"""What the HF Trainer and Lightning callbacks cost per step: the same tiny model trained with and
without `StethoscopeCallback`, interleaved rounds, median step time ratios.

    python bench/integrations.py [--rounds 5] [--steps 30]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

SEQ, BATCH, VOCAB = 64, 8, 256


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def hf_round(steps: int, monitored: bool, tmp: Path) -> float:
    import transformers

    from stethoscope.integrations.hf import StethoscopeCallback

    times: list[float] = []

    class Clock(transformers.TrainerCallback):
        def on_step_end(self, *_a, **_k):
            times.append(time.perf_counter())

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB,
                                                                 n_positions=SEQ))
    args = transformers.TrainingArguments(output_dir=str(tmp), max_steps=steps, per_device_train_batch_size=BATCH,
                                          logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
                                          disable_tqdm=True, dataloader_num_workers=0)
    callbacks = [Clock()] + ([StethoscopeCallback(str(tmp / f"run-{time.time_ns()}"))] if monitored else [])
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(steps * BATCH), callbacks=callbacks).train()
    return statistics.median(b - a for a, b in zip(times[5:], times[6:]))


def lightning_round(steps: int, monitored: bool, tmp: Path) -> float:
    import lightning.pytorch as L

    from stethoscope.integrations.lightning import StethoscopeCallback

    times: list[float] = []

    class Clock(L.Callback):
        def on_train_batch_end(self, *_a):
            times.append(time.perf_counter())

    class LM(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.mlp = torch.nn.Embedding(VOCAB, 128), torch.nn.Sequential(
                torch.nn.Linear(128, 512), torch.nn.GELU(), torch.nn.Linear(512, VOCAB))

        def training_step(self, batch, _i):
            x = batch["input_ids"]
            return torch.nn.functional.cross_entropy(self.mlp(self.emb(x)).flatten(0, 1), x.flatten())

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    torch.manual_seed(0)
    callbacks = [Clock()] + ([StethoscopeCallback(str(tmp / f"run-{time.time_ns()}"))] if monitored else [])
    L.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
              enable_checkpointing=False, default_root_dir=str(tmp), callbacks=callbacks,
              gradient_clip_val=1.0).fit(LM(), torch.utils.data.DataLoader(Tokens(steps * BATCH), batch_size=BATCH))
    return statistics.median(b - a for a, b in zip(times[5:], times[6:]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in (("HF Trainer, GPT-2 (2 layers, d=128)", hf_round), ("Lightning, embedding+MLP", lightning_round)):
            plain, ours = [], []
            for _ in range(args.rounds):
                order = [False, True]
                rng.shuffle(order)
                for monitored in order:
                    (ours if monitored else plain).append(run(args.steps, monitored, Path(tmp)))
            ratios = [o / p for o, p in zip(ours, plain)]
            print(f"{name}, batch {BATCH}x{SEQ}, cpu: median step {statistics.median(plain) * 1e3:.1f} ms without, "
                  f"{statistics.median(ours) * 1e3:.1f} ms with StethoscopeCallback; ratio {statistics.median(ratios):.3f} "
                  f"(rounds {min(ratios):.3f}–{max(ratios):.3f}, {args.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
