"""Gzipped logs (`train.log.gz`, `trainer_state.json.gz`, …) read exactly like the plain ones."""

from __future__ import annotations

import gzip
import json

import pytest

from stethoscope.errors import InputError
from stethoscope.importers.megatron import MegatronImporter
from stethoscope.importers.registry import read_any, sniff_format
from tests.conftest import run_cli
from tests.importers.test_fairseq import MODERN
from tests.importers.test_hf import STATE
from tests.importers.test_megatron import bloom

LOGS = {
    "megatron": ("train.log", "\n".join(bloom(s, loss=f"{3 - s / 100:.6E}") for s in range(1, 60)) + "\n"),
    "hf_trainer_state": ("trainer_state.json", STATE),
    "lightning_csv": ("metrics.csv", "epoch,step,train_loss,lr-AdamW\n0,0,2.5,0.001\n0,1,2.25,0.001\n0,2,2.0,0.001\n"),
    "csv": ("history.csv", "step,loss,grad_norm\n1,2.5,1.0\n2,2.25,0.9\n3,2.0,0.8\n"),
    "jsonl": ("metrics.jsonl", "".join(json.dumps({"step": s, "loss": 3 - s / 10}) + "\n" for s in range(10))),
    "fairseq": ("train.log", MODERN),
}


def _points(run):
    return [(p.name, p.step, repr(p.value)) for p in run.points]


@pytest.mark.parametrize("kind", sorted(LOGS))
def test_gzipped_log_reads_like_the_plain_one(tmp_path, kind):
    name, text = LOGS[kind]
    plain = tmp_path / "plain" / name
    packed = tmp_path / "packed" / f"{name}.gz"
    for p in (plain, packed):
        p.parent.mkdir()
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    (a,), (b,) = read_any(plain), read_any(packed)
    assert a.format == b.format and a.n_points > 0
    assert _points(a) == _points(b)
    # a folder of gzipped logs is searched like a folder of plain ones
    (found,) = read_any(packed.parent)
    assert _points(found) == _points(a)


def test_megatron_chunks_across_a_gzip_stream(tmp_path):
    text = LOGS["megatron"][1] * 3
    packed = tmp_path / "train.log.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    plain = tmp_path / "train.log"
    plain.write_text(text)
    small = MegatronImporter(chunk_bytes=997)  # records cut at every possible place
    assert _points(small.read(packed)) == _points(MegatronImporter().read(plain))


def test_truncated_gzip_is_a_clear_error_naming_the_file(tmp_path, cli_env):
    name, text = LOGS["megatron"]
    packed = tmp_path / f"{name}.gz"
    packed.write_bytes(gzip.compress((text * 20).encode())[:-200])
    assert sniff_format(packed).name == "megatron"  # the start still tells the format
    with pytest.raises(InputError, match="truncated gzip") as info:
        read_any(packed)
    assert str(packed) in str(info.value)
    res = run_cli("diagnose", str(packed), env=cli_env)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert str(packed) in res.stderr and "truncated gzip" in res.stderr


def test_explain_reads_a_gzipped_error_log(tmp_path, cli_env):
    log = tmp_path / "rank3.err.gz"
    log.write_bytes(gzip.compress(b"Traceback (most recent call last):\n  File \"train.py\", line 3\n"
                                  b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"))
    res = run_cli("explain", str(log), "--json", env=cli_env)
    assert res.returncode in (0, 1), res.stderr
    out = json.loads(res.stdout)
    assert out["path"] == str(log)
    assert any("memory" in f["message"].lower() for f in out["findings"])
