"""Labelled logs of REAL training libraries with faults injected through their own hooks.

    /tmp/trainers/bin/python bench/real_trainers/make_logs.py [--libs hf_trainer,lightning_trainer,...]
                                                          [--faults ...] [--seeds 0,1,2,3] [--out DIR]

Each library runs in its own process (its imports, its console). Every run's console output is
captured from file descriptors 1 and 2 exactly as the library prints it (progress bars included),
beside any log file the library writes itself; `labels.json` in the output folder lists every log
with its library, fault, seed, split (fixed in `common.SPLITS` before scoring) and labels.
The libraries live in their own virtual environment, never in the project's:
    python3 -m venv /tmp/trainers && /tmp/trainers/bin/pip install torch==2.13.0 transformers==5.24.0 accelerate
        lightning==2.6.6 keras pytorch-ignite skorch mmengine   (one command; KERAS_BACKEND=torch is set here)
"""

from __future__ import annotations

import argparse
import functools
import gzip
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
REPO = HERE.parents[1]
OUT = REPO / "tests" / "assets" / "real_trainers"
LIBRARIES = ("hf_trainer", "lightning_trainer", "keras_fit", "ignite_engine", "skorch_net", "mmengine_runner")


def gzipped(path: Path) -> Path:
    """The log gzipped, byte for byte what the library wrote (stethoscope reads .gz; the repository stays small)."""
    gz = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.open(gz, "wb", compresslevel=9) as dst:
        dst.write(src.read())
    path.unlink()
    return gz


def run_library(lib: str, faults: list[str], seeds: list[int], out: Path) -> list[dict]:
    import torch
    from common import Plan, labels, onset_for

    torch.set_num_threads(1)
    mod = importlib.import_module(lib)
    rows = []
    for seed in seeds:
        for fault in faults:
            plan = Plan(lib, fault, seed)
            plan.onset = onset_for(plan, mod.total_steps(plan))
            if plan.onset is not None and getattr(mod, "FIRST", 1) == 1:
                plan.onset = max(plan.onset, 1)
            folder = out / plan.name
            folder.mkdir(parents=True, exist_ok=True)
            t0 = time.time()
            files = mod.run(plan, folder)
            for source, path in files.items():
                path = gzipped(path)
                at = getattr(mod, "at", {}).get(source)
                at = functools.partial(at, plan) if at else lambda kind, n: n
                lab = labels(plan, mod.SHOWS[source], at)
                rows.append({"case": f"{plan.name}-{source}", "library": lib, "fault": fault, "seed": seed,
                             "split": plan.split, "source": source, "file": str(path.relative_to(out)),
                             "onset": plan.onset, **lab,
                             "logged_loss": [[at("end", k), v] for k, v in plan.observed.get("losses", [])],
                             "logged_eval": [[at("end", k), v] for k, v in plan.observed.get("evals", [])]})
            print(f"{plan.name}: {time.time() - t0:.1f}s onset {plan.onset} labels "
                  f"{[(lb['type'], lb['step']) for lb in lab['labels']]}", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    from common import FAULTS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--libs", default=",".join(LIBRARIES))
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one library
    args = ap.parse_args()
    faults, seeds = args.faults.split(","), [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.one:
        rows = run_library(args.one, faults, seeds, args.out)
        (args.out / f".rows-{args.one}.json").write_text(json.dumps(rows))
        return
    env = {**os.environ, "KERAS_BACKEND": "torch", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    for lib in args.libs.split(","):
        subprocess.run([sys.executable, __file__, "--one", lib, "--faults", args.faults, "--seeds", args.seeds,
                        "--out", str(args.out)], check=True, env=env)
    index = args.out / "labels.json"
    rows = json.loads(index.read_text()) if index.exists() else []
    for lib in args.libs.split(","):
        part = args.out / f".rows-{lib}.json"
        new = json.loads(part.read_text())
        keys = {r["case"] for r in new}
        rows = [r for r in rows if r["case"] not in keys] + new
        part.unlink()
    index.write_text("[\n" + ",\n".join(json.dumps(r) for r in sorted(rows, key=lambda r: r["case"])) + "\n]\n")


if __name__ == "__main__":
    main()
