"""A big Megatron log's columns kept as the reader's parts (`logtext.coded_parts.PartsColumns`) and the step x
series table stacked from their rows (`diagnose.table.Table._stacked`): the same points, table and diagnosis
as laying them out with `join` and pivoting them, on logs where stacking applies and where it must give way
(a resume, a step read twice, evals and timers between records, stamped records, a renamed series)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stethoscope.diagnose.engine import diagnose_run
from stethoscope.diagnose.table import Table
from stethoscope.importers.megatron import MegatronImporter
from stethoscope.importers.registry import read_any
from stethoscope.logtext import linescan
from stethoscope.logtext.coded import join
from stethoscope.logtext.coded_parts import PartsColumns
from tests.importers.test_megatron import _awkward_log, bloom, fp16, stamped

built = pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")


def _healthy(steps: range, spike: int | None = None) -> list[str]:
    return [fp16(s, loss=f"{(2 + 4 / (1 + s / 300)) * (2.5 if s == spike else 1):.6E}", norm=f"{0.3 + s % 7 / 100:.3f}")
            for s in steps]


LOGS = {
    "plain": lambda: _healthy(range(1, 4001), spike=2500),
    "resumed": lambda: _healthy(range(1, 2501)) + _healthy(range(2001, 4001)),  # steps go back: pivoted
    "step_twice": lambda: _healthy(range(1, 2001)) + _healthy(range(2000, 4000)),
    "evals_timers": lambda: [line for s, rec in zip(range(1, 4001), _healthy(range(1, 4001))) for line in
                             [rec] + (["time (ms)", f" validation loss at iteration {s} | lm loss value: 2.0E+00 |"
                                       " lm loss PPL: 7.39 |"] if s % 500 == 0 else [])],
    "stamped": lambda: [stamped(s, f"2024-05-01 10:{s // 60 % 60:02d}:{s % 60:02d}") for s in range(1, 3001)],
    "bloom_test_loss": lambda: [line for s in range(1, 3001) for line in
                                [bloom(s, f"{2 + 1 / s:.6E}")]
                                + ([f" test loss at iteration {s} | lm loss value: 2.5E+00 |"] if s % 500 == 0 else [])],
    "awkward": lambda: _awkward_log().splitlines(),
}


def _points(columns) -> list[tuple[object, ...]]:
    return [(n, s, "nan" if v != v else v, t) for n, s, v, t in zip(*columns)]


def _tables_equal(a: Table, b: Table) -> None:
    assert a.names == b.names
    assert np.array_equal(a.steps, b.steps)
    assert np.array_equal(a.values, b.values, equal_nan=True)
    assert np.array_equal(a.present, b.present)
    assert a.last_time == b.last_time and a.n_steps == b.n_steps


@built
@pytest.mark.parametrize("name", list(LOGS))
def test_parts_read_and_diagnose_as_their_joined_points(write, name: str) -> None:
    path = write("train.log", "\n".join(LOGS[name]()) + "\n")
    run = read_any(path)[0]
    columns = run.columns
    assert isinstance(columns, PartsColumns)
    joined = join(columns.parts)
    joined.labels = list(columns.labels)  # as importers.held_out renamed them (test/loss read as the eval loss)
    _tables_equal(Table.from_columns(columns), Table.from_columns(joined))
    assert columns.size == joined.size and columns.labels == joined.labels
    assert columns.last_time == joined.last_time
    stacked = diagnose_run(run).to_dict()
    assert _points(columns) == _points(joined)  # laid out on first read: the points join gives
    run._columns = joined
    assert json.dumps(stacked, sort_keys=True) == json.dumps(diagnose_run(run).to_dict(), sort_keys=True)


@built
def test_stacking_applies_to_a_plain_log_and_gives_way_to_a_resume(write, monkeypatch) -> None:
    """The stacked table is what a plain log gets (no points laid out); a resume's is pivoted."""
    stacked: list[bool] = []
    real = Table._stacked.__func__

    def spy(cls, columns):
        got = real(cls, columns)
        stacked.append(got is not None)
        return got

    monkeypatch.setattr(Table, "_stacked", classmethod(spy))
    for name, want in (("resumed", False), ("step_twice", False), ("plain", True)):
        run = read_any(write(f"{name}.log", "\n".join(LOGS[name]()) + "\n"))[0]
        diagnose_run(run)
        assert stacked[-1] is want, name
    assert not _laid_out(run.columns)  # the plain log's, read last: its points never laid out


def _laid_out(columns: PartsColumns) -> bool:
    try:
        object.__getattribute__(columns, "codes")
    except AttributeError:
        return False
    return True


@built
def test_renamed_labels_survive_the_lay_out(write) -> None:
    """importers.held_out renames a series in `labels` before anything lays the points out: both views agree."""
    run = read_any(write("train.log", "\n".join(LOGS["plain"]()) + "\n"))[0]
    columns = run.columns
    assert not _laid_out(columns)
    columns.labels = ["renamed" if n == columns.labels[0] else n for n in columns.labels]
    table = Table.from_columns(columns)
    assert table.names[0] == "renamed" and not _laid_out(columns)
    assert columns.names[0] == "renamed" and _laid_out(columns)
    joined = Table.from_columns(join(columns.parts))
    assert table.names == ["renamed"] + joined.names[1:]
    assert np.array_equal(table.steps, joined.steps) and np.array_equal(table.values, joined.values, equal_nan=True)


def test_native_and_pure_python_reads_diagnose_alike(write, monkeypatch) -> None:
    """With the scanner (where built) and without it (`STETHOSCOPE_NATIVE=0`): the same diagnosis."""
    path = write("train.log", "\n".join(LOGS["evals_timers"]()) + "\n")
    native = diagnose_run(MegatronImporter().read(path)).to_dict()
    monkeypatch.setenv("STETHOSCOPE_NATIVE", "0")
    plain = MegatronImporter().read(path)
    assert not isinstance(plain.columns, PartsColumns) or plain.columns.parts
    assert json.dumps(native, sort_keys=True) == json.dumps(diagnose_run(plain).to_dict(), sort_keys=True)


@built
def test_a_step_beyond_64_bits_fails_while_the_log_is_read(write) -> None:
    """The points read line by line are encoded when the parts are kept, as `join` encoded them: a step that
    does not fit in 64 bits stops the read (exit 2, the file and the step named, no "bug" wording) as it did
    before the parts were kept, not the diagnosis. (The regex path, STETHOSCOPE_NATIVE=0, fails later, as it did.)"""
    from click.testing import CliRunner

    from stethoscope.cli.main import cli

    path = write("train.log", "\n".join(_healthy(range(1, 300)) + [fp16(2**70)]) + "\n")
    res = CliRunner().invoke(cli, ["diagnose", str(path), "--json"])
    assert res.exit_code == 2
    assert f"{path}: a step counter of {2**70} does not fit in 64 bits" in res.output and "bug" not in res.output
