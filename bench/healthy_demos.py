"""False alarms on healthy runs: the demo's tiny GPT trained without a fault, N seeds, alerts on.

    python bench/healthy_demos.py [--seeds 20] [--first-seed 0] [--steps 1000] [--out DIR] [--keep] [--json]

Each run is `stethoscope demo --seed S` (the same `demo.run.run`, torch on one thread) with an
in-memory alert channel, on whatever else the machine is doing: machine jitter, other processes
taking the CPU, evals, GC. Nothing is wrong with these runs, so every finding at warning or above
and every alert is a false alarm; the target is 0 of each. Prints one line per run (its findings at
warning or above, its alerts, its wall time) and the totals; `--json` prints them as one object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from stethoscope.records import severity_rank  # noqa: E402


def one_run(out: Path, seed: int, steps: int) -> dict[str, Any]:
    """Train one healthy demo run into `out` with alerts going to memory; what it found and paged."""
    from stethoscope.act.channels.memory import MemoryChannel
    from stethoscope.act.config import AlertsConfig
    from stethoscope.demo.run import DemoConfig, run
    from stethoscope.diagnose.stored import run_findings
    from stethoscope.store.query import open_run

    channel = MemoryChannel()
    t0 = time.perf_counter()
    run(out, DemoConfig(steps=steps, seed=seed), None, AlertsConfig([channel]))
    seconds = time.perf_counter() - t0
    with open_run(out) as reader:
        findings = run_findings(reader)
    serious = [f for f in findings if severity_rank(f.severity) >= severity_rank("warning")]
    alerts = [a for a in channel.sent if a.kind in ("trigger", "escalate")]
    return {"seed": seed, "steps": steps, "seconds": round(seconds, 1),
            "warnings": [f"{f.severity} {f.type}@{f.step}: {f.message}" for f in serious],
            "alerts": [f"{getattr(a, 'severity', '?')} {getattr(a, 'type', '?')}@{getattr(a, 'step', '?')}"
                       for a in alerts],
            "info": sorted({f.type for f in findings if f.severity == "info"})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20, help="how many seeds (from --first-seed) [20]")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1000, help="steps per run [1000]")
    p.add_argument("--out", type=Path, default=None, help="where the runs go [a temporary folder]")
    p.add_argument("--keep", action="store_true", help="keep the run folders (with --out)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    root = args.out or Path(tempfile.mkdtemp(prefix="healthy-demos-"))
    rows = []
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            out = root / f"seed-{seed}"
            shutil.rmtree(out, ignore_errors=True)
            row = one_run(out, seed, args.steps)
            rows.append(row)
            if not args.json:
                print(f"seed {seed:2d}: {len(row['warnings'])} findings >= warning, {len(row['alerts'])} alerts "
                      f"({row['seconds']:.0f} s; info: {', '.join(row['info']) or '-'})", flush=True)
                for line in row["warnings"] + [f"alert {a}" for a in row["alerts"]]:
                    print(f"    {line}", flush=True)
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if not args.keep and args.out is None:
            shutil.rmtree(root, ignore_errors=True)
    total = {"runs": len(rows), "steps": args.steps, "findings_warning_or_above": sum(len(r["warnings"]) for r in rows),
             "alerts": sum(len(r["alerts"]) for r in rows),
             "runs_with_a_false_alarm": sum(bool(r["warnings"] or r["alerts"]) for r in rows)}
    if args.json:
        print(json.dumps({"total": total, "runs": rows}, indent=1))
    else:
        print(f"\n{total['runs']} healthy runs x {args.steps} steps: {total['findings_warning_or_above']} findings at "
              f"warning or above, {total['alerts']} alerts, {total['runs_with_a_false_alarm']} runs with a false "
              "alarm (target: 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
