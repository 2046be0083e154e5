"""Lightning: faults through a `Callback`; the console (its tqdm progress bar: the Rich bar, Lightning's default
when rich is installed, prints only its last state into a file) and the CSVLogger's metrics.csv."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from common import Injector, Plan, captured, model, splits

SHOWS = {"console": {"eval"}, "file": {"lr", "eval"}}  # a bar's rate is no step time: see common.labels
FIRST = 0  # Lightning numbers the first step 0
STEPS_PER_EPOCH, EPOCHS = 32, 8
# The CSV numbers a step by Lightning's global_step (from 0), the bar by the batches done (from 1).
at = {"console": lambda plan, kind, n: n + 1}


def total_steps(plan: Plan) -> int:
    return STEPS_PER_EPOCH * EPOCHS


def run(plan: Plan, out: Path) -> dict[str, Path]:
    import lightning as L
    from lightning.pytorch.callbacks import LearningRateMonitor, TQDMProgressBar
    from lightning.pytorch.loggers import CSVLogger

    inj = Injector(plan)
    overfit = plan.fault == "overfit"
    x, y, vx, vy = splits(plan, 32 * STEPS_PER_EPOCH)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16 if overfit else 32, shuffle=True)
    valid = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(vx, vy), batch_size=256)

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model(256 if overfit else 64)

        def training_step(self, batch, idx):
            loss = torch.nn.functional.cross_entropy(self.net(batch[0]), batch[1])
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch, idx):
            self.log("val_loss", torch.nn.functional.cross_entropy(self.net(batch[0]), batch[1]), prog_bar=True)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    class Faults(L.Callback):
        def on_train_batch_start(self, trainer, module, batch, idx):
            inj.before_step(trainer.global_step, list(module.parameters()), trainer.optimizers[0])

        def on_train_batch_end(self, trainer, module, outputs, batch, idx):
            if (trainer.global_step) % 4 == 0:  # the step the logger writes this loss under is global_step - 1
                plan.observed.setdefault("losses", []).append((trainer.global_step - 1, float(outputs["loss"])))

        def on_validation_end(self, trainer, module):
            if not trainer.sanity_checking and "val_loss" in trainer.callback_metrics:
                plan.observed.setdefault("evals", []).append(
                    (trainer.global_step - 1, float(trainer.callback_metrics["val_loss"])))

    torch.manual_seed(plan.seed)
    console = out / "console.log"
    with captured(console):
        trainer = L.Trainer(max_epochs=64 if overfit else EPOCHS, log_every_n_steps=4, accelerator="cpu", devices=1,
                            logger=CSVLogger(str(out), name="csv"), enable_checkpointing=False,
                            callbacks=[Faults(), LearningRateMonitor("step"), TQDMProgressBar(refresh_rate=4)], num_sanity_val_steps=0)
        trainer.fit(Module(), train, valid)
    metrics = out / "metrics.csv"
    shutil.move(out / "csv" / "version_0" / "metrics.csv", metrics)
    shutil.rmtree(out / "csv")
    return {"console": console, "file": metrics}
