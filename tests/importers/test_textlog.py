from __future__ import annotations

import math
from pathlib import Path

import pytest

from stethoscope.importers.base import ImportedRun
from stethoscope.logtext.names import EPOCH
from stethoscope.importers.textlog import OPT_STEP, TextLogImporter
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LR, MFU, STEP_TIME, TOKENS_PER_S
from tests.importers.series import series


def read(write, text: str, name: str = "train.log") -> ImportedRun:
    return TextLogImporter().read(write(name, text))


def test_nanogpt(write) -> None:
    text = """2023-03-22 09:30:39 iter 0: loss 10.9, time 5000.00ms, mfu -100.00%
2023-03-22 09:30:50 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%
2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427
saving checkpoint to out
2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%
"""
    run = read(write, text)
    assert run.format == "textlog" and run.meta["dialect"] == "nanogpt"
    loss = series(run, LOSS)
    assert loss[0] == 10.9 and loss[2990] == 3.8853 and math.isnan(loss[3010])
    assert series(run, STEP_TIME)[2990] == pytest.approx(1.09665)
    assert series(run, MFU) == {2990: pytest.approx(0.1534), 3010: pytest.approx(0.1412)}  # -100% = not measured
    assert series(run, EVAL_LOSS) == {3000: 4.0427}
    assert series(run, "eval/train_loss") == {3000: 4.039}
    assert {p.time for p in run.points if p.step == 3010} == {1679477572.0}
    assert [(ln.line, ln.step) for ln in run.lines] == [(4, 3000)]


def test_litgpt_variants(write) -> None:
    text = """iter 6 step 0: loss 1.1289, iter time: 1897.51ms
iter 7 step 1: loss 1.1201, iter time: 1819.72ms (optimizer.step)
iter 8 step 1: loss nan, iter time: 1957.89ms
Epoch 1 | iter 16 step 2 | loss train: 1.234, val: n/a | iter time: 100.00 ms (step)
iter 16: val loss 1.9000, val time: 1234.00 ms
iter 400: loss 11.0666, time: 19090.34ms, speed: 214 toks/s/device
"""
    run = read(write, text)
    assert run.meta["dialect"] == "litgpt"
    loss = series(run, LOSS)
    assert loss[6] == 1.1289 and loss[7] == 1.1201 and math.isnan(loss[8]) and loss[16] == 1.234
    assert loss[400] == 11.0666
    assert series(run, OPT_STEP) == {6: 0.0, 7: 1.0, 8: 1.0, 16: 2.0}
    assert series(run, EPOCH) == {16: 1.0}
    assert series(run, EVAL_LOSS) == {16: 1.9}
    assert series(run, STEP_TIME)[16] == pytest.approx(0.1)
    assert series(run, "perf/tokens_per_s_per_device") == {400: 214.0}


def test_llmc_stdout_and_main_log(write) -> None:
    stdout = ("step    1/18865 | train loss 11.009302 | norm 15.3942 | lr 8.57e-07 | (80.05 ms | 6546 tok/s)\n"
              "step    2/18865 | loss 10.5 (+0.10z)| norm 9.5 (-0.20z)| lr 1.71e-06 | 79.00 ms | 45.5% bf16 MFU | "
              "6600 tok/s\nval loss 10.25\n")
    run = read(write, stdout)
    assert series(run, LOSS) == {1: 11.009302, 2: 10.5}
    assert series(run, GRAD_NORM) == {1: 15.3942, 2: 9.5}
    assert series(run, LR) == {1: 8.57e-07, 2: 1.71e-06}
    assert series(run, TOKENS_PER_S) == {1: 6546.0, 2: 6600.0}
    assert series(run, MFU) == {2: pytest.approx(0.455)}
    assert series(run, EVAL_LOSS) == {2: 10.25}
    main = read(write, "s:0 tel:11.0092\ns:0 trl:11.0091 lr:0.000001 norm:15.37\ns:1 trl:10.95\ns:1 eval:0.25\n",
                name="main.log")
    assert main.meta["dialect"] == "llmc"
    assert series(main, LOSS) == {0: 11.0091, 1: 10.95}
    assert series(main, EVAL_LOSS) == {0: 11.0092}
    assert series(main, LR) == {0: 1e-06}
    assert series(main, "eval/hellaswag_acc") == {1: 0.25}


def test_modded_nanogpt_nan_step_avg_is_not_a_value(write) -> None:
    text = """step:0/3200 val_loss:15.9936 train_time:227ms step_avg:nanms
step:1/3200 train_loss:15.9929 train_time:1368ms step_avg:nanms
step:2/3200 train_loss:9.8606 train_time:1429ms step_avg:nanms
step:11/3200 train_loss:8.5 train_time:2500ms step_avg:112.12ms
step:125/3200 val_loss:5.9598 train_time:15807ms step_avg:137.46ms
"""
    run = read(write, text)
    assert run.meta["dialect"] == "modded_nanogpt"
    assert not any(math.isnan(p.value) for p in run.points)
    assert series(run, LOSS) == {1: 15.9929, 2: 9.8606, 11: 8.5}
    assert series(run, EVAL_LOSS) == {0: 15.9936, 125: 5.9598}
    assert series(run, "perf/step_avg_s") == {11: pytest.approx(0.11212), 125: pytest.approx(0.13746)}
    assert series(run, STEP_TIME) == {2: pytest.approx(0.061), 11: pytest.approx((2500 - 1429) / 9 / 1000)}
    assert series(run, "perf/train_time_s")[125] == pytest.approx(15.807)


def test_nanochat(write) -> None:
    text = """step 00019/13920 (0.14%) | loss: 6.817907 | lrm: 1.00 | dt: 681.35ms | tok/sec: 769,480 | mfu: 48.09 | epoch: 1 | total time: 0.10m | eta: 157.6m
[GC rank3] gen2: 713.5ms collected 340341 objects
step 00020/13920 (0.14%) | loss: 6.731446 | lrm: 1.00 | dt: 1350.44ms | tok/sec: 388,235 | mfu: 24.27 | epoch: 1 | total time: 0.12m | eta: 173.1m
Step 00250 | Validation bpb: 0.9876
"""
    run = read(write, text)
    assert run.meta["dialect"] == "nanochat"
    assert series(run, LOSS) == {19: 6.817907, 20: 6.731446}
    assert series(run, STEP_TIME) == {19: pytest.approx(0.68135), 20: pytest.approx(1.35044)}
    assert series(run, TOKENS_PER_S) == {19: 769480.0, 20: 388235.0}
    assert series(run, MFU) == {19: pytest.approx(0.4809), 20: pytest.approx(0.2427)}
    assert series(run, "opt/lr_multiplier") == {19: 1.0, 20: 1.0}
    assert series(run, "eval/validation_bpb") == {250: 0.9876}
    assert [(ln.line, ln.step) for ln in run.lines] == [(2, 19)]  # the GC pause is kept as context


def test_progress_bar_with_glued_nccl_error(write) -> None:
    text = ("Epoch 0:   6%|██    | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6, v_num=95nc, "
            "reduced_train_loss=2.590, global_step=3.2e+4, consumed_samples=2.56e+7][E ProcessGroupNCCL.cpp:458] "
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, "
            "Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.\n"
            "[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught collective operation timeout\n")
    run = read(write, text)
    assert run.meta["dialect"] == "progress"
    assert series(run, LOSS) == {32040: 2.59}  # the counter, which the rounded global_step agrees with
    assert series(run, "train/loss_smoothed") == {32040: 2.6}
    assert series(run, "train/consumed_samples") == {32040: 2.56e7}
    assert series(run, STEP_TIME) == {32040: pytest.approx(1 / 1.37)}
    assert [(ln.line, ln.step) for ln in run.lines] == [(1, 32040), (2, 32040)]
    assert run.lines[0].text.startswith("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog")


def test_progress_bar_updates_and_epochs(write) -> None:
    bar = "Epoch {e}: {p}%|##| {n}/{t} [00:01<00:09, 2.00it/s, loss={loss}, v_num=0]"
    text = ("\r".join(bar.format(e=0, p=p, n=n, t=10, loss=l) for p, n, l in [(10, 1, 3.0), (50, 5, 2.0),
                                                                               (100, 10, 1.5)])
            + "\n" + bar.format(e=1, p=50, n=5, t=10, loss=1.25) + "\n"
            + bar.format(e=2, p=10, n=1, t=10, loss=1.0).replace("v_num=0", "global_step=21") + "\n")
    run = read(write, text)
    assert series(run, LOSS) == {1: 3.0, 5: 2.0, 10: 1.5, 15: 1.25, 21: 1.0}
    assert series(run, STEP_TIME)[1] == 0.5


def test_the_hf_trainers_first_dict_under_a_bar_at_0_takes_the_redraw_after_it(write) -> None:
    """The HF Trainer writes its first log dict through `tqdm.write` while the bar still shows 0/N (it refreshes
    every 0.1 s): tqdm clears the bar, prints the dict, and redraws the bar at its real count. The dict's step
    is that redraw's, as for every later dict; the first dict was dropped (17 of 48 HF console logs of
    bench/gpt_runs lost step 5)."""
    blank = " " * 40
    text = ("\r  0%|          | 0/361 [00:00<?, ?it/s]\r" + blank + "\r{'loss': 4.4696, 'grad_norm': 2.27, "
            "'learning_rate': 0.0003, 'epoch': 0.0}\n"
            "\r  1%|▏         | 5/361 [00:00<00:03, 92.76it/s]\r" + blank + "\r{'loss': 4.3033, 'grad_norm': 1.98, "
            "'learning_rate': 0.0006, 'epoch': 0.0}\n"
            "\r  3%|▎         | 10/361 [00:00<00:03, 115.97it/s]\n")
    run = read(write, text)
    assert series(run, LOSS) == {5: 4.4696, 10: 4.3033}
    assert series(run, GRAD_NORM) == {5: 2.27, 10: 1.98}


def test_cut_last_line_is_reported(write) -> None:
    path = write("train.log", "iter 3060: loss nan, time 1018.23ms, mfu 15.11%\niter 3070: loss n")
    run = TextLogImporter().read(path)
    assert set(series(run, LOSS)) == {3060}
    assert run.warnings == [f"{path}:2: the last line looks cut short (no newline, no metrics read from it)"]


def test_rank_prefixes(write) -> None:
    run = read(write, "[default0]:iter 1: loss 2.0, time 10.00ms, mfu 1.00%\n[rank0]:iter 2: loss 1.5, time 10.00ms\n")
    assert series(run, LOSS) == {1: 2.0, 2: 1.5}


def test_sniff() -> None:
    imp = TextLogImporter()
    assert imp.sniff(Path("a.txt"), "hello\nstep:1/10 train_loss:2.0 train_time:5ms step_avg:nanms\n")
    assert imp.sniff(Path("a.log"), "s:0 trl:11.0091 lr:0.000001 norm:15.37\n")
    assert not imp.sniff(Path("a.log"), "nothing here\nat all\n")
    assert not imp.sniff(Path("a.log"), "\x00\x01iter 1: loss 2.0, time 3.00ms")


def test_crlf_line_ends(write) -> None:
    run = read(write, "iter 1: loss 2.0, time 10.00ms, mfu 1.00%\r\niter 2: loss 1.5, time 10.00ms, mfu 1.00%\r\n")
    assert series(run, LOSS) == {1: 2.0, 2: 1.5}


def test_bars_named_epoch_n_of_total_restart_each_epoch(tmp_path):
    """`Epoch 2/20: 100%|...| 935/935 [...]` (a hand-written loop's tqdm description): the count restarts each
    epoch; every epoch's bar read at 935 collapsed 20 epochs into one record."""
    from stethoscope.importers.registry import read_any
    from stethoscope.records import LOSS

    lines = []
    for epoch in range(1, 4):
        redraws = "\r".join(f"Epoch {epoch}/20: {n * 100 // 935:3d}%|##| {n}/935 [00:10<00:00, 13.24it/s, "
                            f"loss={7 - epoch - n / 1000:.4f}]" for n in (1, 500, 935))
        lines += [redraws, f"Train Loss: {7 - epoch:.4f} - Train Perplexity: 100.0"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    c = read_any(path)[0].columns
    steps = [s for n, s in zip(c.names, c.steps) if n == LOSS]
    assert steps[-1] == 3 * 935 and len(set(steps)) == len(steps) >= 3


def test_hf_dicts_with_only_the_final_bar_kept_are_records_of_their_own(tmp_path):
    """A log that kept only the bar's last state (`100%|...| 6957/6957`) after the Trainer's dicts: they all
    waited for that one redraw and collapsed into one step. Each dict's `epoch` is the global step over the
    steps of an epoch: their steps are their epochs in the units of the bar's count."""
    from stethoscope.importers.registry import read_any
    from stethoscope.records import EVAL_LOSS, LOSS

    lines = ["  0%|          | 0/900 [00:00<?, ?it/s]"]
    for i in range(1, 10):
        lines.append(f"{{'loss': {2.0 / i:.4f}, 'learning_rate': 1e-05, 'epoch': {i / 3:.2f}}}")
        if i % 3 == 0:
            lines.append(f"{{'eval_loss': {2.1 / i:.4f}, 'eval_runtime': 1.0, 'epoch': {i / 3:.1f}}}")
    lines.append("100%|##########| 900/900 [05:00<00:00,  3.00it/s]")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    c = read_any(path)[0].columns
    steps = [s for n, s in zip(c.names, c.steps) if n == LOSS]  # the epoch is printed to 2 decimals: +-1 step
    assert len(steps) == 9 and all(abs(s - 100 * i) <= 2 for i, s in enumerate(steps, 1)), steps
    assert [s for n, s in zip(c.names, c.steps) if n == EVAL_LOSS] == [300, 600, 900]
