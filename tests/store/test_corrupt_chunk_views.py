"""A packed chunk damaged inside its blob is a damaged input in every verb: one line naming the checksum, exit
status 2 (user-trial-4: `diagnose`, `report` and `compare` called it "a bug in stethoscope's reader: please
report it", `watch` and `query` "could not finish", `export parquet` "user-defined function raised exception")."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

from stethoscope import Monitor
from stethoscope.cli.main import cli


def _run(path):
    with Monitor(path, strict=True, serve=False) as mon:
        for s in range(600):
            mon.step(s, loss=3.0 - s / 600)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    bad, good = _run(root / "bad"), _run(root / "good")
    con = sqlite3.connect(bad / "rank-00000.sqlite")
    sid, start, vals = con.execute("SELECT series_id, start_step, vals FROM points_packed p JOIN series s "
                                   "ON s.id = p.series_id WHERE s.name = 'train/loss' LIMIT 1").fetchone()
    b = bytearray(vals)
    b[len(b) // 2] ^= 0xFF
    con.execute("UPDATE points_packed SET vals = ? WHERE series_id = ? AND start_step = ?", (bytes(b), sid, start))
    con.commit()
    con.close()
    return root, bad, good


@pytest.mark.parametrize("verb", [["diagnose"], ["report", "-o", "{root}/r.html"], ["watch", "--once"],
                                  ["query", "SELECT COUNT(*) FROM metrics"], ["export", "parquet", "{root}/fleet"]])
def test_every_verb_says_damaged_in_one_line(runs, verb):
    root, bad, _ = runs
    args = [verb[0], str(bad), *[a.format(root=root) for a in verb[1:]]]
    if verb[0] == "export":
        args = ["export", "parquet", str(bad), str(root / "fleet")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert "checksum" in res.stderr and "bug" not in res.stderr and "could not finish" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "rank-00000.sqlite" in res.stderr, res.stderr  # the damaged file named, in every verb


def test_a_query_over_several_runs_leaves_the_damaged_one_out_and_names_it(runs):
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    _, bad, good = runs
    res = CliRunner().invoke(cli, ["query", str(bad), str(good), "SELECT run, COUNT(*) FROM metrics GROUP BY run",
                                   "--csv"])
    assert res.exit_code == 0, res.output
    assert "good" in res.stdout and "bad," not in res.stdout and "checksum" in res.stderr
