"""HF Trainer: faults through a `TrainerCallback`; the console as the Trainer prints it, and its trainer_state.json."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from common import Injector, Plan, captured, model, splits

SHOWS = {"console": {"lr", "eval"}, "file": {"lr", "eval"}}  # no step time: see common.labels
STEPS_PER_EPOCH, EPOCHS = 32, 8


class Net(torch.nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.body = model(hidden)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.body(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = torch.nn.functional.cross_entropy(logits, labels)
        return out


def total_steps(plan: Plan) -> int:
    return STEPS_PER_EPOCH * EPOCHS


def run(plan: Plan, out: Path) -> dict[str, Path]:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    inj = Injector(plan)
    overfit = plan.fault == "overfit"
    x, y, vx, vy = splits(plan, 32 * STEPS_PER_EPOCH)
    train = [{"x": a, "labels": b} for a, b in zip(x, y)]
    valid = [{"x": a, "labels": b} for a, b in zip(vx, vy)]

    class Faults(TrainerCallback):
        def on_step_begin(self, args, state, control, model=None, optimizer=None, lr_scheduler=None, **kw):
            inj.before_step(state.global_step + 1, list(model.parameters()), optimizer, lr_scheduler)

        def on_log(self, args, state, control, logs=None, **kw):
            if "eval_loss" in logs:
                plan.observed.setdefault("evals", []).append((state.global_step, logs["eval_loss"]))
            elif "loss" in logs:
                plan.observed.setdefault("losses", []).append((state.global_step, logs["loss"]))

    torch.manual_seed(plan.seed)
    work = out / "trainer"
    args = TrainingArguments(
        output_dir=str(work), per_device_train_batch_size=16 if overfit else 32, per_device_eval_batch_size=256,
        num_train_epochs=64 if overfit else EPOCHS, learning_rate=1e-3,
        logging_steps=4, eval_strategy="steps", eval_steps=8 if overfit else 32, save_strategy="no",
        report_to="none", use_cpu=True, seed=plan.seed, dataloader_num_workers=0)
    console = out / "console.log"
    with captured(console):
        trainer = Trainer(model=Net(256 if overfit else 64), args=args, train_dataset=train, eval_dataset=valid,
                          callbacks=[Faults()])
        trainer.train()
        trainer.save_state()
    state = out / "trainer_state.json"
    shutil.copy(work / "trainer_state.json", state)
    shutil.rmtree(work)
    return {"console": console, "file": state}
