"""`export parquet` of a run none of whose rank files can be read is an input error (exit status 2), as `show`
makes it (user-trial-4: a truncated store printed an empty table and exited 0); one bad rank of several is
still a warning, and the other runs are exported before the error."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli
from stethoscope.errors import UsageError
from stethoscope.store.export import export_runs

pytest.importorskip("pyarrow")


def _run(path):
    with Monitor(path, strict=True, serve=False) as mon:
        for s in range(50):
            mon.step(s, loss=3.0 - s / 50)
    return path


def _truncate(run):
    f = next(run.glob("rank-*.sqlite"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def test_a_run_with_no_readable_rank_exits_2_with_one_line(tmp_path):
    bad = _run(tmp_path / "bad")
    _truncate(bad)
    res = CliRunner().invoke(cli, ["export", "parquet", str(bad), str(tmp_path / "fleet")])
    assert res.exit_code == 2, res.output
    assert "rank-00000.sqlite" in res.stderr and "Traceback" not in res.output


def test_the_good_runs_are_exported_before_the_error(tmp_path):
    good, bad = _run(tmp_path / "good"), _run(tmp_path / "bad")
    _truncate(bad)
    with pytest.raises(UsageError, match="1 other run"):
        export_runs([str(good), str(bad)], tmp_path / "fleet")
    assert list((tmp_path / "fleet" / "metrics").glob("run=good/rank=0/*.parquet"))
