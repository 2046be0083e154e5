"""Checkpoint save and verify speed against plain torch.save, on ≥ 200 MB of training state (issue 11).

Prints medians of interleaved rounds (one round: plain torch.save, torch.save + fsync, our sync save,
our async save's blocking time), the ratios the issue asks for (save ≤ 1.2× plain torch.save, verify
≥ 1 GB/s, async blocking ≤ 25% of sync), and the stdlib hashes' speed. One torch thread. Verify reads
from the page cache (just written): it measures the hashing, not the disk.

Usage: python bench/checkpoint_speed.py [--mb 200] [--rounds 5] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
import zlib
from pathlib import Path

import torch

from stethoscope.checkpoint import Checkpoints
from stethoscope.checkpoint.manifest import verify


def state(mb: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A model with `mb`/3 MB of weights and an Adam that has stepped once (2 moments): `mb` MB in all."""
    n = max(1, -(-mb * (1 << 20) // (3 * 4 * 4096 * 1024)))  # rounded up: at least `mb`
    model = torch.nn.Sequential(*[torch.nn.Linear(4096, 1024, bias=False) for _ in range(n)])
    opt = torch.optim.Adam(model.parameters())
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    return model, opt


def plain(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, fsync: bool) -> float:
    t = time.perf_counter()
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    return time.perf_counter() - t


def ours(ck: Checkpoints, step: int) -> tuple[float, float]:
    t = time.perf_counter()
    ck.save(step)
    blocking = time.perf_counter() - t
    ck.wait()
    return blocking, time.perf_counter() - t


def hash_speeds(mb: int = 256) -> dict[str, float]:
    data = os.urandom(mb << 20)
    out = {}
    for name, fn in (("crc32", zlib.crc32), ("sha256", lambda b: hashlib.sha256(b).digest()),
                     ("blake2b", lambda b: hashlib.blake2b(b).digest()), ("md5", lambda b: hashlib.md5(b).digest())):
        t = time.perf_counter()
        fn(data)
        out[name] = mb / 1024 / (time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, opt = state(args.mb)
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    nbytes += sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values() if v.dim())
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        sync = Checkpoints(root / "sync", keep_last=1, extra={"model": model, "optimizer": opt}, on_signal=None,
                           strict=True)
        asyn = Checkpoints(root / "async", keep_last=1, extra={"model": model, "optimizer": opt}, on_signal=None,
                           strict=True, async_save=True)
        r: dict[str, list[float]] = {k: [] for k in ("plain", "plain_fsync", "sync", "async_block", "async_total",
                                                      "verify")}
        for i in range(1, args.rounds + 1):  # interleaved: each round measures every variant once
            r["plain"].append(plain(root / "plain.pt", model, opt, fsync=False))
            r["plain_fsync"].append(plain(root / "plain.pt", model, opt, fsync=True))
            r["sync"].append(ours(sync, i)[1])
            block, total = ours(asyn, i)
            r["async_block"].append(block)
            r["async_total"].append(total)
            t = time.perf_counter()
            _, why = verify(sync.list()[-1].path)
            r["verify"].append(time.perf_counter() - t)
            assert why is None, why
        sync.close()
        asyn.close()
    med = {k: statistics.median(v) for k, v in r.items()}
    gb = nbytes / (1 << 30)
    print(f"state: {nbytes / (1 << 20):.0f} MiB, {args.rounds} interleaved rounds, medians, 1 torch thread")
    for k in ("plain", "plain_fsync", "sync", "async_block", "async_total", "verify"):
        print(f"  {k:12s} {med[k]:.3f} s")
    print(f"save / plain torch.save          {med['sync'] / med['plain']:.2f}x   (target <= 1.2x)")
    print(f"save / torch.save + fsync        {med['sync'] / med['plain_fsync']:.2f}x")
    print(f"verify                           {gb / med['verify']:.2f} GB/s (target >= 1 GB/s; page cache)")
    print(f"async blocking / sync save       {med['async_block'] / med['sync']:.0%}   (target <= 25%)")
    speeds = hash_speeds()
    print("hash speed, one core: " + ", ".join(f"{k} {v:.2f} GB/s" for k, v in speeds.items()))


if __name__ == "__main__":
    main()
