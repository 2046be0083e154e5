"""Damage the robustness tests found: each one a clear error naming the line, or a read that goes on."""

from __future__ import annotations

import pytest

from stethoscope.errors import InputError
from stethoscope.importers.registry import read_any


def test_csv_field_over_the_size_limit_is_an_error_naming_the_line(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("step,loss\n0,2.5\n1,\"" + "x" * 200_000 + "\"\n")
    with pytest.raises(InputError) as e:
        read_any(p)
    assert e.value.line == 3 and str(p) in str(e.value) and "malformed CSV" in str(e.value)


def test_lightning_metrics_with_binary_inside_is_an_error_naming_the_line(tmp_path):
    p = tmp_path / "metrics.csv"
    p.write_bytes(b"epoch,step,train_loss\n0,0,2.5\n0,1,\"" + b"x" * 200_000 + b"\"\n")
    with pytest.raises(InputError) as e:
        read_any(p)
    assert e.value.line == 3


def test_a_damaged_loss_scale_number_does_not_stop_a_megatron_read(tmp_path):
    p = tmp_path / "train.log"
    rows = [f" iteration {i:>8}/     100 | consumed samples: {i * 8} | elapsed time per iteration (ms): 100.0 | "
            f"learning rate: 1.000E-04 | global batch size: 8 | lm loss: 2.5E+00 | loss scale: 65536.0 | "
            "number of skipped iterations: 0 | number of nan iterations: 0 |" for i in range(1, 6)]
    rows.insert(2, "[2024] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 1048576.-, reducing to 0.-0001953125")
    p.write_text("\n".join(rows) + "\n")
    (run,) = read_any(p)
    assert run.steps >= 5
