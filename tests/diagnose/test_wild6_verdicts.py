"""Whole-run verdicts that need the run's end or its other series (wild-logs-6): a spike the run learned on past
(`diagnose.recovered`), an eval whose task metrics never move (`diagnose.degenerate.stuck_evals`), a loss term that
blew up by orders of magnitude under a falling headline loss (`diagnose.components`). Logs composed in the shape of
the real ones, read through `stethoscope diagnose --json`."""

from __future__ import annotations

import json
import math
import random

from click.testing import CliRunner

from stethoscope.cli.main import cli


def _diagnose(path) -> list[dict]:
    result = CliRunner().invoke(cli, ["diagnose", str(path), "--json", "--min-severity", "info"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["findings"]


def _loud(found: list[dict]) -> list[tuple]:
    return [(f["type"], f["severity"], f["step"]) for f in found if f["severity"] != "info"]


# -- a spike the run learned on past --------------------------------------------------------------
def _epoch_csv(tmp_path, end_level: float):
    """A custom CSV of epoch means (150 epochs): the loss falls 0.69 -> 0.29 by epoch 94, sits at 0.41 (x1.4) for
    epochs 95-108, is back at 0.28 at 109 and ends at `end_level`."""
    rng = random.Random(0)
    rows = []
    for e in range(1, 151):
        if e <= 94:
            v = 0.29 + 0.40 * math.exp(-(e - 1) / 30) * (1 - (e - 1) / 94)
        elif e <= 108:
            v = 0.405 + 0.0015 * rng.gauss(0, 1)
        else:
            v = 0.28 + (end_level - 0.28) * (e - 109) / 41
        v *= 1 + 0.004 * rng.gauss(0, 1)
        rows.append(f"{e},{v:.6f},{0.5 + 0.35 * min(e, 94) / 94:.4f}")
    log = tmp_path / "progress.csv"
    log.write_text("epoch,loss,acc\n" + "\n".join(rows) + "\n")
    return log


def test_a_spike_the_run_learned_on_past_is_info(tmp_path):
    found = _diagnose(_epoch_csv(tmp_path, end_level=0.18))
    spikes = [f for f in found if f["type"] == "loss_spike" and 94 <= f["step"] <= 96]
    assert spikes, [(f["type"], f["step"]) for f in found]
    assert all(f["severity"] == "info" for f in spikes), [f["message"] for f in spikes]
    assert any("learned on past it" in f["message"] for f in spikes)
    assert not _loud(found), _loud(found)


def test_a_spike_the_run_never_got_below_again_keeps_its_warning(tmp_path):
    found = _diagnose(_epoch_csv(tmp_path, end_level=0.285))
    assert [t for t in _loud(found) if t[0] == "loss_spike"], [(f["type"], f["severity"], f["message"]) for f in found]


# -- an eval that never moves -----------------------------------------------------------------------
def _eval_csv(tmp_path, metric: list[float], second: list[float] | None = None):
    """Train loss falling every step; an eval every 10 steps with its loss and task metric(s)."""
    rows = []
    for s in range(1, 101):
        loss = 2.0 * math.exp(-s / 30) + 0.1
        cells = [str(s), f"{loss:.4f}", "", "", ""]
        if s % 10 == 0:
            k = s // 10 - 1
            cells[2] = f"{18.5 + 4 * k:.4f}"
            cells[3] = f"{metric[k]:.4f}"
            cells[4] = f"{(second or metric)[k]:.4f}"
        rows.append(",".join(cells))
    log = tmp_path / "metrics.csv"
    log.write_text("step,train_loss,val_loss,val_acc,val_f1\n" + "\n".join(rows) + "\n")
    return log


def test_an_accuracy_exactly_0_at_every_eval_while_the_loss_falls_is_a_broken_eval(tmp_path):
    found = _diagnose(_eval_csv(tmp_path, [0.0] * 10, [0.292] * 10))
    broken = [f for f in found if f["type"] == "eval_broken"]
    assert broken and broken[0]["severity"] == "warning", [(f["type"], f["severity"]) for f in found]
    assert "exactly 0 at every eval (10 evals" in broken[0]["message"] and "0.292 never moved" in broken[0]["message"]
    assert broken[0]["causes"] and broken[0]["fixes"]
    # its val loss rises from the first eval while the train loss falls: the broken eval, not overfitting
    assert not [f for f in found if f["type"] == "overfitting" and f["severity"] != "info"]
    result = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "metrics.csv"), "--json"])
    assert json.loads(result.output)["label"] != "overfitting"


def test_a_metric_that_moves_is_no_broken_eval(tmp_path):
    found = _diagnose(_eval_csv(tmp_path, [0.0, 0.0, 0.1, 0.2, 0.3, 0.35, 0.4, 0.42, 0.45, 0.46]))
    assert not [f for f in found if f["type"] == "eval_broken"]


def test_mmdet_map_exactly_0_at_every_eval(tmp_path):
    """An mmengine `vis_data/scalars.json` of one run: train rows every 50 iterations, `coco/bbox_mAP*` 0.0 at each
    of 7 evals while the loss falls 43 -> 6 (wild-logs-6 X1)."""
    lines = []
    for it in range(50, 3550, 50):
        loss = 6.0 + 37.0 * math.exp(-it / 600)
        lines.append(json.dumps({"lr": 0.0001, "data_time": 0.01, "loss": round(loss, 4), "loss_bbox": round(loss / 5, 4),
                                 "time": 0.3, "epoch": it // 500 + 1, "iter": it, "memory": 9000, "step": it}))
        if it % 500 == 0:
            lines.append(json.dumps({**{f"coco/bbox_mAP{k}": 0.0 for k in ("", "_50", "_75", "_s", "_m", "_l")},
                                     "data_time": 0.1, "time": 0.2, "step": it // 500}))
    log = tmp_path / "scalars.json"
    log.write_text("\n".join(lines) + "\n")
    found = _diagnose(log)
    broken = [f for f in found if f["type"] == "eval_broken"]
    assert broken and broken[0]["severity"] == "warning", [(f["type"], f["severity"], f["message"][:80]) for f in found]
    assert "coco/bbox_mAP" in broken[0]["message"]


# -- a loss term that blew up -----------------------------------------------------------------------
def _vae_log(tmp_path, kl: list[float]):
    """A VAE's console: loss (= the reconstruction term) falling, KL_loss as given, gen_loss beside them."""
    lines = []
    for i, k in enumerate(kl):
        step = 1920 + 5 * i
        loss = 2.4 + 6.0 * math.exp(-i / 400)
        lines.append(f"{step}/191900 (epoch {1 + i // 700}) loss: {loss:.3f}, gen_loss: {8.0 + 6.0 * i / len(kl):.3f}, "
                     f"KL_loss: {k:.3f}, ")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_an_auxiliary_loss_that_explodes_under_a_falling_loss_is_news(tmp_path):
    kl = [13.2 + 0.01 * i if i < 40 else 13.2 * 10 ** min(15.0, (i - 40) / 10) for i in range(2000)]
    found = _diagnose(_vae_log(tmp_path, kl))
    term = [f for f in found if f["type"] == "divergence" and "kl_loss" in f["message"].lower()]
    assert term and term[0]["severity"] == "warning", [(f["type"], f["severity"], f["message"][:90]) for f in found]
    assert "never came back" in term[0]["message"] and "gen_loss" in term[0]["message"]
    result = CliRunner().invoke(cli, ["diagnose", str(tmp_path / "train.log"), "--json"])
    assert "kl_loss diverged" in json.loads(result.output)["label"].lower()


def test_a_kl_warmed_up_from_nothing_is_no_explosion(tmp_path):
    kl = [1e-4 * 10 ** min(4.7, i / 100) for i in range(2000)]  # 1e-4 -> 5: KL annealing, negligible at the start
    found = _diagnose(_vae_log(tmp_path, kl))
    assert not [f for f in found if f["type"] == "divergence" and "kl_loss" in f["message"].lower()]


def test_a_train_metric_moving_beside_a_stuck_eval_is_still_a_broken_eval(tmp_path):
    """RF-ML's shape: the training line's accuracy (logged every epoch, named for no eval) climbs while the validation
    accuracy is 0.0000 at every epoch: the train metric says nothing about the eval."""
    rows = []
    for e in range(1, 16):
        loss = 1.2 * math.exp(-e / 2) + 0.002
        rows.append(f"{e},{loss:.4f},{1 - 0.2 * math.exp(-e / 2):.4f},{18.5 + 3 * e:.4f},0.0000")
    log = tmp_path / "metrics.csv"
    log.write_text("epoch,train_loss,mod_acc,val_loss,val_acc\n" + "\n".join(rows) + "\n")
    found = _diagnose(log)
    assert [f for f in found if f["type"] == "eval_broken" and f["severity"] == "warning"], \
        [(f["type"], f["severity"], f["message"][:80]) for f in found]


def test_an_eval_whose_loss_improved_is_no_broken_eval(tmp_path):
    """A 7-step fine-tune (HF log_history as a JSON list): exact-match accuracy 0 at every eval while the eval loss
    fell 5.78 -> 3.44 and rose to 4.94: the eval saw the model learn, then overfit; overfitting stays the warning."""
    history, evals = [], [5.78125, 3.734375, 3.4375, 3.578125, 4.25, 4.375, 4.5625, 4.9375]
    train = [6.0, 3.6406, 2.3281, 1.9453, 1.5625, 1.1328, 0.6953]
    for s, e in enumerate(evals):
        if s:
            history.append({"loss": train[s - 1], "grad_norm": 50.0, "learning_rate": 2e-4, "epoch": float(s), "step": s})
        history.append({"eval_loss": e, "eval_match_accuracy": 0.0, "eval_runtime": 0.8, "epoch": float(s), "step": s})
    log = tmp_path / "log_history.json"
    log.write_text(json.dumps(history))
    found = _diagnose(log)
    assert not [f for f in found if f["type"] == "eval_broken"]
    assert [f for f in found if f["type"] == "overfitting" and f["severity"] == "warning"], \
        [(f["type"], f["severity"], f["message"][:80]) for f in found]


def test_a_growing_amp_loss_scale_is_no_exploded_term(tmp_path):
    """GradScaler doubles the loss scale every 2,000 clean steps (65536 -> 1e9): named for the loss, no term of it."""
    rows = [f"{s},{2.0 * math.exp(-s / 4000) + 0.5:.4f},{65536.0 * 2 ** (s // 2000):.1f}" for s in range(0, 30000, 50)]
    log = tmp_path / "metrics.csv"
    log.write_text("step,train_loss,loss_scale\n" + "\n".join(rows) + "\n")
    found = _diagnose(log)
    assert not [f for f in found if f["type"] == "divergence"], [f["message"][:90] for f in found]
