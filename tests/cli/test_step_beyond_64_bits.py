"""A step counter beyond 64 bits is bad input (exit 2 naming the file and the step), not "a bug in stethoscope's
reader" (noticed in session 8: a Megatron line with a 23-digit iteration). The pure-Python fallback reader
(STETHOSCOPE_NATIVE=0) keeps list columns and fails later, in the store or the detectors, with a generic
message: left as it was (tests/importers/test_megatron_speed_parts.py says the same)."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli

BIG = "99999999999999999999999"
_MEGATRON = (" iteration {s}/ 1000 | consumed samples: 10 | elapsed time per iteration (ms): 100.0 | learning rate: "
             "1.0E-04 | global batch size: 8 | lm loss: 2.5E+00 | loss scale: 1.0 | grad norm: 1.0 | "
             "number of skipped iterations: 0 | number of nan iterations: 0 |")


@pytest.mark.skipif(os.environ.get("STETHOSCOPE_NATIVE") == "0", reason="the fallback reader fails later")
@pytest.mark.parametrize("line", [_MEGATRON, "step {s} loss 2.3"], ids=["megatron", "plain"])
@pytest.mark.parametrize("verb", ["diagnose", "import"])
def test_a_step_beyond_64_bits_is_named_as_bad_input(tmp_path, line, verb):
    log = tmp_path / "train.log"
    log.write_text("".join(line.format(s=s) + "\n" for s in ("1", "2", "3", BIG)))
    args = [verb, str(log)] + (["--into", str(tmp_path / "run")] if verb == "import" else [])
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert str(log) in res.output and BIG in res.output and "64 bits" in res.output
    assert "bug" not in res.output and "Traceback" not in res.output
