"""PyTorch-Ignite: faults through event handlers (`Events.ITERATION_STARTED`, `EPOCH_STARTED`); the console
as Ignite's examples log (the engine's logger from `setup_logger`, a loss line every few iterations and the
validation line per epoch, in the words of Ignite's README). Its time is per epoch only."""

from __future__ import annotations

from pathlib import Path

import torch
from common import Injector, Plan, captured, model, splits

SHOWS = {"console": {"eval"}}
STEPS_PER_EPOCH, EPOCHS = 32, 8


def total_steps(plan: Plan) -> int:
    return STEPS_PER_EPOCH * EPOCHS


def run(plan: Plan, out: Path) -> dict[str, Path]:
    from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
    from ignite.metrics import Loss
    from ignite.utils import setup_logger

    inj = Injector(plan)
    overfit = plan.fault == "overfit"
    x, y, vx, vy = splits(plan, 32 * STEPS_PER_EPOCH)
    train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16 if overfit else 32, shuffle=True)
    valid = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(vx, vy), batch_size=256)
    torch.manual_seed(plan.seed)
    net = model(256 if overfit else 64)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    console = out / "console.log"
    with captured(console):
        trainer = create_supervised_trainer(net, opt, loss_fn)
        trainer.logger = setup_logger("trainer")
        evaluator = create_supervised_evaluator(net, metrics={"loss": Loss(loss_fn)})
        evaluator.logger = setup_logger("evaluator")

        @trainer.on(Events.ITERATION_STARTED)
        def inject(engine):
            inj.before_step(engine.state.iteration, list(net.parameters()), opt)

        @trainer.on(Events.ITERATION_COMPLETED(every=4))
        def log_training_loss(engine):
            print(f"Epoch[{engine.state.epoch}] Iteration[{engine.state.iteration}] Loss: {engine.state.output:.4f}",
                  flush=True)
            plan.observed.setdefault("losses", []).append((engine.state.iteration, engine.state.output))

        @trainer.on(Events.EPOCH_COMPLETED)
        def log_validation_results(engine):
            evaluator.run(valid)
            avg = evaluator.state.metrics["loss"]
            print(f"Validation Results - Epoch[{engine.state.epoch}] Avg loss: {avg:.4f}", flush=True)
            plan.observed.setdefault("evals", []).append((engine.state.iteration, avg))

        trainer.run(train, max_epochs=64 if overfit else EPOCHS)
    return {"console": console}
