"""The classes the ninth held-out grammar (`bench/log_grammar.py` HELD, forms in `bench/log_grammar_ninth.py`;
scored once, now spent) showed, one test per class, each a small log in the real tool's shape: the series must
hold what the trainer printed, at its steps."""

from __future__ import annotations

import pytest

from stethoscope.detect.names import resolve
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def _loss(i: int) -> float:
    return round(3 - i / 1000, 4)


def test_ent_beside_cross_is_the_cross_entropy() -> None:
    """T5X's `cross_ent_loss` is the train loss (it was an unknown name: no train loss read)."""
    assert resolve("cross_ent_loss").name == LOSS
    assert resolve("val_cross_ent_loss").name == EVAL_LOSS
    assert resolve("ent_loss").name == "ent_loss"  # `ent` alone is no entropy (an entity's loss)
    text = "".join(f"[{s}]\tcross_ent_loss:{_loss(s)}\tTime:0.403 (0.350)\n" for s in range(0, 200, 10))
    assert series(read_text(text), LOSS) == pytest.approx({s: _loss(s) for s in range(0, 200, 10)})


def _litgpt(steps: range, accumulation: int, evals: str = "iter") -> tuple[str, dict[int, float], dict[int, float]]:
    """LitGPT's pretrain loop: `iter` counts micro-batches, `step` optimizer steps; an eval every third record."""
    lines, truth, evals_at = [], {}, {}
    for k, step in enumerate(steps):
        truth[step] = _loss(k)
        lines.append(f"Epoch 1 | iter {step * accumulation} step {step} | loss train: {_loss(k)}, val: n/a | "
                     f"iter time: 254.97 ms (step) remaining time: 0:15:18")
        if k % 3 == 2:
            evals_at[step] = _loss(k) + 1
            at = step * accumulation if evals == "iter" else step
            lines.append(f"{evals} {at}: val loss {_loss(k) + 1:.4f}, val time: 952.70 ms")
    return "\n".join(lines) + "\n", truth, evals_at


def test_an_iteration_counter_k_times_the_named_step_is_not_the_step() -> None:
    """`iter 400 step 100`, a record per optimizer step: the step is 100 (it was 400), and the eval's
    `iter 1200: val loss` is at step 300."""
    text, truth, evals = _litgpt(range(0, 2000, 100), accumulation=4)
    run = read_text(text)
    assert series(run, LOSS) == pytest.approx(truth)
    assert series(run, EVAL_LOSS) == pytest.approx(evals)
    assert "train/optimizer_step" not in {p.name for p in run.points}


def test_an_eval_that_names_the_optimizer_step_stays() -> None:
    """`step 300: val loss ..` names the optimizer step already: records move to their step, it stays."""
    text, truth, evals = _litgpt(range(0, 2000, 100), accumulation=4, evals="step")
    run = read_text(text)
    assert series(run, LOSS) == pytest.approx(truth)
    assert series(run, EVAL_LOSS) == pytest.approx(evals)


def test_a_named_step_that_repeats_leaves_the_iteration_the_step() -> None:
    """lit-gpt's adapter scripts print every micro-batch (`iter 1 step 0`, `iter 7 step 1`): each iteration is a
    record, the iteration stays the step."""
    text = "".join(f"iter {i} step {(i + 1) // 7}: loss {_loss(i)}, iter time: 1806.42ms\n" for i in range(30))
    assert series(read_text(text), LOSS) == pytest.approx({i: _loss(i) for i in range(30)})


def test_an_eval_line_a_dedicated_reader_knows_does_not_hide_the_records() -> None:
    """LitGPT's `iter 2000: val loss ..` among another trainer's records: the dedicated reader read the eval alone
    (no train loss); the general reader reads the records and the eval."""
    lines, truth = [], {}
    for k in range(12):
        step = 1000 * k
        truth[step] = _loss(k)
        lines.append(f"INFO:tensorflow:{step}iter:; nll-loss {_loss(k)} ({_loss(k) + 0.03}); samples/sec 164.17")
        if k % 4 == 3:
            lines.append(f"INFO:tensorflow:iter {step}: val loss {_loss(k) + 1:.4f}, val time: 1086.00 ms")
    run = read_text("\n".join(lines) + "\n")
    assert series(run, LOSS) == pytest.approx(truth)
    assert series(run, EVAL_LOSS) == pytest.approx({s: truth[s] + 1 for s in (3000, 7000, 11000)})


def _monai(n: int, per_epoch: int, every: int, prefix: str = "") -> tuple[str, dict[int, float]]:
    """MONAI's tutorial loop: `----------` / `epoch 2/5` at an epoch's start, then `12/154, train_loss: 0.61` (the
    batch within the epoch only), and the epoch's mean after it (not a record)."""
    lines, truth = [], {}
    for k in range(n):
        step = every * k
        epoch, batch = 1 + step // per_epoch, step % per_epoch
        if k == 0 or (step - every) // per_epoch != step // per_epoch:
            if k:
                lines.append(f"{prefix}epoch {epoch - 1} average loss: {_loss(k) + 0.5:.4f}")
            lines += [f"{prefix}----------", f"{prefix}epoch {epoch}/{n * every // per_epoch + 1}"]
        truth[step] = _loss(k)
        lines.append(f"{prefix}{batch}/{per_epoch}, train_loss: {_loss(k):.4f}")
    return "\n".join(lines) + "\n", truth


@pytest.mark.parametrize(("per_epoch", "every"), [(45, 4), (45, 12), (31, 100)])
@pytest.mark.parametrize("prefix", ["", "2024-07-24 11:20:33,123 - INFO - "])
def test_a_batch_count_under_an_epoch_head_counts_within_the_epoch(per_epoch: int, every: int, prefix: str) -> None:
    """`12/45, train_loss: ..` under `epoch 3/10` is step 2 * 45 + 12 (it was read as no step at all, and the
    epoch's mean as the epoch's record); also when the records skip epochs (a record every 100 batches)."""
    text, truth = _monai(60, per_epoch, every, prefix)
    assert series(read_text(text), LOSS) == pytest.approx(truth)


def test_a_batch_count_without_an_epoch_head_is_the_step() -> None:
    """Without an `epoch N/M` line before them, `N/T, key: value` lines count on as they are."""
    text = "".join(f"{s}/1000, train_loss: {_loss(s):.4f}\n" for s in range(0, 400, 20))
    assert series(read_text(text), LOSS) == pytest.approx({s: _loss(s) for s in range(0, 400, 20)})


def test_a_count_after_a_counter_word_is_that_counter() -> None:
    """`Epoch 3/35, Train Loss: ..` counts epochs (no batch count heading the metrics): the epoch stays a value."""
    text = "".join(f"2025-06-04 17:39:02,341 - INFO - Epoch {e}/35, Train Loss: {_loss(e)}, Test Acc: 59.86%\n"
                   for e in range(1, 20))
    run = read_text(text)
    assert series(run, LOSS) == pytest.approx({e: _loss(e) for e in range(1, 20)})
    assert series(run, "train/epoch") == {e: float(e) for e in range(1, 20)}


def test_an_application_program_command_is_an_escape_not_text() -> None:
    """Buildkite's raw log puts `ESC _bk;t=<epoch ms> BEL` (an APC string) before every line: an escape code, not
    a metric `t` (it was read as one, and the line's prefixes were not shed)."""
    lines = [f"\x1b_bk;t={1721820033000 + 1373 * k}\x07[Rank 0] INFO:tensorflow:Step {100 * (k + 1)} "
             f"per-step time 0.524s"
             f"\n\x1b_bk;t={1721820033500 + 1373 * k}\x07[Rank 0] INFO:tensorflow:{{'Loss/total_loss': {_loss(k)},"
             f"\n\x1b_bk;t={1721820033900 + 1373 * k}\x07[Rank 0]  'learning_rate': 0.032}}" for k in range(12)]
    run = read_text("\n".join(lines) + "\n")
    assert not any(p.name in ("t", "eval/t") for p in run.points)
    assert series(run, LOSS) == pytest.approx({100 * (k + 1): _loss(k) for k in range(12)})
