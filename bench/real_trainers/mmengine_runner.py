"""mmengine: faults through a custom `Hook`; the Runner's console (its LoggerHook lines, iteration-based
loop) and the scalars.json its LocalVisBackend writes. Configured as mmengine's docs say for an
iteration-based loop (`log_metric_by_epoch=False`: else the evaluation is logged at epoch 0) and with a
metric prefix (mmengine warns without one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from common import Injector, Plan, captured, model, splits

SHOWS = {"console": {"lr", "eval", "time"}, "file": {"lr", "eval", "time"}}
STEPS = 256


def total_steps(plan: Plan) -> int:
    return STEPS


def run(plan: Plan, out: Path) -> dict[str, Path]:
    from mmengine.evaluator import BaseMetric
    from mmengine.hooks import Hook
    from mmengine.model import BaseModel
    from mmengine.runner import Runner

    inj = Injector(plan)
    overfit = plan.fault == "overfit"
    x, y, vx, vy = splits(plan, 1024)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16 if overfit else 32,
                                        shuffle=True, collate_fn=lambda b: torch.utils.data.default_collate(b))
    valid = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(vx, vy), batch_size=256,
                                        collate_fn=lambda b: torch.utils.data.default_collate(b))

    class Net(BaseModel):
        def __init__(self) -> None:
            super().__init__()
            self.body = model(256 if overfit else 64)

        def forward(self, inputs, labels, mode="tensor"):
            logits = self.body(inputs)
            if mode == "loss":
                return {"loss": torch.nn.functional.cross_entropy(logits, labels)}
            return [(logits, labels)]

    class EvalLoss(BaseMetric):
        default_prefix = "val"  # mmengine warns when a metric has none: its values are logged as val/<name>

        def process(self, data_batch, data_samples):
            for logits, labels in data_samples:
                self.results.append((float(torch.nn.functional.cross_entropy(logits, labels, reduction="sum")),
                                     len(labels)))

        def compute_metrics(self, results):
            return {"loss": sum(r[0] for r in results) / sum(r[1] for r in results)}

    class Faults(Hook):
        def before_train_iter(self, runner, batch_idx, data_batch=None):
            inj.before_step(runner.iter + 1, list(runner.model.parameters()), runner.optim_wrapper.optimizer)

        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            if (runner.iter + 1) % 4 == 0:
                plan.observed.setdefault("losses", []).append((runner.iter + 1, float(outputs["loss"])))

        def after_val_epoch(self, runner, metrics=None):
            plan.observed.setdefault("evals", []).append((runner.iter, metrics["val/loss"]))

    torch.manual_seed(plan.seed)
    work = out / "work"
    console = out / "console.log"
    with captured(console):
        runner = Runner(model=Net(), work_dir=str(work), train_dataloader=train, val_dataloader=valid,
                        val_evaluator=[EvalLoss()], optim_wrapper=dict(optimizer=dict(type="Adam", lr=1e-3)),
                        train_cfg=dict(by_epoch=False, max_iters=STEPS, val_interval=8 if overfit else 32),
                        val_cfg=dict(), default_hooks=dict(logger=dict(type="LoggerHook", interval=4, log_metric_by_epoch=False),
                                                           checkpoint=dict(type="CheckpointHook", interval=10**6)),
                        custom_hooks=[Faults()], randomness=dict(seed=plan.seed), log_processor=dict(by_epoch=False))
        runner.train()
    scalars = out / "scalars.json"
    shutil.move(next(work.glob("*/vis_data/scalars.json")), scalars)
    shutil.rmtree(work)
    return {"console": console, "file": scalars}
