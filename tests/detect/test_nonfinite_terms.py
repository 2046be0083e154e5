"""NaN in a training series other than the loss (`detect.nonfinite_terms`).

A TRL DPO console logged `rewards/*`, `logps/*` and `logits/*` as nan at every record while its loss read 2.45e9
and then exactly 0.0; only the zero loss was named. A NaN in any logged training series is a finding (warning
when it holds, info for one blip), and an absurd first loss is named in it."""

from __future__ import annotations

from pathlib import Path

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers import read_any


def _dpo_log(path: Path, nan_at: set[int], first_loss: float = 0.6931, n: int = 12) -> Path:
    lines = ["***** Running training *****", "  Num examples = 1000"]
    for i in range(n):
        loss = first_loss if i == 0 else round(0.69 - 0.02 * i, 4)
        r = "nan" if i in nan_at else f"{0.01 * i:.4f}"
        lines.append("{'loss': %s, 'learning_rate': 0.0005, 'rewards/chosen': %s, 'rewards/rejected': %s, "
                     "'rewards/accuracies': 0.5, 'rewards/margins': %s, 'logps/rejected': %s, 'logps/chosen': %s, "
                     "'epoch': %.2f}" % (loss, r, r, r, r, r, 0.1 * (i + 1)))
    path.write_text("\n".join(lines) + "\n")
    return path


def _nan(path: Path) -> list:
    (run,) = read_any(path)
    return [f for f in diagnose_run(run).findings if f.type == "nan"]


def test_nan_rewards_and_logps_under_a_finite_loss_are_a_warning(tmp_path: Path) -> None:
    (f,) = _nan(_dpo_log(tmp_path / "dpo.log", nan_at=set(range(12)), first_loss=2451616399.36))
    assert f.severity in ("warning", "error"), f
    assert "rewards/chosen" in f.message and "while the loss stayed finite" in f.message
    assert "2.45e+09" in f.message and f.evidence["loss_affected"] is False


def test_one_nan_record_that_went_back_is_info(tmp_path: Path) -> None:
    (f,) = _nan(_dpo_log(tmp_path / "dpo.log", nan_at={5}))
    assert f.severity == "info", f


def test_finite_rewards_give_no_nan_finding(tmp_path: Path) -> None:
    assert _nan(_dpo_log(tmp_path / "dpo.log", nan_at=set())) == []
