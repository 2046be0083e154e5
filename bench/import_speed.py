"""Import speed of the two big foreign formats (target: ≤ 2.5 s each for 1,000,000 steps on this machine).

Generates, in a temp dir, a 1,000,000-iteration Megatron-DeepSpeed log (BLOOM's line shape, with the
`[default7]:` rank prefix, a `time (ms)` line every 1000 iterations, an OVERFLOW line now and then)
and a 1,000,000-row trainer_state.json written the way the HF Trainer writes it (indent=2,
sort_keys), then times `read_any` on each in a fresh process (the median of --repeats runs).

Then the general console-log reader (`importers/console.py`) on a 1,000,000-line log of each line shape
it reads, in MB/s next to the Megatron reader's MB/s on its log (target: at least as fast per MB), the
two timed in interleaved rounds (a shape's ratio against the Megatron time of its own round, the median
over rounds, with the spread), and next to the Megatron reader without the native line scanner
(`STETHOSCOPE_NATIVE=0`: its regex path, the reader as it was before the scanner; column `regex`):
`key: value` (torchtitan, with ANSI colours, rank and logger prefixes, `15,723`, `0.33GiB(1.41%)`),
`| key value |` (llm.c), `key=value` with units, dict reprs (the HF Trainer's, no step counter), Keras
progress lines, and Composer's blocks (a `[batch=N/T]:` header, one metric per line).

What is timed, in both arms alike: the read in a fresh process, from after the reader's module is imported
to the run it returns (interpreter start and the stethoscope imports left out); numpy, which both readers
import on their first read, counts (about 0.09 s here), and so do the first read's page faults. A cost paid
once per read weighs per MB in inverse proportion to the log's size, and the shapes' logs are 32-226 MiB
against Megatron's 362 MiB: so each shape is also timed with numpy imported before the clock starts, in
both arms (column `numpy first`), the ratio of what the reading itself costs per MB.

Both arms run a copy of the source tree with its bytecode compiled first, as an installed package has it:
where PYTHONDONTWRITEBYTECODE is set (this machine), a module a read imports lazily (the console reader's
`console_segment`, 2-8 ms by the load; the Megatron reader's `coded`, ~1-2 ms) would otherwise be compiled from source
inside the clock in every fresh process; `--source` times the source tree as it is (the figures before 28.4's
third round were taken so).

Each shape's row also gives `cpu`: the same ratio per CPU second of the read (all its threads, from
`time.process_time()` in the child), steadier than the wall's on a shared machine; `BELOW 0.5` marks a shape
under issue 28.4's target. In its brackets, `numpy first` is that CPU ratio with numpy imported before the
clock in both arms: numpy's import (~0.07-0.1 s of CPU here, OpenBLAS' threads spinning up included) is the
same in both, a third of a 32 MiB Composer log's read and a seventh of Megatron's 362 MiB. `--against TREE`
times another checkout (its `src/`, the extension built in place; compiled like this one) in the same rounds
and prints each shape's time here over there (issue 26's acceptance: the known shapes within 10% of before;
judged on the CPU median) and both trees' ratios.

    python bench/import_speed.py [--steps 1000000] [--repeats 3] [--console-lines 1000000] [--only-console]
                                 [--source] [--against TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
_CHILD_CONSOLE = """
import sys, time
from pathlib import Path
from stethoscope.importers.console import ConsoleImporter
if sys.argv[2:] == ["numpy"]:
    import numpy
t0, c0 = time.perf_counter(), time.process_time()
run = ConsoleImporter().read(Path(sys.argv[1]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0  # (then the counts: points laid out if kept as parts)
print(wall, run.n_points, run.steps, cpu)
"""
_CHILD = """
import sys, time
from pathlib import Path
from stethoscope.importers import read_any
if sys.argv[2:] == ["numpy"]:
    import numpy
t0, c0 = time.perf_counter(), time.process_time()
(run,) = read_any(Path(sys.argv[1]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(wall, len(run.points), run.steps, cpu)
"""


def megatron(path: Path, steps: int) -> int:
    rng = random.Random(1)
    lines = 0
    with path.open("w") as f:
        for s in range(1, steps + 1):
            f.write(f"[default7]: iteration {s:8d}/ {steps:8d} | consumed samples: {s * 2048:12d} | consumed tokens: "
                    f"{s * 2048 * 2048:14d} | elapsed time per iteration (s): {105 + rng.random():.2f} | learning rate: "
                    f"{6e-5 * (1 - s / steps / 2):.3E} | global batch size:  2048 | lm loss: {2 + rng.random():.6E} | "
                    f"grad norm: {0.1 + rng.random():.3f} | num zeros: 0.0 | number of skipped iterations:   0 | "
                    f"number of nan iterations:   0 | samples per second: {19 + rng.random():.3f} | TFLOPs: "
                    f"{147 + rng.random():.2f} |\n")
            lines += 1
            if s % 1000 == 0:
                f.write("[default7]:time (ms)\n")
                lines += 1
            if s % 50_000 == 0:
                f.write("[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! Rank 0 "
                        "Skipping step. Attempted loss scale: 65536.0, reducing to 32768.0\n")
                lines += 1
    return lines


def trainer_state(path: Path, steps: int) -> int:
    rng = random.Random(0)
    rows = [{"epoch": round(s / steps * 3, 4), "grad_norm": 0.3 + rng.random() * 0.05,
             "learning_rate": 3e-4 * (1 - s / steps), "loss": round(2 + rng.random(), 4), "step": s}
            for s in range(1, steps + 1)]
    state = {"best_metric": None, "epoch": 3.0, "global_step": steps, "log_history": rows, "logging_steps": 1,
             "max_steps": steps, "num_train_epochs": 3, "train_batch_size": 8}
    path.write_text(json.dumps(state, indent=2, sort_keys=True))
    return steps


def _titan(f, s: int, rng: random.Random) -> None:
    f.write(f"[rank0]:[titan] 2024-07-24 {11 + s // 3600 % 12:02d}:{s // 60 % 60:02d}:{s % 60:02d},402 - root - INFO - "
            f"\x1b[31mstep: {s:2}  \x1b[32mloss: {2 + rng.random():8.5f}  \x1b[38;2;180;60;0mgrad_norm: "
            f"{rng.random():7.4f}  \x1b[38;2;54;234;195mmemory: {30 + rng.random():5.2f}GiB(41.20%)  \x1b[34mtps: "
            f"{round(15000 + rng.random() * 1000):,}  \x1b[36mtflops: {100 + rng.random():,.2f}  \x1b[35mmfu: "
            f"{40 + rng.random():.2f}%\x1b[39m\n")


def _llmc(f, s: int, rng: random.Random) -> None:
    f.write(f"step {s:4d}/1000000 | train loss {2 + rng.random():7.6f} | norm {rng.random():6.4f} | lr "
            f"{6e-4 * rng.random():.2e} | {220 + rng.random():.2f} ms | {38 + rng.random():.1f}% A100 fp16 MFU | "
            f"{3400 + rng.random() * 100:.0f} tok/s\n")


def _key_equals(f, s: int, rng: random.Random) -> None:
    f.write(f"[trainer] step={s}/1000000 loss={2 + rng.random():.4f} lr={3e-4 * rng.random():.3e} "
            f"grad_norm={rng.random():.4f} throughput={800 + rng.random() * 10:.1f} samples/s "
            f"peak_mem={12 + rng.random():.2f}GiB\n")


def _dicts(f, s: int, rng: random.Random) -> None:
    f.write(f"{{'loss': {round(2 + rng.random(), 4)}, 'grad_norm': {rng.random()}, 'learning_rate': "
            f"{3e-4 * rng.random()}, 'epoch': {round(s / 1e5, 2)}}}\n")


def _keras(f, s: int, rng: random.Random) -> None:
    n = s % 1000 + 1
    bar = "=" * (n * 30 // 1000 - 1) + (">" if n < 1000 else "=")
    tail = f"- ETA: {(1000 - n) // 50}s" if n < 1000 else "- 20s 20ms/step"
    f.write(f"{n:4d}/1000 [{bar:.<30}] {tail} - loss: {2 + rng.random():.4f} - accuracy: {rng.random():.4f}\n")


def _composer(f, s: int, rng: random.Random) -> None:
    if s % 4 == 1:
        f.write(f"[epoch=1][batch={s // 4 + 1}/250000]:\n")
    else:
        f.write(f"\t Train {('loss/train/total', 'lr-DecoupledAdamW/group0', 'time/batch')[(s % 4 - 2) % 4]}: "
                f"{rng.random():.4f}\n")


CONSOLE_SHAPES = {"key: value (torchtitan)": _titan, "| key value | (llm.c)": _llmc, "key=value": _key_equals,
                  "dict repr (HF, no step)": _dicts, "Keras progress": _keras, "Composer blocks": _composer}


def console_log(path: Path, lines: int, write) -> int:
    rng = random.Random(2)
    with path.open("w") as f:
        for s in range(1, lines + 1):
            write(f, s, rng)
    return lines


def time_import(path: Path, repeats: int, child: str = _CHILD, native: bool = True,
                numpy_first: bool = False, tree: Path | None = None) -> tuple[float, int, int]:
    """Median seconds of `repeats` fresh-process reads, with the native line scanner on or off (and numpy
    imported before the clock starts or not), of a log finished an hour ago (one written in the last
    minute is read as live: copied, never mapped), by the source tree `tree` (default: the one timed).
    The read's CPU seconds (all its threads) are appended to `CPU[(tree, path, numpy_first)]`."""
    finished = time.time() - 3600
    os.utime(path, (finished, finished))
    tree = tree or _TIMED[0]
    env = dict(os.environ, PYTHONPATH=str(tree), STETHOSCOPE_NATIVE="1" if native else "0")
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", child, str(path), *(["numpy"] if numpy_first else [])],
                             capture_output=True, text=True, env=env, check=True)
        seconds, points, steps, cpu = out.stdout.split()
        runs.append((float(seconds), int(points), int(steps)))
        if native:
            CPU.setdefault((str(tree), str(path), numpy_first), []).append(float(cpu))
    seconds = statistics.median(r[0] for r in runs)
    return seconds, runs[0][1], runs[0][2]


CPU: dict[tuple[str, str, bool], list[float]] = {}  # (tree, log, numpy first) -> CPU seconds of each read


_TIMED = [SRC]  # the source tree the children import (`compiled`, unless --source)


def compiled(folder: Path, source: Path = SRC) -> Path:
    """A copy of the source tree `source` (the built scanner included) with every module's bytecode written,
    as an installed package has it; its path."""
    copy = folder / "src"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(copy)], check=True)
    return copy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--console-lines", type=int, default=1_000_000)
    ap.add_argument("--only-console", action="store_true", help="Megatron's log and the console shapes only")
    ap.add_argument("--source", action="store_true",
                    help="time the source tree as it is (no bytecode where PYTHONDONTWRITEBYTECODE is set)")
    ap.add_argument("--against", type=Path, metavar="TREE",
                    help="also time another checkout (its src/, extension built in place) in the same rounds: "
                         "each console shape's time over that tree's (issue 26: within 10%%) and both trees' ratios")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        print("load average at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        _TIMED[0] = SRC if args.source else compiled(Path(d))
        other = None
        if args.against:
            other = (args.against / "src").resolve()
            other = other if args.source else compiled(Path(d) / "against", other)
        print(f"timed: {'the source tree as it is' if args.source else 'a compiled copy of the source tree'}")
        print(f"import of {args.steps:,}-step logs (median of {args.repeats}, fresh process each; target <= 2.5 s)")
        mega = Path(d) / "megatron.log"
        made = time.perf_counter()
        mega_lines = megatron(mega, args.steps)
        made = time.perf_counter() - made
        if not args.only_console:
            path = Path(d) / "trainer_state.json"
            lines = trainer_state(path, args.steps)
            seconds, points, steps = time_import(path, args.repeats)
            print(f"  {'trainer_state.json':20s} {path.stat().st_size / 2**20:7.1f} MiB  {seconds:6.2f} s  "
                  f"{lines / seconds:>12,.0f} lines|rows/s  {points / seconds:>12,.0f} points/s  "
                  f"({points:,} points, {steps:,} steps)")
            path.unlink()
        logs = {}
        for i, (shape, write) in enumerate(CONSOLE_SHAPES.items()):
            logs[shape] = Path(d) / f"console{i}.log"
            console_log(logs[shape], args.console_lines, write)
        # Interleaved rounds (this machine is noisy): each round times Megatron's log, then every shape; a
        # shape's ratio is taken against the Megatron time of its own round, then the median over rounds.
        times: dict[str, list[float]] = {"megatron": [], "megatron-regex": [], "megatron-numpy": [],
                                         **{shape: [] for shape in logs}, **{shape + "-numpy": [] for shape in logs}}
        counts: dict[str, tuple[int, int]] = {}
        for _ in range(args.repeats):
            seconds, points, steps = time_import(mega, 1)
            times["megatron"].append(seconds)
            counts["megatron"] = (points, steps)
            times["megatron-regex"].append(time_import(mega, 1, native=False)[0])
            times["megatron-numpy"].append(time_import(mega, 1, numpy_first=True)[0])
            for shape, path in logs.items():
                seconds, points, steps = time_import(path, 1, _CHILD_CONSOLE)
                times[shape].append(seconds)
                counts[shape] = (points, steps)
                times[shape + "-numpy"].append(time_import(path, 1, _CHILD_CONSOLE, numpy_first=True)[0])
            if other is not None:  # the other tree: its Megatron read, then each shape, in the same round
                times.setdefault("against:megatron", []).append(time_import(mega, 1, tree=other)[0])
                for shape, path in logs.items():
                    times.setdefault("against:" + shape, []).append(time_import(path, 1, _CHILD_CONSOLE, tree=other)[0])
        size = {"megatron": mega.stat().st_size, **{shape: path.stat().st_size for shape, path in logs.items()}}
        seconds = statistics.median(times["megatron"])
        points, steps = counts["megatron"]
        print(f"  {'megatron.log':20s} {size['megatron'] / 2**20:7.1f} MiB  {seconds:6.2f} s  "
              f"{mega_lines / seconds:>12,.0f} lines|rows/s  {points / seconds:>12,.0f} points/s  "
              f"({points:,} points, {steps:,} steps; generated in {made:.0f} s; the native line scanner "
              f"{'on' if _native_built() else 'NOT BUILT'})")
        regex = statistics.median(times["megatron-regex"])
        print(f"  {'  without the scanner':20s} {'':7s}      {regex:6.2f} s  {mega_lines / regex:>12,.0f} lines|rows/s  "
              "(STETHOSCOPE_NATIVE=0: the regex path, the Megatron reader before the scanner)")
        first = statistics.median(times["megatron-numpy"])
        print(f"  {'  numpy first':20s} {'':7s}      {first:6.2f} s  {mega_lines / first:>12,.0f} lines|rows/s  "
              "(numpy imported before the clock starts)")
        mega_mb_s = size["megatron"] / 1e6 / seconds
        print(f"general console reader, {args.console_lines:,}-line log per shape, {args.repeats} interleaved rounds "
              f"(ratio: MB/s over the Megatron reader's in the same round, target >= 0.5 (issue 28.4) — its median "
              f"{mega_mb_s:.1f} MB/s; `cpu`: the same per CPU second of the read, all threads; `regex`: over the "
              f"Megatron reader without the scanner, {size['megatron'] / 1e6 / regex:.1f} MB/s; and lines/s, "
              "points/s over the scanner's)")
        mega_cpu = CPU[(str(_TIMED[0]), str(mega), False)]
        for shape in logs:
            seconds = statistics.median(times[shape])
            points, steps = counts[shape]
            mb = [size[shape] / t / (size["megatron"] / m) for t, m in zip(times[shape], times["megatron"])]
            per_line = [args.console_lines / t / (mega_lines / m) for t, m in zip(times[shape], times["megatron"])]
            per_point = [points / t / (counts["megatron"][0] / m) for t, m in zip(times[shape], times["megatron"])]
            over_regex = [size[shape] / t / (size["megatron"] / m) for t, m in zip(times[shape], times["megatron-regex"])]
            first = [size[shape] / t / (size["megatron"] / m)
                     for t, m in zip(times[shape + "-numpy"], times["megatron-numpy"])]
            cpu = [size[shape] / t / (size["megatron"] / m)
                   for t, m in zip(CPU[(str(_TIMED[0]), str(logs[shape]), False)], mega_cpu)]
            cpu_first = [size[shape] / t / (size["megatron"] / m) for t, m in zip(
                CPU[(str(_TIMED[0]), str(logs[shape]), True)], CPU[(str(_TIMED[0]), str(mega), True)])]
            print(f"  {shape:24s} {size[shape] / 2**20:7.1f} MiB  {seconds:6.2f} s  {size[shape] / 1e6 / seconds:7.1f} "
                  f"MB/s  ratio {statistics.median(mb):5.2f} (spread {min(mb):.2f}–{max(mb):.2f}){_below(mb)}  cpu "
                  f"{statistics.median(cpu):5.2f} ({min(cpu):.2f}–{max(cpu):.2f}; numpy first {statistics.median(cpu_first):.2f})  numpy first "
                  f"{statistics.median(first):5.2f} ({min(first):.2f}–{max(first):.2f})  regex "
                  f"{statistics.median(over_regex):5.2f} ({min(over_regex):.2f}–{max(over_regex):.2f})  lines/s ratio "
                  f"{statistics.median(per_line):5.2f}  points/s ratio {statistics.median(per_point):5.2f}  "
                  f"({args.console_lines:,} lines, {points:,} points, {steps:,} steps)")
        if other is not None:
            against(args.against, other, logs, size, times)
        print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


def _below(ratios: list[float]) -> str:
    return "  BELOW 0.5" if statistics.median(ratios) < 0.5 else ""


def against(name: Path, other: Path, logs: dict[str, Path], size: dict[str, int], times: dict[str, list[float]]) -> None:
    """Each shape's read by this tree over the other tree's, in the same rounds (wall and CPU; issue 26: within
    10%), and each tree's MB/s over its own Megatron read's."""
    print(f"against {name} (the same logs, fresh processes in the same rounds; time here / time there, median "
          "[spread]; within 10%: the CPU median <= 1.10, steadier than the wall's on a shared machine):")
    here, there = str(_TIMED[0]), str(other)
    mega = [m for m in CPU if m[0] == here and m[1].endswith("megatron.log") and not m[2]][0][1]
    for shape, path in logs.items():
        wall = [a / b for a, b in zip(times[shape], times["against:" + shape])]
        cpu = [a / b for a, b in zip(CPU[(here, str(path), False)], CPU[(there, str(path), False)])]
        ratio = {tree: statistics.median(size[shape] / t / (size["megatron"] / m) for t, m in zip(
            times[key], times[mkey])) for tree, key, mkey in (("here", shape, "megatron"),
                                                               ("there", "against:" + shape, "against:megatron"))}
        cpu_ratio = {tree: statistics.median(size[shape] / t / (size["megatron"] / m) for t, m in zip(
            CPU[(root, str(path), False)], CPU[(root, mega, False)])) for tree, root in (("here", here), ("there", there))}
        verdict = "within 10%" if statistics.median(cpu) <= 1.10 else "SLOWER by more than 10%"  # (CPU: steadier)
        print(f"  {shape:24s} time x{statistics.median(wall):.2f} [{min(wall):.2f}-{max(wall):.2f}]  cpu "
              f"x{statistics.median(cpu):.2f} [{min(cpu):.2f}-{max(cpu):.2f}]  {verdict};  ratio to Megatron: here "
              f"{ratio['here']:.2f} (cpu {cpu_ratio['here']:.2f}), there {ratio['there']:.2f} (cpu {cpu_ratio['there']:.2f})")


def _native_built() -> bool:
    sys.path.insert(0, str(SRC))
    from stethoscope.logtext import linescan

    return linescan.available()


if __name__ == "__main__":
    main()
