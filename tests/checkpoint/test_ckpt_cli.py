"""`stethoscope ckpt list|verify|prune|inspect`, on our checkpoints and on HF / Megatron layouts."""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import torch
from click.testing import CliRunner

import stethoscope
from stethoscope.cli.main import cli


def _ckpt(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["ckpt", *args])
    return res.exit_code, res.output


def _ours(root: Path, steps: range) -> Path:
    model = torch.nn.Linear(3, 2)
    ck = stethoscope.Checkpoints(root, keep_last=None, keep_best="eval/loss", extra={"model": model},
                                 milestones_every=4, on_signal=None, strict=True)
    for s in steps:
        ck.note({"eval/loss": 10.0 - s if s != 2 else 0.5})
        ck.save(s)
    ck.close()  # the last save's fsyncs and rename run on a thread
    return root


def _safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """A .safetensors file by its spec (8-byte header length, JSON header, raw little-endian data)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": {torch.float32: "F32", torch.int64: "I64"}[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def test_list_verify_prune(tmp_path):
    root = _ours(tmp_path / "ck", range(1, 7))
    code, out = _ckpt("list", str(root), "--json")
    rows = json.loads(out)
    assert code == 0 and [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["milestone"] for r in rows] == [False, False, False, True, False, False]
    code, out = _ckpt("verify", str(root))
    assert code == 0 and "6 ok, 0 bad" in out
    model = root / "step-00000005" / "model.pt"
    model.write_bytes(model.read_bytes()[:-9])
    code, out = _ckpt("verify", str(root))
    assert code == 1 and "step-00000005: model.pt has" in out and "truncated" in out
    code, out = _ckpt("prune", str(root), "--keep-last", "1", "--dry-run")
    assert code == 0 and "3 to delete, 3 kept" in out  # 4 (milestone), 6 (newest) and 5 (truncated) stay
    assert "step-00000005" not in out  # a truncated one is corrupt (sizes are checked): left for --corrupt
    code, out = _ckpt("prune", str(root), "--keep-last", "1", "--keep-best", "eval/loss", "--corrupt")
    assert code == 0 and sorted(p.name for p in root.iterdir()) == ["step-00000002", "step-00000004",
                                                                    "step-00000006"]


def test_inspect_ours(tmp_path):
    root = _ours(tmp_path / "ck", range(1, 2))
    code, out = _ckpt("inspect", str(root / "step-00000001"), "--json")
    info = json.loads(out)
    assert code == 0 and info["layout"] == "stethoscope" and info["step"] == 1
    assert {"file": "model.pt", "key": "weight", "shape": [2, 3], "dtype": "float32", "bytes": 24} in info["tensors"]


def test_inspect_hf_trainer_checkpoint(tmp_path):
    ck = tmp_path / "output" / "checkpoint-500"
    ck.mkdir(parents=True)
    _safetensors(ck / "model.safetensors", {"lm_head.weight": torch.zeros(8, 4), "pos": torch.arange(3)})
    model = torch.nn.Linear(4, 8)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    torch.save(opt.state_dict(), ck / "optimizer.pt")
    torch.save({"last_epoch": 500, "_last_lr": [1e-4]}, ck / "scheduler.pt")
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": 500, "epoch": 1.5, "best_metric": 0.7,
                                                       "log_history": [{"loss": 2.0, "step": 10}] * 50}))
    code, out = _ckpt("inspect", str(ck), "--json")
    info = json.loads(out)
    assert code == 0 and info["layout"] == "hf" and info["step"] == 500 and not info["problems"]
    assert info["trainer_state"] == {"global_step": 500, "epoch": 1.5, "best_metric": 0.7, "log_entries": 50}
    keys = {(t["file"], t["key"]): (t["shape"], t["dtype"]) for t in info["tensors"]}
    assert keys[("model.safetensors", "lm_head.weight")] == ([8, 4], "F32")
    assert keys[("optimizer.pt", "state.0.exp_avg")] == ([8, 4], "float32")
    code, out = _ckpt("list", str(tmp_path / "output"), "--json")
    assert code == 0 and json.loads(out)[0]["status"] == "foreign" and json.loads(out)[0]["step"] == 500
    code, out = _ckpt("inspect", str(ck))  # the readable table
    assert code == 0 and "lm_head.weight" in out and "8x4" in out and "global_step" in out


def test_inspect_megatron_layout_and_trust(tmp_path):
    root = tmp_path / "megatron"
    (root / "iter_0000100" / "mp_rank_00").mkdir(parents=True)
    rank = root / "iter_0002000" / "mp_rank_00"
    rank.mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text("2000\n")
    sd = {"model": {"language_model": {"embedding.weight": torch.zeros(16, 4)}}, "iteration": 2000,
          "args": argparse.Namespace(hidden_size=4)}  # Megatron pickles its args: not weights-only
    torch.save(sd, rank / "model_optim_rng.pt")
    code, out = _ckpt("inspect", str(root), "--json")
    info = json.loads(out)
    assert code == 0 and info["layout"] == "megatron" and info["step"] == 2000
    assert not info["tensors"] and "pickled Python objects" in info["problems"][0] and "--trust" in info["problems"][0]
    code, out = _ckpt("inspect", str(root), "--json", "--trust")
    tensors = json.loads(out)["tensors"]
    assert tensors == [{"file": "mp_rank_00/model_optim_rng.pt", "key": "model.language_model.embedding.weight",
                        "shape": [16, 4], "dtype": "float32", "bytes": 256}]
    code, out = _ckpt("list", str(root), "--json")
    assert [r["step"] for r in json.loads(out)] == [100, 2000]


def test_bad_path_is_one_line_exit_2(tmp_path):
    code, out = _ckpt("verify", str(tmp_path / "nope"))
    assert code == 2 and "nope: no such file or folder" in out


def test_list_and_dry_run_say_what_was_checked(tmp_path):
    """`list` and `prune --dry-run` check the manifest and every file's size, not the hashes: a truncated
    file is corrupt, a flipped bit (same size) is `unverified`, never `ok`; `verify` finds the flip."""
    root = _ours(tmp_path / "ck", range(1, 5))
    short = root / "step-00000002" / "model.pt"
    short.write_bytes(short.read_bytes()[:-5])
    flipped = root / "step-00000003" / "model.pt"
    raw = bytearray(flipped.read_bytes())
    raw[-20] ^= 0x01
    flipped.write_bytes(bytes(raw))
    code, out = _ckpt("list", str(root), "--json")
    rows = {r["step"]: r for r in json.loads(out)}
    assert code == 0 and {s: r["status"] for s, r in rows.items()} == {1: "unverified", 2: "corrupt",
                                                                       3: "unverified", 4: "unverified"}
    assert "truncated" in rows[2]["reason"] and not rows[3]["verified"]
    code, out = _ckpt("list", str(root))
    assert code == 0 and " ok " not in out and "ckpt verify" in out
    code, out = _ckpt("prune", str(root), "--keep-last", "1", "--dry-run")
    assert code == 0 and "(step 1, unverified)" in out and "(step 3, unverified)" in out and ", ok)" not in out
    assert "step-00000002" not in out  # a corrupt one is left for --corrupt to judge
    code, out = _ckpt("verify", str(root), "--json")
    assert code == 1 and {r["step"]: r["status"] for r in json.loads(out)} == {1: "ok", 2: "corrupt",
                                                                               3: "corrupt", 4: "ok"}


def test_verify_a_checkpoint_a_rollback_superseded(tmp_path):
    """A rollback sets later checkpoints aside as superseded-step-N-…: verifying one reads its step from
    that name, finds it sound and says it was superseded (not 'the folder says -1')."""
    model = torch.nn.Linear(3, 2)
    ck = stethoscope.Checkpoints(tmp_path / "ck", keep_last=None, extra={"model": model}, on_signal=None, strict=True)
    for s in (100, 170):
        ck.save(s, wait=True)
    assert ck.rollback(150) == 100
    ck.close()
    (aside,) = (tmp_path / "ck").glob("superseded-step-00000170-*")
    code, out = _ckpt("verify", str(aside), "--json")
    (row,) = json.loads(out)
    assert code == 0 and row["step"] == 170 and row["status"] == "ok" and "superseded" in row["reason"]
    code, out = _ckpt("verify", str(aside))
    assert code == 0 and "1 ok, 0 bad" in out and "says -1" not in out


def test_list_shows_what_a_rollback_set_aside_and_reads_a_run_folder(tmp_path):
    """`ckpt list RUN` looks in the run's checkpoint folder, and lists the checkpoints a rollback set aside
    (superseded, never resumed from) beside the live ones; `verify` checks their hashes too."""
    model = torch.nn.Linear(3, 2)
    ck = stethoscope.Checkpoints(tmp_path / "checkpoints", keep_last=None, extra={"model": model}, on_signal=None,
                                 strict=True)
    for s in (100, 170):
        ck.save(s, wait=True)
    assert ck.rollback(150) == 100
    ck.close()
    code, out = _ckpt("list", str(tmp_path), "--json")
    rows = {r["step"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == {100, 170}
    assert rows[170]["status"] == "superseded" and rows[100]["status"] == "unverified"
    code, out = _ckpt("verify", str(tmp_path), "--json")
    assert code == 0 and {r["step"]: r["status"] for r in json.loads(out)} == {100: "ok", 170: "ok"}


def test_inspect_a_folder_of_checkpoints_a_run_folder_and_a_lightning_file(tmp_path):
    """user-trial-3: `ckpt inspect` of the checkpoint folder (ckpt/, an HF output_dir) described every step's
    files as one checkpoint; of a run folder it printed an empty 'checkpoint' and exit 0; of Lightning's
    `.ckpt` file it listed no tensor."""
    root = _ours(tmp_path / "ckpt", range(1, 4))
    code, out = _ckpt("inspect", str(root))
    assert code == 0 and "holds 3 checkpoints; the newest, step-00000003, is inspected" in out
    assert "step-00000003" in out and "step-00000001" not in out.split("is inspected")[1]
    code, out = _ckpt("inspect", str(tmp_path))  # a run folder holding ckpt/: as `ckpt list RUN`
    assert code == 0 and "the newest, step-00000003, is inspected" in out
    run = tmp_path / "run"
    with stethoscope.Monitor(str(run)) as mon:
        mon.step(0, loss=1.0)
    code, out = _ckpt("inspect", str(run))
    assert code == 2 and out.count("\n") == 1 and "no checkpoint here" in out and str(run) in out
    lightning = tmp_path / "epoch=2-step=80.ckpt"
    torch.save({"epoch": 2, "global_step": 80, "state_dict": {"net.0.weight": torch.zeros(4, 3)}}, lightning)
    code, out = _ckpt("inspect", str(lightning))
    assert code == 0 and "state_dict.net.0.weight" in out and "4x3" in out
