"""The twelfth grammar part's classes (readers-16), each as a rule: nanoGPT's eval estimate line beside another
trainer's step records is the eval's, not the step's train record."""

from __future__ import annotations

from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def _records(steps: range) -> str:
    out = []
    for k, step in enumerate(steps):
        out.append(f"2024-07-24 11:{k:02d}:03.111 | 1|{step}|  xent = {3.0 - k / 10:.4f}  batch_time = 0.406  "
                   f"memory = 30.63GiB  samples/sec = 318.71\n")
        out.append(f"2024-07-24 11:{k:02d}:04.148 | step {step}: train loss {2.5 + k / 10:.4f}, "
                   f"val loss {2.7 + k / 10:.4f}\n")
    return "".join(out)


def test_the_eval_estimate_line_is_no_train_record() -> None:
    """Before: `step 31: train loss 4.2441, val loss ..` was the train loss at 31 (the xent records' lost)."""
    run = read_text(_records(range(1, 200, 30)))
    assert series(run, LOSS) == {s: round(3.0 - k / 10, 4) for k, s in enumerate(range(1, 200, 30))}
    assert series(run, "eval/train_loss")[31] == 2.6
    assert series(run, EVAL_LOSS)[31] == 2.8


def test_the_estimate_beside_records_that_name_the_loss() -> None:
    """Before: both the record's `loss` and the estimate's `train loss` were the train loss at 10."""
    text = "".join(f"Epoch 1 | Step {s} | loss: {3.0 - s / 100:.4f} | lr: 0.0003\n"
                   f"step {s}: train loss {2.0 + s / 100:.4f}, val loss 3.3000\n" for s in range(10, 60, 10))
    run = read_text(text)
    assert series(run, LOSS) == {s: round(3.0 - s / 100, 4) for s in range(10, 60, 10)}
    assert series(run, "eval/train_loss")[20] == 2.2


def test_estimates_alone_are_the_train_loss() -> None:
    """A guard: a log of `train loss .., val loss ..` lines alone keeps them the run's train loss."""
    text = "".join(f"step {s}: train loss {3.0 - s / 100:.4f}, val loss {3.2 - s / 100:.4f}\n" for s in range(0, 60, 10))
    run = read_text(text)
    assert series(run, LOSS)[20] == 2.8
    assert series(run, EVAL_LOSS)[20] == 3.0


def _lines(steps: range) -> list[str]:
    return [f"step {s} | loss {3.0 - s / 1000:.4f} | lr 3.0e-04" for s in steps]


def _blocks(steps: range) -> list[str]:
    """A record whose values come on the lines after its counter."""
    return [ln for s in steps for ln in (f"0|train    | 2024-07-24T11:00:03 INFO  train] [step={s}/739328]",
                                         f"0|train    |     LOSS={3.0 - s / 1000:.4f} (4.3066)",
                                         "0|train    |     data_time=0.006s")]


def test_journald_json_is_unwrapped() -> None:
    """Before: `journalctl -o json`'s records (MESSAGE without its newline) were read as nothing: 0 steps."""
    import json

    def record(k: int, line: str) -> str:
        message: object = line if k % 3 else list(("\x1b[32m" + line + "\x1b[0m").encode())  # control chars: bytes
        return json.dumps({"__CURSOR": f"s=8f;i={k:x}", "__REALTIME_TIMESTAMP": str(1795834800000000 + k),
                           "PRIORITY": "6", "_PID": "4312", "MESSAGE": message}, separators=(",", ":")) + "\n"
    run = read_text("".join(record(k, ln) for k, ln in enumerate(_lines(range(10, 200, 10)))))
    assert series(run, LOSS) == {s: round(3.0 - s / 1000, 4) for s in range(10, 200, 10)}


def test_gcloud_logging_json_is_unwrapped() -> None:
    """Before: the entries' textPayload / jsonPayload.message lines were not all read (the JSON was read raw)."""
    import json

    entries = [{"insertId": f"{k:012x}", "logName": "projects/p/logs/stdout", "resource": {"type": "k8s_container"},
                "severity": "INFO", **({"textPayload": ln} if k % 2 else {"jsonPayload": {"message": ln}}),
                "timestamp": f"2026-11-28T03:04:{k % 60:02d}.000Z"} for k, ln in enumerate(_blocks(range(10, 200, 10)))]
    run = read_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    assert series(run, LOSS) == {s: round(3.0 - s / 1000, 4) for s in range(10, 200, 10)}


def test_a_notebooks_stream_outputs_are_unwrapped() -> None:
    """Before: the notebook's JSON was read raw (each line a quoted list item)."""
    import json

    cell = {"cell_type": "code", "metadata": {}, "outputs": [
        {"name": "stdout", "output_type": "stream", "text": [ln + "\n" for ln in _blocks(range(10, 200, 10))]}],
        "source": ["!python train.py"]}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    run = read_text(json.dumps(nb, indent=1, sort_keys=True) + "\n")
    assert series(run, LOSS) == {s: round(3.0 - s / 1000, 4) for s in range(10, 200, 10)}


def test_a_record_beside_the_last_evals_loss_keeps_its_train_loss() -> None:
    """A guard: NeMo's record `.. global_step: 1024 | reduced_train_loss: 1.303 | train_step_timing in s: .. |
    val_loss: 1.494` is the step's record (its own values beside the last eval's), not an estimate."""
    text = "".join(f"Training epoch 0, iteration {s}/21503 | lr: 1.5e-07 | global_step: {s} | reduced_train_loss: "
                   f"{1.0 + s / 10000:.4f} | train_step_timing in s: 0.21524 | val_loss: 1.494\n"
                   f"step {s}: val loss 3.3604\n" for s in range(0, 5000, 512))
    assert series(read_text(text), LOSS) == {s: round(1.0 + s / 10000, 4) for s in range(0, 5000, 512)}
