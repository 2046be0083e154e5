"""skorch: faults through a `skorch.callbacks.Callback`; the epoch table skorch prints. The log's step is the
epoch as the table prints it (1-based)."""

from __future__ import annotations

from pathlib import Path

import torch
from common import Injector, Plan, captured, model, splits

SHOWS = {"console": {"eval", "time"}}
EPOCHS = 40


def total_steps(plan: Plan) -> int:
    return EPOCHS


def run(plan: Plan, out: Path) -> dict[str, Path]:
    from skorch import NeuralNet
    from skorch.callbacks import Callback
    from skorch.dataset import Dataset
    from skorch.helper import predefined_split

    inj = Injector(plan)
    overfit = plan.fault == "overfit"
    x, y, vx, vy = splits(plan, 1024)

    class Faults(Callback):
        def on_epoch_begin(self, net, **kw):
            inj.before_epoch(len(net.history), list(net.module_.parameters()), net.optimizer_)
            self.batch = 0

        def on_batch_begin(self, net, batch=None, training=False, **kw):
            if training:
                inj.before_batch(self.batch)
                self.batch += 1

        def on_epoch_end(self, net, **kw):
            row = net.history[-1]
            plan.observed.setdefault("losses", []).append((row["epoch"], row["train_loss"]))
            plan.observed.setdefault("evals", []).append((row["epoch"], row["valid_loss"]))

    torch.manual_seed(plan.seed)
    net = NeuralNet(model(256 if overfit else 64), criterion=torch.nn.CrossEntropyLoss, optimizer=torch.optim.Adam,
                    lr=1e-3, max_epochs=64 if overfit else EPOCHS, batch_size=16 if overfit else 32,
                    train_split=predefined_split(Dataset(vx, vy)), callbacks=[Faults()], iterator_train__shuffle=True)
    console = out / "console.log"
    with captured(console):
        net.fit(x, y)
    return {"console": console}
