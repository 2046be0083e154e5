"""check-data on damaged files of every format it reads: truncated, byte-flipped, spliced with garbage.
Each ends in a result or one line naming the file (exit 2) — never a traceback or an internal error."""

from __future__ import annotations

import io
import json
import math
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stethoscope.cli.main import cli

SETTINGS = dict(deadline=None, database=None, derandomize=True, max_examples=60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _rows() -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"question {i} <|im_start|>"},
                          {"role": "assistant", "content": f"answer {i % 7}"}],
             "labels": [-100] * (i % 3) + [i], "score": math.nan if i == 5 else i / 3} for i in range(40)]


def _seeds() -> dict[str, bytes]:
    rows = _rows()
    table = pa.table({"text": [f"row {i % 9}" for i in range(40)], "labels": [r["labels"] for r in rows],
                      "score": [r["score"] for r in rows]})
    parquet, stream = io.BytesIO(), io.BytesIO()
    pq.write_table(table, parquet, row_group_size=10)
    with pa.ipc.new_stream(stream, table.schema) as w:
        w.write_table(table, max_chunksize=10)
    return {
        ".jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(),
        ".json": json.dumps(rows).encode(),
        ".csv": ("prompt,response,score\n" + "".join(f'"q {i}, more",a {i},{i / 3}\n' for i in range(40))).encode(),
        ".parquet": parquet.getvalue(),
        "arrow": stream.getvalue(),
    }


SEEDS = _seeds()


@st.composite
def damaged(draw) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(sorted(SEEDS)))
    data = bytearray(SEEDS[kind])
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["truncate", "flip", "splice", "nul"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if how == "truncate":
            del data[at:]
        elif how == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif how == "splice":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        else:
            data[at:at] = b"\x00"
    return kind, bytes(data)


def _write(folder: Path, kind: str, data: bytes) -> Path:
    if kind != "arrow":
        path = folder / f"data{kind}"
        path.write_bytes(data)
        return path
    path = folder / "ds"
    path.mkdir()
    (path / "data-00000-of-00001.arrow").write_bytes(data)
    (path / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    return path


@settings(**SETTINGS)
@given(case=damaged(), near=st.sampled_from(["normalized", "minhash"]))
def test_damaged_files_end_in_a_result_or_one_line(case, near):
    kind, data = case
    with tempfile.TemporaryDirectory() as d:
        path = _write(Path(d), kind, data)
        res = CliRunner().invoke(cli, ["check-data", str(path), "--json", "--near", near])
    assert res.exit_code in (0, 2), (kind, res.exit_code, res.stderr)
    if res.exit_code == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path.name) in lines[0] and "could not finish" not in lines[0], (kind, res.stderr)
    else:
        assert json.loads(res.stdout)["files"][0]["rows"] >= 0


def test_the_seeds_themselves_are_read(tmp_path):
    for kind, data in SEEDS.items():
        path = _write(tmp_path, kind, data)
        res = CliRunner().invoke(cli, ["check-data", str(path), "--json"])
        assert res.exit_code == 0, (kind, res.stderr)
        assert json.loads(res.stdout)["files"][0]["rows"] == 40
