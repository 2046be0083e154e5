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
