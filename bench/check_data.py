"""How fast `stethoscope check-data` reads a large JSONL file.

Generates (once, cached in bench/.cache/) a ~1 GB JSONL of chat-format SFT rows (~1 KB each, a mix of
`messages` rows and prompt/completion rows, with duplicates, empty rows and fully masked labels
planted), then times the whole CLI in a fresh process (`check-data FILE --json --max-len 2048`) and,
in this process, the bare read+parse with orjson (the floor any checker pays), interleaved round by
round. Prints seconds, MB/s and the ratio check/read per round, and their medians.

    python bench/check_data.py [--mb 1024] [--rounds 3] [--near minhash]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stethoscope.debug.datacheck.read import open_source, rows  # noqa: E402

WORDS = ("the model loss gradient batch token layer attention learning rate step checkpoint data eval train "
         "warmup schedule optimizer memory shard rank node cluster kernel tensor float precision mixed scale "
         "answer question explain why how what when where which python code function return value error").split()


def generate(path: Path, target_mb: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    words = np.array(WORDS)
    tmp = path.with_suffix(".part")
    written, i = 0, 0
    with open(tmp, "wb") as f:
        while written < target_mb << 20:
            picks = words[rng.integers(0, len(words), size=(1000, 170))]
            lines = []
            for k in range(1000):
                n = i + k
                text = " ".join(picks[k])
                if n % 2:
                    row = {"messages": [{"role": "user", "content": f"Question {n}: {text[:300]}"},
                                        {"role": "assistant", "content": text[300:] if n % 1001 else ""}]}
                else:
                    row = {"prompt": f"Question {n}: {text[:300]}", "completion": text[300:], "id": n}
                if n % 5003 == 0:
                    row = {"text": "", "id": n}
                line = orjson.dumps(row)
                lines.append(lines[-1] if n % 97 == 0 and lines else line)  # a planted duplicate of the row before
            chunk = b"\n".join(lines) + b"\n"
            f.write(chunk)
            written += len(chunk)
            i += 1000
    os.replace(tmp, path)


def time_cli(path: Path, near: str = "normalized") -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the whole CLI in a fresh process."""
    t0, cpu0 = time.perf_counter(), _children_cpu()
    res = subprocess.run([sys.executable, "-m", "stethoscope.cli.main", "check-data", str(path), "--json",
                          "--max-len", "2048", "--near", near], capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"check-data failed: {res.stderr.decode()[-500:]}")
    return elapsed, _children_cpu() - cpu0


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def time_read(path: Path) -> tuple[float, float]:
    t0, cpu0 = time.perf_counter(), time.process_time()
    n = sum(1 for _ in rows(open_source(path)))
    assert n > 0
    return time.perf_counter() - t0, time.process_time() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--near", choices=["normalized", "minhash"], default="normalized")
    args = ap.parse_args()
    cache = ROOT / "bench" / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"check_data_{args.mb}mb.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        generate(path, args.mb)
        print(f"generated {path} in {time.perf_counter() - t0:.1f}s")
    mb = path.stat().st_size / 1e6
    print(f"{path.name}: {mb:,.0f} MB, {os.cpu_count()} cores")
    clis, reads = [], []
    for r in range(args.rounds):
        reads.append(time_read(path))
        clis.append(time_cli(path, args.near))
        (cw, cc), (rw, rc) = clis[-1], reads[-1]
        print(f"round {r}: check-data {cw:.1f}s wall ({mb / cw:.0f} MB/s), {cc:.1f}s CPU ({mb / cc:.0f} MB/s) · "
              f"read+parse only {rw:.1f}s wall, {rc:.1f}s CPU · CPU ratio {cc / rc:.2f} · load {os.getloadavg()[0]:.1f}")
    cw, cc = (statistics.median(c[k] for c in clis) for k in (0, 1))
    rw, rc = (statistics.median(c[k] for c in reads) for k in (0, 1))
    print(f"median: check-data {cw:.1f}s wall = {mb / cw:.0f} MB/s, {cc:.1f}s CPU = {mb / cc:.0f} MB/s; "
          f"read+parse {rw:.1f}s wall, {rc:.1f}s CPU; CPU ratio {statistics.median(a[1] / b[1] for a, b in zip(clis, reads)):.2f}"
          " (CPU seconds are what an idle core would take: the wall clock depends on the other work on the box)")


if __name__ == "__main__":
    main()
