from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stethoscope.errors import InputError
from stethoscope.importers import default_importers, read_any, sniff_format
from stethoscope.importers.registry import log_files

FORMATS = ["hf_trainer_state", "mlflow", "mlflow_sqlite", "json_metrics", "tensorboard", "lightning_csv", "csv", "jsonl", "megatron",
           "fairseq", "boxrecords", "yolo_results_txt", "textlog", "texttable", "console"]
MEGATRON = (" iteration       10/     100 | consumed samples:          160 | elapsed time per iteration (ms): 500.0 | "
            "learning rate: 1.000E-04 | global batch size:    16 | lm loss: 2.500000E+00 | loss scale: 1.0 | grad "
            "norm: 0.500 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
SAMPLES = {
    "out/trainer_state.json": json.dumps({"log_history": [{"loss": 1.0, "step": 1}]}),
    "lightning_logs/version_0/metrics.csv": "epoch,step,train_loss\n0,1,1.0\n",
    "wandb.csv": "_step,train/loss\n0,1.0\n",
    "metrics.jsonl": '{"step": 1, "loss": 1.0}\n',
    "megatron.log": MEGATRON,
    "fairseq.log": "| epoch 001 | loss 9.9 | num_updates 10 | gnorm 1.2\n",
    "nanogpt.txt": "iter 1: loss 1.0, time 10.00ms, mfu 1.00%\n",
}


def test_format_names() -> None:
    assert [imp.name for imp in default_importers()] == FORMATS


@pytest.mark.parametrize("name,expected", [
    ("out/trainer_state.json", "hf_trainer_state"), ("lightning_logs/version_0/metrics.csv", "lightning_csv"),
    ("wandb.csv", "csv"), ("metrics.jsonl", "jsonl"), ("megatron.log", "megatron"), ("fairseq.log", "fairseq"),
    ("nanogpt.txt", "textlog"),
])
def test_sniff_format(write, name: str, expected: str) -> None:
    path = write(name, SAMPLES[name])
    assert sniff_format(path).name == expected
    (run,) = read_any(path)
    assert run.format == expected and len(run.points) >= 1


def test_first_metric_line_after_a_long_preamble(write) -> None:
    preamble = "".join(f"  argument_{i:05d} ........................ {i}\n" for i in range(10_000))
    path = write("slurm-123.out", preamble + MEGATRON)
    assert sniff_format(path).name == "megatron"


def test_unknown_format_lists_what_was_tried(write) -> None:
    path = write("notes.txt", "just some prose\nabout nothing\n")
    with pytest.raises(InputError) as err:
        read_any(path)
    assert str(path) in str(err.value)
    for name in FORMATS:
        assert name in str(err.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "train.log"
    with pytest.raises(InputError, match="no such file") as err:
        read_any(missing)
    assert str(missing) in str(err.value)


def test_empty_file(write) -> None:
    path = write("train.log", "")
    with pytest.raises(InputError, match="empty file") as err:
        read_any(path)
    assert str(path) in str(err.value)
    assert "import" not in str(err.value)  # diagnose, report and compare read it too: no verb of one (user-trial-4)


def test_directory_reads_every_known_log(tmp_path: Path, write) -> None:
    for name, text in SAMPLES.items():
        write(name, text)
    write("README.txt", "not a log")
    write(".hidden/train.log", MEGATRON)
    write("out/checkpoint-1/trainer_state.json", json.dumps({"log_history": [{"loss": 5.0, "step": 1}]}))
    runs = read_any(tmp_path)
    got = {Path(r.path).relative_to(tmp_path).as_posix(): r.format for r in runs}
    assert got == {
        "fairseq.log": "fairseq", "lightning_logs/version_0/metrics.csv": "lightning_csv",
        "megatron.log": "megatron", "metrics.jsonl": "jsonl", "nanogpt.txt": "textlog",
        "out/trainer_state.json": "hf_trainer_state", "wandb.csv": "csv",
    }


def test_directory_keeps_only_the_newest_checkpoint_state(tmp_path: Path, write) -> None:
    for n in (500, 1000, 1500):
        write(f"out/checkpoint-{n}/trainer_state.json", json.dumps({"log_history": [{"loss": 1.0, "step": n}]}))
    assert [p.relative_to(tmp_path).as_posix() for p in log_files(tmp_path)] == [
        "out/checkpoint-1500/trainer_state.json"]


def test_directory_without_logs(tmp_path: Path, write) -> None:
    write("README.txt", "nothing")
    with pytest.raises(InputError, match="no known log found") as err:
        read_any(tmp_path)
    assert "README.txt" in str(err.value)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(InputError, match="no candidate files"):
        read_any(empty)


def test_one_broken_file_does_not_hide_the_others(tmp_path: Path, write) -> None:
    write("a/trainer_state.json", '{"log_history": 3}')
    write("b/train.log", MEGATRON)
    runs = read_any(tmp_path)
    assert [r.format for r in runs] == ["hf_trainer_state", "megatron"]
    assert runs[0].points == [] and "log_history" in runs[0].warnings[0]


def test_importing_loads_no_framework() -> None:
    code = ("import sys, stethoscope.importers\n"
            "bad = [m for m in ('torch', 'tensorboard', 'numpy') if m in sys.modules]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_binary_file_is_not_a_text_log(write) -> None:
    path = write("weights.log", bytes(range(256)) * 64)
    with pytest.raises(InputError, match="no known log format"):
        read_any(path)
