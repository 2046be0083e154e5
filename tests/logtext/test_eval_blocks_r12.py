"""An evaluation printed as a block under a head of its own, one value a line indented by blanks after the logger's
prefix (`INFO:__main__:📊 Evaluation Results:` then `INFO:__main__:   Loss: 0.5301`, `   Perplexity: 1.70`): the
eval's record at the last step, not a line without a counter (wild-logs-5's M4: the evals of a GPT-2 LoRA log were
not read, which silences every overfitting check). Synthetic excerpt in the shape."""

from __future__ import annotations

from pathlib import Path

from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import series


def _log(epochs: int, steps: int) -> str:
    out = ["INFO:__main__:🚀 Starting training\n"]
    for e in range(epochs):
        for s in range(10, steps + 1, 10):
            out.append(f"INFO:__main__:Epoch {e} | Step {s}/{steps} | Loss: {2 - e / 2 - s / 1000:.4f} | "
                       f"PPL: 5.21 | LR: 2.00e-04 | Grad: 0.311 | Time: 0.71s\n")
        out.append("INFO:__main__:📊 Evaluation Results:\n")
        out.append(f"INFO:__main__:   Loss: {1.5 - e / 10:.4f}\n")
        out.append("INFO:__main__:   Perplexity: 1.70\n")
        out.append("INFO:__main__:   Tokens: 2,982,385\n")
        out.append(f"INFO:__main__:✅ Epoch {e} completed in 4729.23s | Avg Loss: 0.6070\n")
        out.append(f"INFO:__main__:💾 Checkpoint saved: outputs/checkpoint_epoch_{e}.pt\n")
    return "".join(out)


def test_an_eval_block_under_its_head_is_the_evals_record(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(_log(3, 100), encoding="utf-8")
    (run,) = read_any(path)
    evals = series(run, EVAL_LOSS)
    assert sorted(evals) == [100, 200, 300]
    assert evals[100] == 1.5 and evals[300] == 1.3
    assert series(run, LOSS)[100] == 2 - 0.1  # the step's own train loss is left as it was


def _hrnet(epochs: int, iters: int) -> str:
    out = []
    for e in range(epochs):
        for i in range(0, iters, 10):
            out.append(f"Epoch: [{e}/520] Iter:[{i}/{iters}], Time: 0.62, lr: [0.00795], Loss: {3 - e / 10 - i / 1000:.6f}, "
                       f"Acc:0.489336, Semantic loss: 2.549362, IC loss: 0.689556\n")
        out.append("=> saving checkpoint to output/cityscapes/checkpoint.pth.tar\n")
        out.append(f"Loss: {1.5 - e / 10:.3f}, MeanIU:  0.{50 + e}49, Best_mIoU:  0.{50 + e}49\n")
        out.append("[0.66091042 0.00737965 0.25814515 0.00569717 0.00251844 0.00403608\n 0.0024 0.0019] 0.0649\n")
    return "".join(out)


def test_a_counterless_line_with_a_measure_no_step_prints_is_the_validations(tmp_path: Path) -> None:
    """HRNet's `Loss: 0.985, MeanIU:  0.4960, Best_mIoU:  0.5217` after its step lines. Before: kept as a line, no
    eval read."""
    path = tmp_path / "train.log"
    path.write_text(_hrnet(3, 50), encoding="utf-8")
    (run,) = read_any(path)
    evals = series(run, EVAL_LOSS)
    assert len(evals) == 3 and sorted(evals.values()) == [1.3, 1.4, 1.5]
    assert len(series(run, LOSS)) == 15 and max(series(run, LOSS).values()) == 3.0  # the step records unchanged
    assert len(series(run, "eval/mean_iu")) == 3


def test_a_counterless_line_of_the_steps_own_names_is_no_evaluation(tmp_path: Path) -> None:
    """A line that prints only names the step records print (an epoch's train summary) is not made an eval."""
    text = _hrnet(2, 50).replace("MeanIU:  ", "Acc:").replace(", Best_mIoU:  0.5049", "").replace(
        ", Best_mIoU:  0.5149", "")
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    (run,) = read_any(path)
    assert not series(run, EVAL_LOSS)


def test_a_counterless_summary_beside_a_time_is_no_evaluation(tmp_path: Path) -> None:
    """An epoch's train summary with its duration (`Loss: 2.9, epoch_time: 31.2`) is no validation's record."""
    text = _hrnet(2, 50).replace("MeanIU:  ", "epoch_time_s: 3").replace(", Best_mIoU:  0.5049", "").replace(
        ", Best_mIoU:  0.5149", "")
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    (run,) = read_any(path)
    assert not series(run, EVAL_LOSS)
