"""How the console reader does on generated trainer logs (`bench/log_grammar.py`): recovered / refused /
partial / misread rates over N logs of the development grammar; with --spent, of the first thirteen held-out
grammars (each looked at once, then tuned on: the fourth's honest figure was 75.55% recovered, 19.45% misread;
the fifth's 85.35% recovered, 4.75% refused, 9.85% partial, 0.05% misread; the sixth's 84.35% recovered, 5.40%
refused, 10.05% partial, 0.20% misread; the seventh's 66.85% recovered, 7.30% refused, 20.00% partial, 5.85%
misread; the eighth's 72.70% recovered, 6.95% refused, 14.80% partial, 5.55% misread; the ninth's 84.40%
recovered, 1.75% refused, 9.70% partial, 4.15% misread; the tenth's 75.70% recovered, 3.10% refused, 13.10%
partial, 8.10% misread; the eleventh's 78.05% recovered, 3.30% refused, 10.55% partial, 8.10% misread; the twelfth's
72.10% recovered, 9.90% refused, 6.30% partial, 11.70% misread; the thirteenth's 75.50% recovered, 9.40% refused,
8.65% partial, 6.45% misread); with --held-out, of the fourteenth held-out grammar (forms no earlier part held:
BigDL's DistriOptimizer, Vowpal Wabbit's progress table (a sample counter, no step), R's nnet, SciPy's L-BFGS-B
(Fortran's `D` exponents), LIBLINEAR's trust-region Newton, GloVe, YOLOv5's epoch table, luz, tensorpack's epoch
statistics and Blocks' Printing blocks; unix milliseconds, a Korean locale's and tensorpack's stamps, Rust tracing's
and zerolog's loggers, `podman pod logs`' and pdsh's IP-address prefixes; BigDL's, luz's and tensorpack's validation
lines; a unicode minus, `inf`/`nan` spellings, watts, degrees and percentages among the metrics; logs saved as `cat -n`
prints them, `journalctl -o export`, TeamCity service messages, `logcli` output and a quoting e-mail reply;
`nvidia-smi dmon`, a caught CUDA out-of-memory traceback, KerasTuner's and Ray Tune's trial reports, c10d's barrier
warning and lm-evaluation-harness's table between the records).

    python bench/log_grammar_rates.py [--logs 2000] [--spent] [--held-out] [--seed 0] [--show 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import log_grammar as lg  # noqa: E402


def rates(part: str, count: int, seed: int, show: int) -> None:
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    times: Counter[bool] = Counter()
    seconds: Counter[bool] = Counter()
    shown: Counter[str] = Counter()
    by_part: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(count):
            log = lg.render(lg.sample(part, rng))
            out = lg.score(log, d)
            outcomes[out.kind] += 1
            if out.step_time is not None:
                times[out.step_time] += 1
            if out.seconds is not None:
                seconds[out.seconds] += 1
                if not out.seconds and shown["seconds"] < show:
                    shown["seconds"] += 1
                    print(f"  [step time in s wrong]\n      {log.text.splitlines()[0][:150]!r}")
            pools = lg.OUT.get(part)
            for name in (log.grammar.held_parts(pools) if pools else []):
                by_part.setdefault(name, Counter())[out.kind] += 1
            if out.kind != lg.RECOVERED and shown[out.kind] < show:
                shown[out.kind] += 1
                first = next((ln for ln in log.text.splitlines() if ln.strip()), "")
                print(f"  [{out.kind}] {out.why}\n      {first[:150]!r}")
    n = sum(outcomes.values())
    print(f"{part}: {n} logs  recovered {outcomes[lg.RECOVERED] / n:.2%}  refused {outcomes[lg.REFUSED] / n:.2%}  "
          f"partial {outcomes[lg.PARTIAL] / n:.2%}  misread {outcomes[lg.MISREAD] / n:.2%} "
          f"({outcomes[lg.MISREAD]} logs)  step time read in {times[True]}/{sum(times.values())} logs that print one; "
          f"the printed step times in seconds (and none where none is printed) in {seconds[True]}/{sum(seconds.values())} "
          "logs of development extras")
    for name, c in sorted(by_part.items()):
        total = sum(c.values())
        print(f"    {name:28s} {total:5d} logs  recovered {c[lg.RECOVERED] / total:.1%}  misread {c[lg.MISREAD]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=2000)
    ap.add_argument("--spent", action="store_true", help="also the first thirteen held-out grammars (now tuned on)")
    ap.add_argument("--held-out", action="store_true", help="also the fourteenth held-out grammar (not scored yet: score it once)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=5, help="examples shown per outcome that is not `recovered`")
    args = ap.parse_args()
    rates(lg.DEV, args.logs, args.seed, args.show)
    if args.spent:
        rates(lg.SPENT, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT2, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT3, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT4, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT5, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT6, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT7, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT8, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT9, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT10, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT11, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT12, args.logs, args.seed + 1, args.show)
        rates(lg.SPENT13, args.logs, args.seed + 1, args.show)
    if args.held_out:
        rates(lg.HELD, args.logs, args.seed + 1, args.show)


if __name__ == "__main__":
    main()
