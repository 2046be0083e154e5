"""Healthy runs in the shape of public GPT-2 speedrun logs (`step:N/T train_loss:X train_time:Tms step_avg:..`,
`step:N/T val_loss:X ..`): per-step train losses of single batches (noisy, with rare hard batches), several
seeds' runs appended to one file. Each test is a false alarm that the first check of real public logs found
(notes: public-logs); the lines are synthetic, in the same shape."""

from __future__ import annotations

import random
from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any

_ACT = ("warning", "error", "critical")


def _train(step: int, total: int, loss: float) -> str:
    return f"step:{step}/{total} train_loss:{loss:.4f} train_time:{step * 1703}ms step_avg:1703.57ms"


def _val(step: int, total: int, loss: float) -> str:
    return f"step:{step}/{total} val_loss:{loss:.4f} train_time:{step * 1703}ms step_avg:1703.57ms"


def _diagnose(tmp_path: Path, lines: list[str]):
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    (run,) = read_any(path)
    return diagnose_run(run)


def _alarms(d) -> list[str]:
    return [f"{f.type} {f.severity} {f.step}: {f.message}" for f in d.findings if f.severity in _ACT]


def _noisy_run(total: int, outliers: dict[int, float], seed: int = 0) -> list[str]:
    """A falling per-step train loss (sigma ~0.15 per batch, as a single batch's loss is) with evals every 125."""
    rng = random.Random(seed)
    lines = []
    for s in range(1, total + 1):
        level = 2.8 + 3.0 * 0.999 ** s
        lines.append(_train(s, total, outliers.get(s, level + rng.gauss(0, 0.15))))
        if s % 125 == 0 or s == total:
            lines.append(_val(s, total, level - 0.02))
    return lines


def test_a_hard_batch_after_a_low_batch_at_the_end_is_no_divergence(tmp_path):
    # a low batch (2.37), two ordinary ones, a hard batch (4.23), back at the level the next step: the
    # climb from the low batch is noise plus one jump, not a loss rising on consecutive records
    total = 3000
    out = {2975: 2.37, 2976: 2.93, 2977: 2.99, 2978: 4.23, 2979: 2.78}
    d = _diagnose(tmp_path, _noisy_run(total, out))
    assert d.last_step == total
    assert not [a for a in _alarms(d) if a.startswith("divergence")], _alarms(d)


def test_a_hard_batch_and_its_one_step_echo_are_no_page(tmp_path):
    # a hard batch (x1.35-1.5 the level) and the next step falling back (the update made from that batch), then
    # back at the level: the run undid it by itself in two steps; nobody needs to act
    total = 3000
    out = {1200: 5.0, 1201: 4.2, 2200: 4.60, 2201: 4.0}
    d = _diagnose(tmp_path, _noisy_run(total, out))
    spikes = [f for f in d.findings if f.type == "loss_spike" and f.step in (1200, 2200)]
    assert len(spikes) == 2, [f.message for f in d.findings]
    assert all(f.severity == "info" for f in spikes), [f.message for f in spikes]
    assert not _alarms(d), _alarms(d)


def test_a_spike_that_holds_for_two_steps_is_still_a_warning(tmp_path):
    # the rule above is about a decaying echo: a spike as high on its second step is not a hard batch
    total = 3000
    out = {1200: 5.0, 1201: 5.05}
    d = _diagnose(tmp_path, _noisy_run(total, out))
    spikes = [f for f in d.findings if f.type == "loss_spike" and f.step == 1200]
    assert spikes and spikes[0].severity == "warning", [f.message for f in d.findings]


def test_seeds_appended_to_one_file_are_compared_each_with_its_own_best(tmp_path):
    # 4 runs of 1000 steps from step 0, one after another in one file (a record's seeds): the last run's final
    # eval (3.2784) is its own best; an earlier seed's better final (3.2764) is no overfitting of this one
    finals = [3.2787, 3.2764, 3.2776, 3.2784]
    lines = []
    for final in finals:
        for s in range(0, 1001, 25):
            lines.append(_val(s, 1000, final + 7.55 * 0.99 ** s))
    d = _diagnose(tmp_path, lines)
    assert not [a for a in _alarms(d) if a.startswith("overfitting")], _alarms(d)


def test_overfitting_inside_one_seed_of_an_appended_file_is_still_found(tmp_path):
    # the fresh start per seed does not hide a run that overfits after its own best
    lines = [_val(s, 1000, 3.2787 + 7.55 * 0.99 ** s) for s in range(0, 1001, 25)]
    for s in range(0, 1001, 25):
        v = 3.30 + 7.5 * 0.99 ** s if s <= 500 else 3.30 + 7.5 * 0.99 ** 500 + 0.0004 * (s - 500)
        lines.append(_val(s, 1000, v))
        lines.append(_train(s, 1000, 3.2 - 0.0005 * s))
    d = _diagnose(tmp_path, lines)
    assert [a for a in _alarms(d) if a.startswith("overfitting")], [f.message for f in d.findings]


def test_a_spike_on_top_of_records_already_risen_is_still_a_warning(tmp_path):
    # two records already up (x1.1, above the noise, inside the spike bar) before the peak: a climb peaking (an LR jump's shape), not a hard batch out
    # of the blue, even though it fell back on its second record
    total = 3000
    out = {1198: 4.12, 1199: 4.15, 1200: 5.35, 1201: 4.8}
    d = _diagnose(tmp_path, _noisy_run(total, out))
    assert [a for a in _alarms(d) if a.startswith("loss_spike")], [f.message for f in d.findings]


def _val_s(step: int, total: int, loss: float) -> str:
    return f"step:{step}/{total} val_loss:{loss:.5f} train_time:{step * 0.195:.3f}s step_avg:195.46ms"


def test_evals_still_falling_by_their_last_digits_at_the_schedule_end_are_not_frozen(tmp_path):
    # evals every 2 steps at the end of an LR cooldown: 3.27750, 3.27748, 3.27746, 3.27744 move less than
    # 1e-5 of the loss, but each is printed lower than the one before: the model still learns, slowly
    total = 3000
    lines = [_val_s(s, total, 3.2775 + 1.2 * 0.998 ** s) for s in range(0, 2900, 100)]
    tail = [3.27790, 3.27783, 3.27776, 3.27770, 3.27764, 3.27759, 3.27754, 3.27750, 3.27748, 3.27746, 3.27744]
    lines += [_val_s(2980 + 2 * i, total, v) for i, v in enumerate(tail)]
    d = _diagnose(tmp_path, lines)
    assert not [a for a in _alarms(d) if a.startswith("frozen")], _alarms(d)


def test_evals_repeating_one_printed_value_are_still_frozen(tmp_path):
    # the rule above needs a printed fall: the same 6-digit value again and again is a model standing still
    total = 3000
    lines = [_val_s(s, total, 3.2775 + 1.2 * 0.999 ** s) for s in range(0, 2000, 100)]
    lines += [_val_s(s, total, 3.44123) for s in range(2000, 2600, 100)]
    d = _diagnose(tmp_path, lines)
    assert [a for a in _alarms(d) if a.startswith("frozen")], [f.message for f in d.findings]
