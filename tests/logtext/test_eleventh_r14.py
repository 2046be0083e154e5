"""The eleventh grammar part's classes (readers-14), each as a rule: the HF Trainer's dicts are the records of its
bar, a JSON value holds a counter as a string, a captured output stream is unwrapped, a terminal pane's hard-wrapped
rows are joined again."""

from __future__ import annotations

import json

from stethoscope.logtext.wrapped import pane_width, rejoin
from stethoscope.records import LOSS, STEP_TIME
from tests.importers.series import read_text, series


def _bar(n: int, total: int, rate: float = 4.72) -> str:
    cells = ("█" * (10 * n // total)).ljust(10)
    return f"{100 * n // total:3d}%|{cells}| {n}/{total} [00:52<18:32, {rate:5.2f}it/s]"


def _hf(steps: range, total: int = 5500, prefix: str = "", first: int = 0) -> str:
    """The HF Trainer's console as Axolotl leaves it: the bar's redraws, cleared, then the logs dict."""
    out = []
    for k, step in enumerate(steps, first):
        bars = [_bar(n, total) for n in sorted({max(step - steps.step, 0), step - 1, step})]
        logs = {"loss": round(1.0 + k / 10, 4), "learning_rate": 5e-5 * (1 - step / total), "epoch": round(step / 1375, 2)}
        out.append(prefix + "\r" + "\r".join(bars) + "\r" + " " * 80 + "\r" + str(logs) + "\n")
    return "".join(out)


def test_the_bars_redraws_between_the_dicts_are_no_records() -> None:
    """Before: the rate of each redraw one short of the dict's count (249, 499, ..) was a step time at its own step."""
    run = read_text(_hf(range(250, 2001, 250), prefix="0|train    | 07/24 11:12:30 (Trainer pid=1234) "))
    assert sorted(series(run, LOSS)) == list(range(250, 2001, 250))
    assert series(run, LOSS)[500] == 1.1
    assert sorted(series(run, STEP_TIME)) == list(range(250, 2001, 250))  # at the dicts' counts only
    assert abs(series(run, STEP_TIME)[250] - 1 / 4.72) < 1e-9


def test_a_bars_numbers_coloured_keep_it_the_hf_bar() -> None:
    """Before: rich's colours on the bar's numbers hid it; the dicts were numbered 1, 2, 3 in file order."""
    text = _hf(range(1, 2050, 512), total=22530)
    coloured = "".join(c if not c.isdigit() else f"\x1b[1;36m{c}\x1b[0m" for c in text)
    run = read_text(coloured)
    assert sorted(series(run, LOSS)) == [1, 513, 1025, 1537, 2049]


def test_the_dicts_under_the_bar_keep_their_counts_beside_eval_lines() -> None:
    """Before: the general reader (one step more: the first dict numbered 1) put each dict at the step before it."""
    prefix = "[1,mpirank:0,algo-1]<stdout>:[2024-07-24 11:01:15] 2026-11-28T03:04:05.123Z\tINFO\ttrain/loop.go:88\t"
    text = "".join(f"{_hf(range(s, s + 1, 25), total=1950, prefix=prefix, first=s // 25)[:-1]}\r\n"
                   f"{prefix}[Eval] step {s} | loss {2.8 - s / 1000:.4f}\r\n" for s in range(25, 201, 25))
    loss = series(read_text(text), LOSS)
    assert sorted(loss) == list(range(25, 201, 25))
    assert loss[25] == 1.1 and loss[50] == 1.2


_PYCLS = ('[meters.py: 147]: json_stats: {{"_type": "train_iter", "epoch": "{e}/8", "eta": "1:52:49", "iter": "{i}/3166", '
          '"loss": {v:.5f}, "lr": 0.09951, "mem": 6079, "time_avg": 0.32146, "time_diff": 0.31516, "top1_err": 77.55568}}\n')


def test_a_json_stats_line_holds_its_counter_as_strings() -> None:
    """pycls: the iteration within the epoch (`"iter": "1000/3166"`) under its epoch (`"epoch": "2/8"`), both JSON
    strings. Before: the epoch's `1` was the step of every record."""
    steps = range(1000, 8001, 512)
    text = "".join(_PYCLS.format(e=(s - 1) // 3166 + 1, i=(s - 1) % 3166 + 1, v=6.0 - s / 4000) for s in steps)
    loss = series(read_text(text), LOSS)
    assert sorted(loss) == list(steps)
    assert loss[4072] == 6.0 - 4072 / 4000


def _kaggle(lines: list[str]) -> str:
    items = [json.dumps({"stream_name": "stdout", "time": round(5.873 + k * 1.371, 6), "data": line + "\n"},
                        separators=(",", ":")) for k, line in enumerate(lines)]
    return "[" + "\n,".join(items) + "\n]"


def test_a_kaggle_notebooks_json_log_is_read_as_the_lines_it_wraps() -> None:
    """Before: no train loss (the HF Trainer's bar and dicts inside the JSON strings, its `\\r`s escaped)."""
    run = read_text(_kaggle(_hf(range(50, 601, 50), total=3000).split("\n")[:-1]))  # the bar's `\r`s escaped
    assert sorted(series(run, LOSS)) == list(range(50, 601, 50))
    assert series(run, LOSS)[100] == 1.1


def test_a_json_list_of_records_is_no_stream() -> None:
    """A JSON list of metric records (no string that ends a line) is left to the readers as it is."""
    from stethoscope.importers.source import stream_field

    assert stream_field(b'[{"step": 10, "loss": 2.3, "note": "warm"}\n,{"step": 20, "loss": 2.1}]') is None
    assert stream_field(b'[{"stream_name":"stdout","time":5.873,"data":"step 1 loss 2\\n"}') == "data"
    assert stream_field(b'{"log":"step 1 loss 2\\n","stream":"stdout","time":"2024-07-24T11:00:00Z"}') == "log"


def _pane(lines: list[str], width: int) -> str:
    rows = ["alice@gpu-node-1:~/proj$ python train.py"]
    for line in lines:
        rows += [line[k:k + width] for k in range(0, len(line), width)] or [""]
    return "\n".join([*rows, "alice@gpu-node-1:~/proj$"]) + "\n"


def _records(n: int) -> list[str]:
    out = []
    for k in range(n):
        step = 1 + k * 97
        out.append(f"trainer.1.x5kqj9fz8l3m@gpu-node-1    | 24/07/24 11:{k % 60:02d}:04 [INFO train] epoch 1 "
                   f"iteration {step} | grad_norm {0.3 + k / 7:.{3 + k % 3}f} | loss {2.0 + k / 13:.{4 + k % 2}f}")
        if k % 3 == 2:
            out.append(f"trainer.1.x5kqj9fz8l3m@gpu-node-1    | 24/07/24 11:{k % 60:02d}:05 [INFO train] [valid] "
                       f"Ep. 1 : Up. {step} : cross-entropy : {3.0 - k / 50:.5f} : new best")
    return out


def test_a_panes_hard_wrapped_rows_are_joined_again() -> None:
    """tmux's capture-pane cut every line at the pane's 100 columns: the loss, and the eval's `[valid]` tag's
    values, on the next row. Before: the losses were lost and the eval's cross-entropy read as a train loss."""
    lines = _records(12)
    assert pane_width(_pane(lines, 100).split("\n")[:-1]) == 100
    assert rejoin(_pane(lines, 100).encode()).decode().split("\n")[1:-2] == lines
    run = read_text(_pane(lines, 100))
    loss = series(run, LOSS)
    assert sorted(loss) == [1 + k * 97 for k in range(12)]
    assert loss[98] == float(f"{2.0 + 1 / 13:.5f}")


def test_lines_of_one_fixed_width_are_no_pane() -> None:
    """timm's records are all one width (the longest lines): each starts as a line starts, so none is joined."""
    line = ("Train: 0 [{b:>4d}/86 ({p:>3d}%)]  Loss: {v:.2f} ({v:.2f})  Time: 0.227s,  562.78/s  (0.232s,  551.75/s)  "
            "LR: 1.000e-03  Data: 0.008 (0.008)")
    text = "\n".join(line.format(b=b, p=100 * b // 85, v=2.0 - b / 100) for b in range(1, 86, 15)) + "\n"
    assert pane_width(text.split("\n")[:-1]) is None
    assert rejoin(text.encode()) == text.encode()
    bars = "\n".join(["\r".join(f" {i}/40 [00:{i:02d}<00:40,  1.0{i % 10}s/it]" for i in range(21)), "x" * 20] * 4)
    assert pane_width(bars.split("\n")) is None  # a carriage return: no pane shows one


def _coqui(steps: range, loss: str = "loss_value") -> str:
    out = []
    for k, step in enumerate(steps):
        out.append(f"[0] 2024-07-24 11:50:00.000 INFO     root:train.py:88    --> TIME: 2024-07-24 11:50:00 -- STEP: "
                   f"{step % 1538}/1538 -- GLOBAL_STEP: {step}\n[0]      | > {loss}: {3.0 + k / 10}  (3.1)\n"
                   f"[0]      | > current_lr: 5e-06 \n[0]      | > step_time: 0.9890  (0.9988)\n")
        if k % 2:
            out.append(f"Finished Epoch[{k + 1} of 100]: [Training] loss = {1.4 + k / 100:.6f} * 50000, metric = 24.8% * "
                       "50000 19.667s (2879.2 samples per second);\n")
    return "".join(out)


def test_a_loss_named_loss_value_is_the_loss_and_an_epochs_summary_no_step() -> None:
    """Coqui's records print the loss on the lines after the step's (`| > loss_value: 3.45`); CNTK's
    `Finished Epoch[2 of 100]: [Training] loss = 1.48` between them is the epoch's summary. Before: `loss_value` was
    no loss, and the summaries were read as records at their epochs (2, 4, ..: steps the log never took)."""
    loss = series(read_text(_coqui(range(1000, 5001, 512))), LOSS)
    assert sorted(loss) == list(range(1000, 5001, 512))
    assert loss[1512] == 3.1
    loss = series(read_text(_coqui(range(1000, 5001, 512), loss="loss")), LOSS)  # the summaries, with `loss` too
    assert sorted(loss) == list(range(1000, 5001, 512))


def test_a_log_exported_as_csv_is_read_as_the_lines_it_holds() -> None:
    """CloudWatch Logs Insights' export (`@timestamp,@message`): each row's message a printed line, CSV-quoted. Before:
    pycls' JSON, its quotes doubled (`""iter"": ""20/5005""`), lost its counter."""
    import csv
    import io

    steps = range(24, 400, 24)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["@timestamp", "@message"])
    for k, s in enumerate(steps):
        writer.writerow([f"2026-11-28 03:04:{k % 60:02d}.{k * 37 % 1000:03d}",
                         _PYCLS.format(e=(s - 1) // 3166 + 1, i=(s - 1) % 3166 + 1, v=6.0 - s / 4000).rstrip("\n")])
    loss = series(read_text(buf.getvalue()), LOSS)
    assert sorted(loss) == list(steps)
    assert loss[48] == 6.0 - 48 / 4000


def test_a_loss_labelled_with_its_loop_is_the_loss() -> None:
    """`Loss(train): 3.110` is the training loop's loss; only a counter labelled so is a loop's head (mmengine's
    `Epoch(train) [5][20/21]`). Before: no train loss read."""
    text = "".join(f"0: 2024-07-24 11:{k:02d}:00.000 | trainer - WARNING - Epoch 1/99 Step {k * 40}/178 │ Loss(train): "
                   f"{3.0 + k / 10:.3f} (3.1421) │ step_time_s: 0.4576\n" for k in range(8))
    loss = series(read_text(text), LOSS)
    assert sorted(loss) == [k * 40 for k in range(8)]
    assert loss[80] == 3.2


def test_an_epochs_typed_stats_line_is_its_summary() -> None:
    """pycls' `"_type": "train_epoch"` line is the epoch's means between the records (here Keras' epoch lines).
    Before: read as records at its epoch (`"epoch": "1/100"`), the counter went back and one run became several."""
    out = []
    for e in range(1, 9):
        out.append(f"11:00:03 trainer.1 | [trainer] [info] Epoch {e}/100\n11:00:03 trainer.1 | 812/812 - 241s - loss: "
                   f"{0.6 + e / 100:.4f} - 241s/epoch - 297ms/step\n")
        out.append(f'[meters.py: 190]: json_stats: {{"_type": "train_epoch", "epoch": "{1 + e // 3}/100", "loss": '
                   f'{4 + e / 40:.5f}, "lr": 0.07100, "mem": 6058, "time_avg": 0.45800, "time_epoch": 2179.80000}}\n')
    from stethoscope.importers import read_any
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "train.log").write_text("".join(out))
        runs = read_any(Path(d) / "train.log")
    assert len(runs) == 1
    assert all(v < 1.0 for v in series(runs[0], LOSS).values())  # the epochs' records, none of the means


def test_an_epochs_summary_between_cross_entropy_records_is_no_record() -> None:
    """OpenNMT-style records name their loss `xent` (the cross-entropy: no `loss` key); CNTK's `Finished Epoch[2 of
    100]: [Training] loss = ..` between them is the epoch's summary. Before: read as records at epochs 2, 3, .."""
    out = []
    for k in range(12):
        out.append(f"24-07-2024 11:50:{k:02d} [NeMo I 2024-07-24 11:20:33 nemo_logging:349] global_step = {1000 + 7 * k}\t"
                   f"xent = {4.9 - k / 10:.6f}\ttokens_seen = 8200192\tseconds = 0.366\tsize = 640\n")
        if k % 4 == 3:
            out.append(f"Finished Epoch[{2 + k // 4} of 100]: [Training] loss = 1.480000 * 50000, metric = 24.8% * 50000 "
                       "19.667s (2879.2 samples per second);\n")
    run = read_text("".join(out))
    assert sorted({p.step for p in run.points}) == [1000 + 7 * k for k in range(12)]
