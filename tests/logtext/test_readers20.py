"""Where runs split and how steps are counted (readers-20): an epoch crossed before the logging interval was seen,
an evaluation's global step among records counted within epochs, an epoch summary of another tool after records
numbered by their epoch heads, a step printed on a line of its own with its record on the line after."""

from __future__ import annotations

from stethoscope.importers.base import ImportedRun
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def _runs(text: str) -> list[ImportedRun]:
    import tempfile
    from pathlib import Path

    from stethoscope.importers import read_any

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "train.log"
        path.write_text(text)
        return read_any(path)


def test_an_epoch_crossed_before_the_logging_interval_is_known_counts_by_that_interval() -> None:
    """MindSpore's LossMonitor prints the step within the epoch and no epoch size. The log's first record is its
    epoch's only one, so the first epoch's end came before the interval (500) was seen: every later step was one
    interval less one short (1001 for 1500, 1501 for 2000)."""
    steps = range(1000, 5001, 500)
    per_epoch = 1319
    text = "".join(f"[INFO] epoch: {s // per_epoch + 1} step: {s % per_epoch}, loss is {2.3 - s / 1e4:.6f}\n"
                   for s in steps)
    assert series(read_text(text), LOSS) == {s: round(2.3 - s / 1e4, 6) for s in steps}


def test_an_epoch_crossed_after_the_interval_is_seen_is_as_before() -> None:
    """Guard: two records in the first epoch teach the interval; the crossing goes on by it, as it did."""
    steps = range(100, 1101, 100)
    text = "".join(f"epoch: {s // 450 + 1} step: {s % 450}, loss is {2.3 - s / 1e4:.6f}\n" for s in steps)
    assert sorted(series(read_text(text), LOSS)) == list(steps)


def test_an_evaluations_global_step_among_records_counted_within_epochs() -> None:
    """JoeyNMT's validation line names the run's step and an epoch numbered from 1, among records that count within
    epochs numbered from 0 (`Epoch: [1][ 27/773]`): its epoch moved the records' counter, which then read epoch 1's
    batches from 0 again; the run fell apart in two."""
    lines, evals = [], {}
    for step in range(0, 2400, 100):
        epoch, batch = divmod(step, 773)
        lines.append(f"2024-07-24 11:00:00 INFO Epoch: [{epoch}][{batch:3d}/773]  training_loss: {4 - step / 1e3:.4f}  "
                     f"data_time: 0.0203")
        if step % 400 == 300:
            evals[step] = round(3 - step / 1e4, 4)
            lines.append(f"2024-07-24 11:00:01 INFO Validation result (greedy) at epoch {1 + step // 773:3d}, step "
                         f"{step:8d}: bleu:  20.00, loss: {evals[step]:8.4f}, ppl: 107.6204, duration: 14.0000s")
    (run,) = _runs("\n".join(lines) + "\n")
    assert sorted(series(run, LOSS)) == list(range(0, 2400, 100))
    assert series(run, EVAL_LOSS) == evals


def test_an_epoch_summary_after_records_numbered_by_their_heads_is_no_step() -> None:
    """nnU-Net prints `Epoch 3` on a line of its own, then the epoch's values a line each. A line that names an epoch
    beside a loss after those records (CNTK's `Finished Epoch[1 of 100]`, another tool's, always epoch 1) was read as
    a record of epoch 1 each time, and the log fell apart into runs."""
    lines = []
    for epoch in range(12):
        lines += [f"2024-07-24 11:{epoch:02d}:07.000001: Epoch {epoch}",
                  f"2024-07-24 11:{epoch:02d}:14.000002: Current learning rate: 0.0099",
                  f"2024-07-24 11:{epoch:02d}:21.000003: train_loss {-0.5 - epoch / 100:.4f}",
                  f"2024-07-24 11:{epoch:02d}:28.000004: val_loss {-0.6 - epoch / 100:.4f}",
                  f"2024-07-24 11:{epoch:02d}:42.000006: Epoch time: 131.51 s"]
        if epoch % 3 == 2:
            lines.append("Finished Epoch[1 of 100]: [Training] loss = 2.180000 * 50000, metric = 31.8% * 50000 "
                         "23.556s (2994.7 samples per second);")
    (run,) = _runs("\n".join(lines) + "\n")
    assert series(run, LOSS) == {e: round(-0.5 - e / 100, 4) for e in range(12)}
