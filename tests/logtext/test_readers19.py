"""Which number on a line is the step and which the loss: classes of the thirteenth grammar part (readers-19),
each as a general rule, with lines as the trainers print them."""

from __future__ import annotations

import json

from stethoscope.records import LOSS
from tests.importers.series import read_bytes, read_text, series


def _cast(version: int = 2) -> str:
    """A training run recorded with `asciinema rec`: output events, some cutting a line in two."""
    head = ({"version": 2, "width": 120, "height": 32, "timestamp": 1795835045,
             "env": {"SHELL": "/bin/bash", "TERM": "xterm-256color"}} if version == 2 else
            {"version": 3, "term": {"cols": 120, "rows": 32, "type": "xterm-256color"}, "timestamp": 1795835045})
    events: list[list[object]] = [[0.41, "o", "$ python train.py\r\n"]]
    t = 0.5
    for k in range(1, 13):
        line = f"step {10 * k:5d} | loss {3.0 - k / 20:.4f} | lr 3.0e-04 | 500 tok/s\r\n"
        cut = 12 if k % 3 == 0 else len(line)
        events.append([round(t, 6), "o", line[:cut]])
        if cut < len(line):
            events.append([round(t + 0.0007, 6), "o", line[cut:]])
        t += 0.3
    events.insert(3, [0.9, "r", "100x30"])  # a resize event: no output
    return json.dumps(head) + "\n" + "".join(json.dumps(e) + "\n" for e in events)


def test_an_asciinema_cast_is_read_as_the_terminal_printed_it() -> None:
    """`asciinema rec` saves JSON lines `[t, "o", "text"]`, a line often cut over two events: it was refused."""
    for version in (2, 3):
        (run,) = read_bytes(_cast(version).encode(), "train.cast")
        assert series(run, LOSS) == {10 * k: round(3.0 - k / 20, 4) for k in range(1, 13)}


def _tflearn(header: bool = True) -> tuple[str, dict[int, float]]:
    """TFLearn's TermLogger: each record on two lines, the second's `iter` counting the epoch's samples."""
    text = ("---------------------------------\nRun id: SNAUPL\nLog directory: /tmp/tflearn_logs/\n"
            "---------------------------------\nTraining samples: 4992\nValidation samples: 1000\n") if header else ""
    want, step = {}, 0
    for epoch in range(1, 4):
        for batch in range(1, 5):
            step += 20
            loss = round(1.0 / step ** 0.3 + epoch / 1000, 5)
            want[step] = loss
            val = f" | val_loss: {loss * 0.9:.5f} - val_acc: 0.9100" if batch == 4 else ""
            text += (f"--\nTraining Step: {step}  | total loss: {loss:.5f} | time: {batch * 5.6:.3f}s\n"
                     f"| Adam | epoch: {epoch:03d} | loss: {loss:.5f} - acc: 0.8{batch}00{val} -- iter: "
                     f"{str(1248 * batch).zfill(4)}/4992\n")
    return text, want


def test_tflearns_sample_counter_is_no_step() -> None:
    """`Training Step: 20 | total loss: ..` then `| Adam | epoch: 001 | loss: .. -- iter: 1248/4992`: the second line
    restates the record under a count of samples; it numbered the records twice (read as a run an epoch)."""
    for header in (True, False):
        text, want = _tflearn(header)
        run = read_text(text)
        assert series(run, LOSS) == want
        assert set(series(run, "eval/loss")) == {80, 160, 240}  # the epoch's last line: its validation


def test_a_second_counter_that_gives_the_same_step_is_kept() -> None:
    """A guard: a record printed twice under counters that agree is read as before (one step)."""
    text = "".join(f"step {k * 10}: loss {2 + 1 / k:.4f}\n[{k * 10}/500] loss: {2 + 1 / k:.4f} lr: 0.001\n"
                   for k in range(1, 11))
    run = read_text(text)
    assert series(run, LOSS) == {k * 10: round(2 + 1 / k, 4) for k in range(1, 11)}


_DYNAMO = ("torch._dynamo hit config.cache_size_limit (8)", "   function: 'forward' (/workspace/model.py:112)",
           "   last reason: 0/0: L['self']._modules['attn'].training == True",
           'To log all recompilation reasons, use TORCH_LOGS="recompiles".',
           "To diagnose recompilation issues, see https://pytorch.org/docs/main/torch.compiler_troubleshooting.html.")


def test_torch_compiles_recompile_warning_is_no_counter() -> None:
    """torch._dynamo's warning heads each line with its source as a path and the compile id `[0/8]` (frame 0's 8th
    recompile): `[0/8]` was read as step 0, and the glog header not as one when a wrapper's prefix came first."""
    for wrap in ("", "[2026-11-28, 03:04:01 UTC] {subprocess.py:93} INFO - "):
        text = ""
        for k in range(1, 13):
            text += f"{wrap}step {k * 10} | loss {3 - k / 10:.4f} | lr 3.0e-04\n"
            if k % 4 == 0:
                head = f"{wrap}W1128 03:04:{k:02d}.285084 4312 torch/_dynamo/convert_frame.py:844] [0/8] "
                text += "".join(head + msg + "\n" for msg in _DYNAMO)
        run = read_text(text)
        assert series(run, LOSS) == {k * 10: round(3 - k / 10, 4) for k in range(1, 13)}
        assert {p.step for p in run.points} == {k * 10 for k in range(1, 13)}  # no point at step 0


def test_a_glog_header_inside_a_line_ends_its_prefix() -> None:
    """An absl/glog line behind a wrapper's prefix (Airflow's task log) is read from after its header."""
    text = "".join(f"[2026-11-28, 03:04:01 UTC] {{subprocess.py:93}} INFO - I1128 03:04:{k:02d}.402113 123 "
                   f"train.py:80] step {k * 10} loss {3 - k / 10:.4f}\n" for k in range(1, 13))
    run = read_text(text)
    assert series(run, LOSS) == {k * 10: round(3 - k / 10, 4) for k in range(1, 13)}
    assert {p.name for p in run.points} == {LOSS}  # not `subprocess.py` = 93 nor `I1128` = 3


def _go_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\x1b", "\\x1b") + '"'


def test_a_supervisors_logfmt_lines_are_read_for_their_message() -> None:
    """A Go supervisor logs its child's lines with slog's TextHandler: `time=.. level=INFO msg="..\\t.." stream=stdout
    pid=4312`. The escapes (`\\t`, `\\"`) hid the loss (`loss:\\t2.94` was no `loss: 2.94`), and the labels were
    read as metrics."""
    lines = []
    for k in range(1, 13):
        lines.append(f'[0]<stdout>:07/24/2024 11:50:{k:02d} [main] INFO  ai.trainer.Train - iters={k * 40}, '
                     f'avr_loss:\t{3 - k / 10:.4f}, note: "ok"')
        if k % 4 == 0:
            lines.append("saving checkpoint to out")  # needs no quoting: printed bare by slog
    text = "".join(f"time=2026-11-28T03:04:{k:02d}.{k * 37 % 1000:03d}Z level=INFO msg="
                   f"{_go_quote(ln) if ' ' in ln else ln} stream=stdout pid=4312\n" for k, ln in enumerate(lines))
    run = read_text(text)
    assert series(run, LOSS) == {k * 40: round(3 - k / 10, 4) for k in range(1, 13)}
    assert "pid" not in {p.name for p in run.points}


def test_a_programs_own_logfmt_metrics_are_kept() -> None:
    """A guard: a program that logs its metrics as slog attributes (`msg=train step=10 loss=2.3`) keeps them."""
    text = "".join(f"time=2026-11-28T03:04:{k:02d}.000Z level=INFO msg=train step={k * 10} loss={3 - k / 10:.4f}\n"
                   for k in range(1, 13))
    run = read_text(text)
    assert series(run, LOSS) == {k * 10: round(3 - k / 10, 4) for k in range(1, 13)}


def test_fluent_bits_stdout_records_are_read_for_their_log() -> None:
    """fluent-bit's stdout output prints each record as `[0] tail.0: [[ts, {}], {"log"=>"..", "stream"=>"stdout"}]`
    (before v2.1 `[ts, {..}]`), quotes escaped and control bytes as `\\xNN`."""
    for v21 in (True, False):
        text = ""
        for k in range(1, 13):
            stamp = f"{1795834000 + k}.{k * 7919:09d}"
            line = f'step {k * 10} | \\x1b[32mloss\\x1b[0m {3 - k / 10:.4f} | tag \\"a\\"'
            head = f"[[{stamp}, {{}}]" if v21 else f"[{stamp}"
            text += f'[{k % 5}] tail.0: {head}, {{"log"=>"{line}", "stream"=>"stdout"}}]\n'
        run = read_text(text)
        assert series(run, LOSS) == {k * 10: round(3 - k / 10, 4) for k in range(1, 13)}


def test_two_records_of_one_shape_that_print_the_same_loss_are_both_kept() -> None:
    """A guard: records in a row of one counter may print the same loss by chance (3 digits); neither restates the
    other, and the counter's later lines keep their steps."""
    losses = [4.651, 4.651, 3.21, 4.2, 3.9, 3.9, 3.7, 3.5, 3.3, 3.1, 2.9, 2.8]
    text = "".join(f"Epoch: [{k // 4}] [{k % 4 * 40:3d}/160] loss: {v:.3f} time: 0.446\n" for k, v in enumerate(losses))
    run = read_text(text)
    assert list(series(run, LOSS).values()) == losses


def test_ms_swifts_dict_takes_its_step_from_global_step_of_max_steps() -> None:
    """ms-swift logs `{'loss': .., 'epoch': 0.05, 'global_step/max_steps': '13/866', ..}`: the step was the dict's
    place in the file (1, 2, 3 for 1, 13, 25)."""
    text = ""
    for k, step in enumerate(range(1, 866, 12)):
        text += (f"{{'loss': {1.9 - k / 100:.8f}, 'grad_norm': 7.76447484, 'learning_rate': 9.988e-06, 'token_acc': "
                 f"0.82192909, 'epoch': {step / 290:.2f}, 'global_step/max_steps': '{step}/866', 'percentage': "
                 f"'{100 * step / 866:.2f}%', 'elapsed_time': '{step // 3}s', 'remaining_time': '5m 2s', "
                 f"'memory(GiB)': 5.14, 'train_speed(iter/s)': 4.853571}}\n")
        if k % 10 == 9:
            text += (f"{{'eval_loss': {2.1 - k / 100:.8f}, 'eval_token_acc': 0.61, 'eval_runtime': 1.2345, "
                     f"'eval_samples_per_second': 40.5, 'eval_steps_per_second': 5.06, 'epoch': {step / 290:.2f}, "
                     f"'global_step/max_steps': '{step}/866'}}\n")
    run = read_text(text)
    assert series(run, LOSS) == {step: round(1.9 - k / 100, 8) for k, step in enumerate(range(1, 866, 12))}
    assert set(series(run, "eval/loss")) == {step for k, step in enumerate(range(1, 866, 12)) if k % 10 == 9}


def test_skorchs_table_whose_rule_wears_another_prefix() -> None:
    """skorch's PrintLog header and rows behind a logger's prefix, its rule of dashes printed as the header's
    continuation with only the launcher's tag: the table was not found (no row under the header's columns)."""
    pre = "2024-07-24 11:20:33 gpu-node1 __main__[12345] INFO "
    text = (f"11:00:03 trainer.1 | {pre}  epoch    train_loss    valid_acc    valid_loss     dur\n"
            "11:00:03 trainer.1 | -------  ------------  -----------  ------------  ------\n")
    for epoch in range(1, 11):
        train = f"{1.2 - epoch / 20:.4f}"
        cell = f"\x1b[36m{train}\x1b[0m" if epoch % 3 else train  # a best value so far: coloured
        text += (f"11:00:{epoch:02d} trainer.1 | {pre}{epoch:>7}        {cell}       0.{70 + epoch}00        "
                 f"{1.3 - epoch / 25:.4f}  0.1363\n")
    run = read_text(text)
    assert series(run, LOSS) == {e: round(1.2 - e / 20, 4) for e in range(1, 11)}


def test_gradient_boostings_table_of_names_of_two_words() -> None:
    """scikit-learn's gradient boosting (verbose=1) prints `      Iter       Train Loss   Remaining Time` and its rows
    right-aligned under the names' ends: a header of names of two words was no header (no train loss read)."""
    for pre in ("", "2024-07-24 11:20:33,123 - INFO - "):
        for oob in (False, True):
            head = f"{'Iter':>10} {'Train Loss':>16} " + (f"{'OOB Improve':>16} " if oob else "") + \
                f"{'Remaining Time':>16} "
            text = pre + head + "\n"
            steps = [*range(1, 11), *range(20, 101, 10)]
            for k in steps:
                text += pre + f"{k:>10d} {1.5 - k / 100:>16.4f} " + (f"{0.01:>16.4f} " if oob else "") + \
                    f"{(100 - k) / 100:>15.2f}s\n"
            run = read_text(text)
            assert series(run, LOSS) == {k: round(1.5 - k / 100, 4) for k in steps}


def test_tinygrads_count_before_values_named_after_them_is_the_step() -> None:
    """tinygrad's examples print `100  221.74 ms run,  2.22 ms python,  219.52 ms CUDA,  2.31 loss, 0.000807 LR, ..`:
    every value before its name, so the count heading the line names nothing: the step (0 steps were read)."""
    for pre in ("", "2024-07-24 11:20:33,123 - INFO - ", "[INFO|DP=0|PP=0|TP=0|nid001]: "):
        text = "".join(f"{pre}{k:3d}  {220 + k / 10:7.2f} ms run, {2.2:7.2f} ms python, {218 + k / 10:7.2f} ms CUDA, "
                       f"{3 - k / 100:7.2f} loss, {0.0008:.6f} LR, 4.66 GB used, {3042.49:9.2f} GFLOPS\n"
                       for k in range(0, 120, 10))
        run = read_text(text)
        assert series(run, LOSS) == {k: round(3 - k / 100, 2) for k in range(0, 120, 10)}


def test_a_logcat_pid_before_a_value_is_no_step() -> None:
    """A guard: logcat's `pid  tid` (whole numbers) before a line's text is no count heading its values."""
    text = "".join(f"11-28 03:50:{k:02d}.000  4312  4377 I python  : step {k * 10} | 2.{k:02d}1 loss\n"
                   for k in range(1, 13))
    run = read_text(text)
    assert set(series(run, LOSS)) == {k * 10 for k in range(1, 13)}
