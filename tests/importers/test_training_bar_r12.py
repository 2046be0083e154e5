"""Which tqdm bar is the training loop's, and when a bar is a record at all (wild-logs-5's M3): a data set's
preparation bars (`10000/10000`, then `71514/71514`) were read as the step axis of an HF Trainer console while its
`{'loss': ..}` dicts were folded onto their steps; an epoch bar with no metric postfix outranked CycleGAN's
`(epoch: 2, iters: 20, ..) , D_A: ..` records; bars with a `loss=` postfix outranked the `Epoch 1/50 - Train Loss:
.., Validation Loss: ..` lines beside them (2 steps for 5 epochs, no eval read). Synthetic excerpts in the shapes."""

from __future__ import annotations

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS, STEP_TIME
from tests.importers.series import names, series

_PREP = ("  0%|          | 0/10000 [00:00<?, ?it/s]\r 41%|####      | 4149/10000 [00:00<00:00, 9479.50it/s]"
         "\r100%|##########| 10000/10000 [00:01<00:00, 9479.50it/s]\n"
         "  0%|          | 0/71514 [00:00<?, ?it/s]\r 50%|#####     | 35757/71514 [00:10<00:10, 3272.12it/s]"
         "\r100%|##########| 71514/71514 [00:21<00:00, 3272.12it/s]\n")


def _hf_console() -> str:
    """Data preparation bars, then the Trainer's bar of 60 steps with a dict every 10 steps; the first dict is
    printed right after the bar on the same physical line (tqdm.write without a newline before it)."""
    out = ["wandb: Tracking run with wandb version 0.16.6\n", _PREP, "trainable params: 25,460,736 || all params: 9\n"]
    draws = ["  0%|          | 0/60 [00:00<?, ?it/s]"]
    for step in range(1, 61):
        draws.append(f" {step * 100 // 60:2d}%|#         | {step}/60 [00:{step:02d}<01:00,  7.{step % 10}s/it]")
        if step % 10 == 0:
            loss = 2.0 / step ** 0.5
            out.append("\r".join(draws) + f"{{'loss': {loss:.4f}, 'grad_norm': 1.5, 'learning_rate': 7e-05, "
                                           f"'epoch': {step / 1200:.2f}}}\n")
            draws = []
    out.append("\r".join(draws) + "\n")
    return "".join(out)


def test_bars_of_data_preparation_are_not_the_step_axis(write) -> None:
    """Before: steps 0..71514 from the preparation bars, the dicts at their counts, and a step time of 71514
    points made of the preparation's rate (items a second)."""
    (run,) = read_any(write("train.log", _hf_console()))
    loss = series(run, LOSS)
    assert len(loss) == 6 and max(loss) <= 60
    assert sorted(loss) == [10, 20, 30, 40, 50, 60]
    times = series(run, STEP_TIME)
    assert times and max(times) <= 60 and min(times.values()) > 1.0  # the training bar's s/it, not 1/9479


_CYCLEGAN_OPTIONS = "----------------- Options ---------------\n               batch_size: 1\n" \
                    "                    beta1: 0.5\n----------------- End -------------------\n"


def _cyclegan() -> str:
    out = [_CYCLEGAN_OPTIONS]
    for epoch in range(1, 5):
        bars = [f"Epoch {epoch}/200:  {i * 100 // 40:2d}%|#         | {i}/40 [00:{i:02d}<00:40,  1.0{i % 10}s/it]"
                for i in range(0, 41)]
        out.append("\r".join(bars[:21]) + "\n")
        out.append(f"[Rank 0] (epoch: {epoch}, iters: 20, time: 1.283, data: 0.043) , D_A: 0.{epoch}36, G_A: 0.546, "
                   f"cycle_A: 0.998, idt_A: 0.679, D_B: 0.163, G_B: 0.604, cycle_B: 0.916, idt_B: 0.442\n")
        out.append("\r".join(bars[21:]) + "\n")
        out.append(f"End of epoch {epoch} / 200 \t Time Taken: 182 sec\n")
    return "".join(out)


def test_a_bar_without_a_metric_postfix_is_no_record(write) -> None:
    """Before: 160 steps of the epoch bars' rate and none of the GAN's losses."""
    (run,) = read_any(write("train.log", _cyclegan()))
    assert run.steps == 4
    assert {"d_a", "g_a", "cycle_b"} <= names(run)


def _deeplense(epochs: int = 5, first: float = 0.98) -> str:
    out = [f"First {epochs} epochs\n```\nTotal number of train params, training full: 2395779\n"]
    for e in range(1, epochs + 1):
        out.append(f"Epoch {e}/{epochs} [FT]: 100%|##########| 157/157 [01:51<00:00,  1.41it/s, "
                   f"loss={first - 0.08 - e / 20:.3f}]\n")
        out.append(f"Epoch {e}/{epochs} [Validating]: 100%|##########| 18/18 [00:11<00:00,  1.56it/s]\n")
        if e % 2:
            out.append(f"Saving model at Epoch {e} with Validation Accuracy: {50 + e}.73%\n")
        out.append(f"Epoch {e}/{epochs} - Train Loss: {first - e / 20:.4f}, Train Accuracy: {50 + e}.15%, "
                   f"Validation Loss: {1.3 + (e % 2):.4f}, Validation Accuracy: {33 + e}.73%\n")
    return "".join(out) + "```\n"


def test_metric_lines_beside_bars_define_the_records(write) -> None:
    """Before: 1 step (the bar's 157/157 every epoch) and no validation loss."""
    (run,) = read_any(write("notes.md", _deeplense()))
    assert sorted(series(run, EVAL_LOSS)) == [1, 2, 3, 4, 5]
    assert series(run, EVAL_LOSS)[2] == 1.3 and series(run, EVAL_LOSS)[3] == 2.3
    assert sorted(series(run, LOSS)) == [1, 2, 3, 4, 5]


def test_an_eval_dict_glued_after_the_bar_is_the_evals(write) -> None:
    """TRL/HF print the eval's dict right after the bar's redraw on the same line; `eval_log_loss` beside
    `eval_loss` keeps its own name (before: 1 eval of 3 read, and the log loss read as the eval loss)."""
    text = _hf_console().replace(
        "'epoch': 0.03}\n", "'epoch': 0.03}\n" + " 50%|#####     | 30/60 [00:30<00:30,  7.1s/it]{'eval_loss': 0.5166, "
        "'eval_log_loss': 1.0328, 'eval_runtime': 642.6, 'epoch': 0.03}\n", 1)
    (run,) = read_any(write("train.log", text))
    assert series(run, EVAL_LOSS) == {30: 0.5166}
    assert series(run, "eval_log_loss") == {30: 1.0328}


def test_a_second_session_for_another_number_of_epochs_is_a_run(write) -> None:
    """`Epoch 5/5 - ..` then `Epoch 1/4 [FT]: ..` (a second session going on from the first's weights): two runs,
    not epochs 1-4 laid over the first session's."""
    runs = read_any(write("notes.md", _deeplense(5, 0.98) + "\nNext 4 epochs\n" + _deeplense(4, 0.70)))
    assert [sorted(series(r, EVAL_LOSS)) for r in runs] == [[1, 2, 3, 4, 5], [1, 2, 3, 4]]
    assert series(runs[1], LOSS)[1] == 0.65
