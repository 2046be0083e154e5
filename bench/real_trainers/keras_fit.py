"""Keras 3 (torch backend): faults through a `keras.callbacks.Callback`; `fit`'s console (one line per epoch)
and its CSVLogger's file. The log's step is the epoch as Keras prints it (`Epoch 5/40`: 1-based)."""

from __future__ import annotations

from pathlib import Path

import torch
from common import Injector, Plan, captured, splits

SHOWS = {"console": {"eval", "time"}, "file": {"eval"}}
EPOCHS = 40




def _console_step(plan: Plan, kind: str, epoch: int) -> int:
    batches = 4 if plan.fault == "overfit" else 32  # 64 samples in 16s, 1024 in 32s
    return (epoch - 1) * batches + 1 if kind == "onset" else epoch * batches


# The console's step is the batch counted across epochs ("Epoch 5/40" then "12/32"); the CSV's the epoch from 0.
at = {"console": _console_step, "file": lambda plan, kind, n: n - 1}


def total_steps(plan: Plan) -> int:
    return EPOCHS


def run(plan: Plan, out: Path) -> dict[str, Path]:
    import keras

    inj = Injector(plan)
    overfit = plan.fault == "overfit"
    x, y, vx, vy = splits(plan, 1024)
    keras.utils.set_random_seed(plan.seed)
    hidden = 256 if overfit else 64
    net = keras.Sequential([keras.Input((16,)), keras.layers.Dense(hidden, activation="relu"),
                            keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(4)])
    opt = keras.optimizers.Adam(1e-3)
    net.compile(optimizer=opt, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def scale_lr(factor: float) -> None:
        opt.learning_rate.assign(float(opt.learning_rate) * factor)

    class Faults(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            inj.before_epoch(epoch + 1, [v.value for v in net.trainable_variables], scale_lr)

        def on_train_batch_begin(self, batch, logs=None):
            inj.before_batch(batch)

        def on_epoch_end(self, epoch, logs=None):
            plan.observed.setdefault("losses", []).append((epoch + 1, logs["loss"]))
            plan.observed.setdefault("evals", []).append((epoch + 1, logs["val_loss"]))

    console, csv = out / "console.log", out / "training.csv"
    with captured(console):
        net.fit(x.numpy(), y.numpy(), batch_size=16 if overfit else 32, epochs=64 if overfit else EPOCHS,
                validation_data=(vx.numpy(), vy.numpy()), callbacks=[Faults(), keras.callbacks.CSVLogger(str(csv))])
    return {"console": console, "file": csv}
