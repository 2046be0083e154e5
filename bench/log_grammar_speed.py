"""The console reader's import time on `import_speed.py`'s known shapes, this tree against another tree's
`src` (a checkout of the commit before a change), side by side: each round reads every shape's log in a
fresh process with one tree, then the other (the order alternating by round), and a shape's figure is the
median over rounds of the time ratio this / other in the same round (the machine is noisy; ratios of
neighbouring runs are what holds), with each tree's fastest run (the least disturbed) beside it.

    git worktree add /tmp/before <commit>   # or: git archive <commit> src | tar -x -C /tmp/before
    python bench/log_grammar_speed.py --base /tmp/before/src [--lines 1000000] [--rounds 5] [--logs DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import import_speed as speed  # noqa: E402


def _time(path: Path, src: Path) -> tuple[float, int, int]:
    speed.SRC = src  # import_speed runs its child with PYTHONPATH=SRC
    return speed.time_import(path, 1, speed._CHILD_CONSOLE)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True, help="the other tree's src directory")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--logs", type=Path, help="a directory holding console0.log … (import_speed's) to reuse")
    args = ap.parse_args()
    here = BENCH.parent / "src"
    with tempfile.TemporaryDirectory() as d:
        logs = {}
        for i, (shape, write) in enumerate(speed.CONSOLE_SHAPES.items()):
            path = (args.logs or Path(d)) / f"console{i}.log"
            if args.logs is None or not path.exists():
                speed.console_log(path, args.lines, write)
            logs[shape] = path
        print(f"console reader, this tree / {args.base} (time ratio, median of {args.rounds} rounds; < 1: faster)")
        for shape, path in logs.items():
            ratios, counts, fastest = [], set(), {here: [], args.base: []}
            for r in range(args.rounds):
                order = (here, args.base) if r % 2 == 0 else (args.base, here)
                got = {src: _time(path, src) for src in order}
                ratios.append(got[here][0] / got[args.base][0])
                counts.add((got[here][1:], got[args.base][1:]))
                for src in order:
                    fastest[src].append(got[src][0])
            same = "same points and steps" if all(a == b for a, b in counts) else f"DIFFERENT counts {counts}"
            print(f"  {shape:24s} ratio {statistics.median(ratios):5.2f} (spread {min(ratios):.2f}–{max(ratios):.2f})"
                  f"  fastest {min(fastest[here]):.2f} s / {min(fastest[args.base]):.2f} s = "
                  f"{min(fastest[here]) / min(fastest[args.base]):.2f}  {same}")


if __name__ == "__main__":
    main()
