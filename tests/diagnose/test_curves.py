from __future__ import annotations

import math
import random

import numpy as np

from stethoscope.diagnose.curves import CURVE_LABELS, classify_eval, classify_run, classify_train


def _noisy(f, n=2000, sd=0.02, seed=0):
    rng = random.Random(seed)
    steps = list(range(n))
    return steps, [f(s) * (1 + rng.gauss(0, sd)) for s in steps]


def test_labels_are_documented():
    assert {"healthy", "converged", "underfitting", "overfitting", "explosion", "divergence", "cliff",
            "spike_and_recover", "sawtooth", "plateau_high", "too_short"} == set(CURVE_LABELS)


def test_converged_and_underfitting():
    s, v = _noisy(lambda t: 2.0 + 8 * math.exp(-t / 150))
    assert classify_train(s, v).label == "converged"
    s, v = _noisy(lambda t: 2.0 + 8 * math.exp(-t / 3000))
    assert classify_train(s, v).label == "underfitting"


def test_explosion_and_nan_ending():
    s, v = _noisy(lambda t: 3.0 if t < 1800 else 3.0 * 1.05 ** (t - 1800))
    assert classify_train(s, v).label == "explosion"
    v2 = list(v[:1500]) + [float("nan")] * 500
    c = classify_train(s, v2)
    assert c.label == "explosion" and c.evidence["first_nonfinite_step"] == 1500


def test_divergence_vs_cliff():
    s, v = _noisy(lambda t: 3.0 + 5 * math.exp(-t / 100) + (0.002 * (t - 1000) if t > 1000 else 0))
    assert classify_train(s, v).label == "divergence"
    s, v = _noisy(lambda t: 3.0 + 5 * math.exp(-t / 100) + (2.0 if t > 1200 else 0))
    c = classify_train(s, v)
    assert c.label == "cliff" and abs(c.evidence["jump_step"] - 1200) <= 20


def test_spike_and_recover_and_sawtooth_and_plateau():
    s, v = _noisy(lambda t: 2.0 + 8 * math.exp(-t / 150))
    v[1200] *= 3
    assert classify_train(s, v).label == "spike_and_recover"
    s, v = _noisy(lambda t: 3.0 + 5 * math.exp(-t / 100) + (1.0 if (t // 25) % 2 else 0.0))
    assert classify_train(s, v).label == "sawtooth"
    s, v = _noisy(lambda t: 7.6, sd=0.01)
    c = classify_train(s, v, vocab_size=50258)
    assert c.label == "plateau_high" and "ln(vocab)" in c.detail


def test_overfitting_from_the_eval_curve_and_noise_is_not():
    train_s, train_v = _noisy(lambda t: 2.0 * math.exp(-t / 500), n=5000)
    ev_s = list(range(500, 5001, 500))
    ev_v = [0.8, 0.6, 0.55, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]
    c = classify_eval(ev_s, ev_v, train_s, train_v)
    assert c.label == "overfitting" and c.evidence["best_step"] == 1500
    rng = random.Random(1)
    noisy = [0.25 + rng.gauss(0, 0.015) for _ in ev_s]
    assert classify_eval(ev_s, noisy, train_s, train_v).label != "overfitting"
    run = classify_run(train_s, train_v, ev_s, ev_v)
    assert run["label"] == "overfitting" and run["train"]["label"] in CURVE_LABELS


def test_short_and_empty_curves_say_nothing():
    assert classify_train([1, 2, 3], [3.0, 7.0, 2.0]).label == "too_short"
    assert classify_train([], []).label == "too_short"
    assert classify_eval([1, 2], [1.0, 2.0]) is None


def test_a_million_points_are_classified():  # timing lives in bench/, never in tests
    s = np.arange(1_000_000)
    v = 2 + 8 * np.exp(-s / 50_000) + np.random.default_rng(0).normal(0, 0.02, s.size)
    c = classify_train(s, v)
    assert c.label in ("converged", "underfitting")
