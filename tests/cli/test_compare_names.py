"""compare names a folder it was given by that folder (user-trial-2: two Lightning `version_N` folders were
columns `events.out.tfevents.1795829057.vm.8042.0` and `events.out.tfevents.1795829064.vm.8072.0`)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from stethoscope.cli.main import cli


def test_two_folders_of_one_log_are_named_by_the_folders(tmp_path):
    for name, scale in (("version_0", 1.0), ("version_1", 2.0)):
        (tmp_path / name).mkdir()
        rows = (json.dumps({"step": s, "loss": 3.0 * scale - s / 100}) + "\n" for s in range(50))
        (tmp_path / name / "log.jsonl").write_text("".join(rows))
    out = tmp_path / "c.html"
    given = [str(tmp_path / "version_0"), str(tmp_path / "version_1") + "/"]
    result = CliRunner().invoke(cli, ["compare", *given, "-o", str(out)], terminal_width=400)
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()[2]
    assert str(tmp_path / "version_0") in header and str(tmp_path / "version_1") in header
    assert "log.jsonl" not in header
    page = out.read_text()
    assert str(tmp_path / "version_1") in page


def test_compares_numbers_are_shows_a_nan_eval_left_out_of_the_min(tmp_path):
    # Python's min() over [nan, 2.3, ..] is nan; show (SQL's MIN) leaves NaN out (user-trial-4 item 3).
    from stethoscope import Monitor

    for name in ("a", "b"):
        with Monitor(str(tmp_path / name), serve=False) as mon:
            for s in range(30):
                mon.step(s, loss=3.0 - s / 20, tokens=64)
                if s % 10 == 0:
                    mon.eval(s, eval_loss=float("nan") if s == 0 else 2.5 - s / 100)
    result = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o",
                                      str(tmp_path / "c.html")], terminal_width=400)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "min eval loss" in line)
    assert "nan" not in row.lower() and "2.3" in row, row
