"""Writes keras_history.json: the `History` of a real Keras 3 `model.fit` (torch backend, CPU), dumped the
way training scripts do it (`json.dump(history.history, f)`). A small MLP fits 96 noisy samples for 60
epochs with a validation split: it overfits (val_loss turns up while loss keeps falling).

    KERAS_BACKEND=torch python tests/assets/json_metrics/make_keras_history.py   # needs keras + torch
"""

import json
import os
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(128, 16)).astype("float32")
y = (x[:, :2].sum(axis=1, keepdims=True) + rng.normal(scale=1.0, size=(128, 1))).astype("float32")
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(256, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse", metrics=["mae"])
history = model.fit(x, y, validation_split=0.25, epochs=60, batch_size=16, verbose=0)
out = Path(__file__).with_name("keras_history.json")
out.write_text(json.dumps(history.history))
print(out, {k: [round(v[0], 3), round(min(v), 3), round(v[-1], 3)] for k, v in history.history.items()})
