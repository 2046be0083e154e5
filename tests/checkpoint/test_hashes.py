"""The manifest's hash: XXH3 by default, CRC-32 and sha256 on request; old CRC-32 checkpoints still load."""

from __future__ import annotations

import sys

import torch

import stethoscope
from stethoscope.checkpoint.manifest import read_manifest, verify


def _save(tmp_path, **options):
    model = torch.nn.Linear(64, 64)
    ck = stethoscope.Checkpoints(tmp_path / "ck", extra={"model": model}, on_signal=None, strict=True, **options)
    path = ck.save(3, wait=True)
    return model, path


def test_default_is_xxh3_and_a_crc32_checkpoint_still_verifies_and_loads(tmp_path):
    _, path = _save(tmp_path)
    body = read_manifest(path)
    assert body["hash"] == "xxh3" and all(len(h) == 16 for f in body["files"].values() for h in f["chunks"])
    model, old = _save(tmp_path / "old", hash="crc32")
    assert read_manifest(old)["hash"] == "crc32" and verify(old)[1] is None
    state = stethoscope.Checkpoints(tmp_path / "old" / "ck", on_signal=None).load_latest()  # default config: xxh3
    assert state["step"] == 3 and torch.equal(state["model"]["weight"], model.weight.detach())


def test_a_flipped_bit_fails_xxh3(tmp_path):
    _, path = _save(tmp_path)
    f = path / "model.pt"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x10
    f.write_bytes(bytes(data))
    assert "does not match its hash" in verify(path)[1]


def test_xxh3_without_xxhash_says_what_to_install(tmp_path, monkeypatch):
    _, path = _save(tmp_path)
    monkeypatch.setitem(sys.modules, "xxhash", None)  # as if the package were not installed
    assert verify(path)[1] == "this checkpoint is hashed with XXH3: pip install xxhash to verify it"
    assert stethoscope.Checkpoints(tmp_path / "x", on_signal=None).config.hash == "crc32"  # the fallback


def test_saves_skip_torchs_zip_crc_and_leave_its_setting_as_it_was(tmp_path):
    """torch.save's CRC-32 of every record halves a save's speed; the manifest's hashes check every byte."""
    import zipfile

    model, path = _save(tmp_path)
    with zipfile.ZipFile(path / "model.pt") as archive:
        assert {i.CRC for i in archive.infolist() if i.file_size} == {0}
    assert torch.serialization.get_crc32_options() is True  # the user's own torch.save still writes them
    state = torch.load(path / "model.pt", weights_only=True)
    assert torch.equal(state["weight"], model.weight.detach())
    torch.serialization.set_crc32_options(False)
    try:
        _save(tmp_path / "again")
        assert torch.serialization.get_crc32_options() is False  # a setting made by the user stays
    finally:
        torch.serialization.set_crc32_options(True)


def test_saves_on_two_threads_leave_each_threads_zip_crc_setting_as_it_was():
    """torch keeps `set_crc32_options` per thread: a save on the writer thread overlapping one on the training
    thread must put back each thread's own setting (a process-wide count left the training thread's off, and
    the user's later torch.save wrote no CRC-32)."""
    import threading

    from stethoscope.checkpoint.disk import _without_zip_crc

    inside, release, seen = threading.Event(), threading.Event(), {}

    def writer() -> None:
        with _without_zip_crc(torch):
            seen["writer, inside"] = torch.serialization.get_crc32_options()
            inside.set()
            release.wait(10)
        seen["writer, after"] = torch.serialization.get_crc32_options()

    with _without_zip_crc(torch):  # the training thread's save begins first ...
        seen["main, inside"] = torch.serialization.get_crc32_options()
        t = threading.Thread(target=writer)
        t.start()
        assert inside.wait(10)
    release.set()  # ... and ends while the writer thread's is still running
    t.join(10)
    assert seen == {"main, inside": False, "writer, inside": False, "writer, after": True}
    assert torch.serialization.get_crc32_options() is True
