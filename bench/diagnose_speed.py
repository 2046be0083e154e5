"""`stethoscope diagnose` on 1,000,000-step logs, against the cost of merely parsing them.

Generates a trainer_state.json (HF Trainer, logging every step; compact, `_i2` as the Trainer writes
it: indent=2, sorted keys, and `_noisy`: compact, with a loss that varies +-20% from step to step as a
small-batch fine-tune's does) and a Megatron-DeepSpeed iteration log of a healthy run with one injected
loss spike. Per format it prints the medians of interleaved
repeats (the machine is shared and noisy: only ratios taken in one run compare):

    baseline  json.load of the file / a bare `for line in f: line.split()` loop over its lines
    read      reading the file's bytes
    parse     stethoscope.importers.registry.read_any (sniff, read, parse into columns) minus `read`
    detect    stethoscope.diagnose.engine.diagnose_run: pivot, replay the detectors, classify, advise
    render    the CLI's --json rendering of the diagnosis
    total     read_any + detect + render in this process, and total / baseline (the target: <= 1)
    cli       `stethoscope diagnose PATH --json` in a fresh process (interpreter start included),
              and cli / baseline

Wall-clock seconds; each ratio is the median over the rounds of that round's ratio, with its range in
brackets, also in CPU seconds (`cpu xN`: this process's, or the child's for the CLI), which other jobs
on the machine disturb less. It also checks that the spike was found, and counts the findings at
warning or above (1: the spike alone).

    python bench/diagnose_speed.py [--steps 1000000] [--repeats 3] [--dir DIR] [--no-cli]

`--against TREE` (a checkout of another commit, its extension built: `python setup.py build_ext --inplace`)
times both trees instead, in fresh processes interleaved round by round (the order alternating), each
against a split loop timed in the same process: total / split per tree with its range, and after / before.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from stethoscope.cli import render  # noqa: E402
from stethoscope.diagnose.engine import diagnose_run  # noqa: E402
from stethoscope.importers.registry import read_any  # noqa: E402


def _loss(step: int, rng: random.Random, spike: int, noise: float = 0.0) -> float:
    base = 2.0 + 4.0 * math.exp(-step / 20_000) + rng.gauss(0, 0.01)
    if noise:
        base *= 1 + noise * rng.uniform(-1, 1)
    return base * (2.5 if spike <= step < spike + 3 else 1.0)


def trainer_state(path: Path, steps: int, spike: int, indent: int | None = None, noise: float = 0.0) -> None:
    rng = random.Random(0)
    rows = [{"epoch": round(s / steps, 6), "grad_norm": 0.3 + rng.random() * 0.05, "learning_rate": 3e-4,
             "loss": round(_loss(s, rng, spike, noise), 4), "step": s} for s in range(1, steps + 1)]
    state = {"global_step": steps, "max_steps": steps, "log_history": rows}
    path.write_text(json.dumps(state, indent=indent, sort_keys=indent is not None))


def trainer_state_indented(path: Path, steps: int, spike: int) -> None:
    """As the Trainer writes it: indent=2, sorted keys."""
    trainer_state(path, steps, spike, indent=2)


def trainer_state_noisy(path: Path, steps: int, spike: int) -> None:
    """A loss that varies +-20% from step to step, as a small-batch fine-tune logs it every step."""
    trainer_state(path, steps, spike, noise=0.2)


def megatron(path: Path, steps: int, spike: int) -> None:
    rng = random.Random(1)
    with path.open("w") as f:
        for s in range(1, steps + 1):
            f.write(f" iteration {s:8d}/ {steps:8d} | consumed samples: {s * 512:12d} | elapsed time per iteration "
                    f"(ms): {1000 + rng.random() * 10:.1f} | learning rate: 3.000E-04 | global batch size:   512 | "
                    f"lm loss: {_loss(s, rng, spike):.6E} | loss scale: 65536.0 | grad norm: {0.3 + rng.random() * 0.05:.3f} | "
                    "number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def json_baseline(path: Path) -> None:
    with path.open() as f:
        json.load(f)


def split_baseline(path: Path) -> None:
    with path.open() as f:
        for line in f:
            line.split()


FORMATS: dict[str, tuple[Callable[[Path, int, int], None], Callable[[Path], None]]] = {
    "trainer_state.json": (trainer_state, json_baseline),
    "trainer_state_i2.json": (trainer_state_indented, json_baseline),
    "trainer_state_noisy.json": (trainer_state_noisy, json_baseline),
    "megatron.log": (megatron, split_baseline),
}


def _timed(fn: Callable[[], object], times: dict[str, float], phase: str) -> object:
    """Run fn; record its wall seconds as `phase` and its CPU seconds as `phase~cpu`."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    times[phase], times[phase + "~cpu"] = time.perf_counter() - t0, time.process_time() - c0
    return out


def in_process(path: Path, times: dict[str, float]) -> dict:
    """Seconds per phase of one in-process diagnosis into `times`; its --json dict."""
    _timed(path.read_bytes, times, "io")
    runs = _timed(lambda: read_any(path), times, "import")
    diagnosis = _timed(lambda: diagnose_run(runs[0]), times, "detect")
    text = _timed(lambda: render.to_json(diagnosis.to_dict()), times, "render")
    for clock in ("", "~cpu"):
        times["total" + clock] = sum(times[p + clock] for p in ("import", "detect", "render"))
    return json.loads(str(text))


def cli(path: Path, times: dict[str, float]) -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "stethoscope.cli.main", "diagnose", str(path), "--json"],
                         capture_output=True, text=True, env=env)
    times["cli"] = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    times["cli~cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if res.returncode not in (0, 1):  # 1: findings at or above --fail-on
        raise SystemExit(f"diagnose failed: {res.stderr[-2000:]}")


def one_round(path: Path, baseline: Callable[[Path], None], with_cli: bool) -> tuple[dict[str, float], dict]:
    times: dict[str, float] = {}
    _timed(lambda: baseline(path), times, "baseline")
    gc.collect()
    out = in_process(path, times)
    gc.collect()
    if with_cli:
        cli(path, times)
    return times, out


def _spread(times: dict[str, list[float]], phase: str) -> str:
    """The median ratio phase / baseline over the rounds, and its range, wall and CPU."""
    out = []
    for clock in ("", "~cpu"):
        ratios = [t / b for t, b in zip(times[phase + clock], times["baseline" + clock])]
        out.append(f"{'cpu ' if clock else ''}x{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]")
    return ", ".join(out)


def report(name: str, path: Path, times: dict[str, list[float]], out: dict, spike: int) -> None:
    med = {k: statistics.median(v) for k, v in times.items()}
    base, cpu = med["baseline"], med["baseline~cpu"]
    parse = statistics.median(i - r for i, r in zip(times["import"], times["io"]))
    split = f"read {med['io']:.2f}  parse {parse:.2f}  detect {med['detect']:.2f}  render {med['render']:.3f}"
    cli_part = f"  cli {med['cli']:.2f} s ({_spread(times, 'cli')})" if "cli" in med else ""
    spikes = [f["step"] for f in out["findings"] if f["type"] == "loss_spike" and f["severity"] != "info"]
    serious = sum(f["severity"] not in ("info", "debug") for f in out["findings"])
    print(f"  {name:19s} {path.stat().st_size / 2**20:6.1f} MiB  baseline {base:.2f} s (cpu {cpu:.2f})  |  {split}  |  "
          f"total {med['total']:.2f} s ({_spread(times, 'total')}){cli_part}")
    print(f"  {'':19s} steps={out['steps']:,}  loss_spike found at {spikes[:3]} (injected at {spike}); "
          f"{serious} finding(s) at warning or above")


def files(folder: Path, steps: int, spike: int, names: list[str]) -> dict[str, Path]:
    """The generated logs under folder/<steps>/, reused when already there."""
    out = {}
    for name in names:
        make = FORMATS[name][0]
        path = folder / str(steps) / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            make(path, steps, spike)
        out[name] = path
    return out


_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from stethoscope.cli import render
from stethoscope.diagnose.engine import diagnose_run
from stethoscope.importers.registry import read_any
path = Path(sys.argv[2])
t0, c0 = time.perf_counter(), time.process_time()
with path.open() as f:
    for line in f:
        line.split()
t1, c1 = time.perf_counter(), time.process_time()
diagnosis = diagnose_run(read_any(path)[0])
render.to_json(diagnosis.to_dict())
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps([t1 - t0, t2 - t1, c1 - c0, c2 - c1, [(f.type, f.severity, f.step) for f in diagnosis.findings]]))
"""


def against(paths: dict[str, Path], other: Path, repeats: int) -> None:
    """This tree and `other`, each diagnosing every log in fresh processes, interleaved."""
    trees = {"before": str(other.resolve() / "src"), "after": str(SRC)}
    for name, path in paths.items():
        got: dict[str, list[list]] = {tree: [] for tree in trees}
        for r in range(repeats):
            for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                res = subprocess.run([sys.executable, "-c", _CHILD, trees[tree], str(path)], capture_output=True,
                                     text=True, env=dict(os.environ, PYTHONPATH=""))
                if res.returncode:
                    raise SystemExit(f"{tree}: {res.stderr[-2000:]}")
                got[tree].append(json.loads(res.stdout))
        print(f"  {name} ({path.stat().st_size / 2**20:.1f} MiB), {repeats} interleaved rounds, fresh processes:")
        for tree, rows in got.items():
            wall = [row[1] / row[0] for row in rows]
            cpu = [row[3] / row[2] for row in rows]
            print(f"    {tree:6s} diagnose / split loop x{statistics.median(wall):.2f} [{min(wall):.2f}-{max(wall):.2f}], "
                  f"cpu x{statistics.median(cpu):.2f} [{min(cpu):.2f}-{max(cpu):.2f}]  (diagnose "
                  f"{statistics.median(row[1] for row in rows):.2f} s, split {statistics.median(row[0] for row in rows):.2f} s)")
        speed = [a[1] / b[1] for a, b in zip(got["after"], got["before"])]
        same = all(a[4] == b[4] for a, b in zip(got["after"], got["before"]))
        print(f"    after / before x{statistics.median(speed):.2f} [{min(speed):.2f}-{max(speed):.2f}]; "
              f"findings {'the same' if same else 'DIFFER'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, help="keep the generated logs here (and reuse them next time)")
    ap.add_argument("--no-cli", action="store_true", help="skip the fresh-process runs")
    ap.add_argument("--only", choices=sorted(FORMATS), action="append", help="measure only this log (repeatable)")
    ap.add_argument("--against", type=Path, metavar="TREE", help="compare with another checkout (see above)")
    args = ap.parse_args()
    spike = args.steps // 2
    with tempfile.TemporaryDirectory() as tmp:
        paths = files(args.dir or Path(tmp), args.steps, spike, args.only or list(FORMATS))
        if args.against:
            return against(paths, args.against, args.repeats)
        times: dict[str, dict[str, list[float]]] = {name: {} for name in paths}
        outs: dict[str, dict] = {}
        for _ in range(args.repeats):  # interleaved: a burst of load hits every phase alike
            for name, path in paths.items():
                got, outs[name] = one_round(path, FORMATS[name][1], not args.no_cli)
                for phase, seconds in got.items():
                    times[name].setdefault(phase, []).append(seconds)
        print(f"stethoscope diagnose on {args.steps:,}-step logs: seconds, median of {args.repeats} interleaved "
              "repeats; (xN) = time / baseline")
        for name, path in paths.items():
            report(name, path, times[name], outs[name], spike)


if __name__ == "__main__":
    main()
