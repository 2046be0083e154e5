"""Accuracy of `stethoscope diagnose` on labelled runs: precision, recall, F1 and step error per type.

    python bench/diagnosis_accuracy.py [--cases ../shared/realruns] [--confidence high] [--synthetic]
                                       [--only-synthetic] [--verbose] [--json]

Real runs: the cases of `labels.json` (see its README.md), read through the importers
(`importers.registry.read_any`) and diagnosed with `diagnose_run`, exactly as the CLI does.
Synthetic runs (`--synthetic`): tiny real training runs on the CPU with injected faults, written
through real writers (HF-style trainer_state.json via `json`, TensorBoard via SummaryWriter,
Megatron-style iteration lines), read back through the importers and scored the same way.

How a finding matches a label (decided here, before looking at the results):
* Types: a finding's type maps onto a label type with TYPE_MAP (grad_spike and loss_scale_collapse
  count for grad_explosion, frozen_loss and label_masking for plateau, periodic_stall for
  throughput_drop, crash for hang). Other finding types (lr notes, eval_sparse, ...) are not scored.
* Steps: a label with a step matches a finding whose step is within one logged step of it
  (tolerance = the median gap between the run's logged train steps, at least 1). Divergence and
  plateau are intervals: the label may fall anywhere in [step, end_step] +- tolerance. A label
  without a step (described only in prose) matches any finding of its type in the run.
* Recall: a label is found when at least one finding (any severity) matches it.
* Precision: predictions are findings of a scored type with severity >= warning; one is a true
  positive when it matches a label of its type in the same run. `info` findings are notes
  ("a harmless blip", "warm-up ended"): they count towards recall, never as false alarms. With
  `--confidence high`, labels of lower confidence are left out and predictions matching only them are
  neither true nor false positives.
* Step error: per found label with a step, the smallest |finding step - label step| (0 inside an
  interval).
* False alarms: on runs labelled healthy, findings >= warning that match none of the run's other
  labels; on `false_positive_traps`, findings >= warning of the trap's type at its step (a
  `healthy` trap is hit when nothing >= warning is reported there).
* Unscored types: a synthetic run's step times are real wall-clock times on a shared machine, so
  throughput findings are scored only in the scenario that injects stalls; elsewhere the machine's
  own jitter has no ground truth and those findings are neither true nor false positives.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from stethoscope.records import LOSS, Finding, severity_rank  # noqa: E402

TYPE_MAP = {
    "nan": "nan", "loss_spike": "loss_spike", "grad_spike": "grad_explosion", "grad_explosion": "grad_explosion",
    "loss_scale_collapse": "grad_explosion", "divergence": "divergence", "overfitting": "overfitting",
    "plateau": "plateau", "frozen_loss": "plateau", "label_masking": "plateau", "underfitting": "underfitting",
    "throughput_drop": "throughput_drop", "periodic_stall": "throughput_drop", "hang": "hang", "crash": "hang",
    "lr_schedule": "lr_schedule",
}
INTERVAL_TYPES = ("divergence", "plateau")
TARGET_TYPES = ("nan", "loss_spike", "divergence", "grad_explosion", "overfitting", "plateau")
CONFIDENCE = {"low": 0, "medium": 1, "high": 2}


@dataclass
class Case:
    name: str
    path: Path
    labels: list[dict[str, Any]]
    traps: list[dict[str, Any]] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)  # label types this run has no ground truth for
    findings: list[Finding] = field(default_factory=list)
    tolerance: int = 1
    error: str | None = None
    seconds: float = 0.0


@dataclass
class Tally:
    labels: int = 0
    found: int = 0
    tp: int = 0
    fp: int = 0
    errors: list[int] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else None
        r = self.found / self.labels if self.labels else None
        f1 = 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else None
        med = statistics.median(self.errors) if self.errors else None
        return {"labels": self.labels, "found": self.found, "tp": self.tp, "fp": self.fp, "precision": p,
                "recall": r, "f1": f1, "median_step_error": med}


# -- running the diagnosis -------------------------------------------------------------------------
def diagnose_case(case: Case) -> None:
    from stethoscope.diagnose.engine import diagnose_run
    from stethoscope.importers.registry import read_any

    t0 = time.perf_counter()
    try:
        runs = read_any(case.path)
    except Exception as exc:  # a bench reports failures, it does not stop on them
        case.error = f"{type(exc).__name__}: {exc}"
        return
    for run in runs:
        d = diagnose_run(run)
        case.findings.extend(d.findings)
        case.tolerance = max(case.tolerance, _log_interval(run))
    case.seconds = time.perf_counter() - t0


def _log_interval(run: Any) -> int:
    steps = sorted({p.step for p in run.points if p.name == LOSS})
    gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    return max(1, int(statistics.median(gaps))) if gaps else 1


# -- matching and scoring --------------------------------------------------------------------------
def step_error(f: Finding, label_step: int | None, tol: int, label_type: str) -> int | None:
    """Distance between a finding and a label's step, or None when they do not match."""
    if TYPE_MAP.get(f.type) != label_type:
        return None
    if label_step is None:
        return 0
    if f.step is None:
        return None
    lo, hi = f.step, f.step
    if label_type in INTERVAL_TYPES and f.end_step is not None:
        hi = max(f.end_step, f.step)
    err = 0 if lo <= label_step <= hi else min(abs(label_step - lo), abs(label_step - hi))
    return err if err <= tol else None


def score(cases: list[Case], min_conf: int) -> dict[str, Any]:
    tallies: dict[str, Tally] = defaultdict(Tally)
    healthy_alarms: list[str] = []
    trap_hits: list[str] = []
    nan_exact = [0, 0]
    for case in cases:
        scored = [lb for lb in case.labels if lb["type"] != "healthy" and CONFIDENCE[lb["confidence"]] >= min_conf]
        ignored = [lb for lb in case.labels if lb["type"] != "healthy" and CONFIDENCE[lb["confidence"]] < min_conf]
        for lb in scored:
            t = tallies[lb["type"]]
            t.labels += 1
            errs = [e for f in case.findings if (e := step_error(f, lb["step"], case.tolerance, lb["type"])) is not None]
            if errs:
                t.found += 1
                if lb["step"] is not None:
                    t.errors.append(min(errs))
                    if lb["type"] == "nan":
                        nan_exact[0] += min(errs) == 0
                        nan_exact[1] += 1
        for f in case.findings:
            ltype = TYPE_MAP.get(f.type)
            if ltype is None or severity_rank(f.severity) < 1 or ltype in case.unscored:
                continue
            if any(step_error(f, lb["step"], case.tolerance, ltype) is not None for lb in scored if lb["type"] == ltype):
                tallies[ltype].tp += 1
            elif not any(step_error(f, lb["step"], case.tolerance, ltype) is not None
                         for lb in ignored if lb["type"] == ltype):
                tallies[ltype].fp += 1
        healthy_alarms += _healthy_alarms(case, min_conf)
        trap_hits += _trap_hits(case)
    total = Tally()
    for t in tallies.values():
        total.labels += t.labels
        total.found += t.found
        total.tp += t.tp
        total.fp += t.fp
        total.errors += t.errors
    return {"types": {k: tallies[k].row() for k in sorted(tallies)}, "overall": total.row(),
            "healthy_false_alarms": healthy_alarms, "trap_hits": trap_hits,
            "nan_exact_step": nan_exact, "cases": len(cases), "errors": [f"{c.name}: {c.error}" for c in cases if c.error]}


def _healthy_alarms(case: Case, min_conf: int) -> list[str]:
    healthy = [lb for lb in case.labels if lb["type"] == "healthy" and CONFIDENCE[lb["confidence"]] >= min_conf]
    if not healthy:
        return []
    others = [lb for lb in case.labels if lb["type"] != "healthy"]
    out = []
    for f in case.findings:
        if severity_rank(f.severity) < 1:
            continue
        ltype = TYPE_MAP.get(f.type)
        if ltype in case.unscored:
            continue
        if ltype and any(lb["type"] == ltype and step_error(f, lb["step"], case.tolerance, ltype) is not None
                         for lb in others):
            continue
        out.append(f"{case.name}: {f.severity} {f.type}@{f.step}: {f.message[:120]}")
    return out


def _trap_hits(case: Case) -> list[str]:
    out = []
    for trap in case.traps:
        if trap["type"] == "healthy":
            near = [f for f in case.findings if severity_rank(f.severity) >= 1 and f.step is not None
                    and abs(f.step - trap["step"]) <= case.tolerance]
            if not near:
                out.append(f"{case.name}: nothing >= warning at step {trap['step']} ({trap['note'][:80]})")
            continue
        for f in case.findings:
            if severity_rank(f.severity) >= 1 and step_error(f, trap["step"], case.tolerance, trap["type"]) is not None:
                out.append(f"{case.name}: {f.severity} {f.type}@{f.step} hits the trap: {trap['note'][:80]}")
    return out


# -- cases -----------------------------------------------------------------------------------------
def real_cases(root: Path) -> list[Case]:
    rows = json.loads((root / "labels.json").read_text())
    return [Case(r["case"], root / r["file"], r["labels"], r.get("false_positive_traps", [])) for r in rows]


def synthetic_cases(workdir: Path) -> list[Case]:
    from synthetic_runs import generate

    return [Case(c["case"], Path(c["path"]), c["labels"], c.get("traps", []), c.get("unscored", []))
            for c in generate(workdir)]


# -- output ----------------------------------------------------------------------------------------
def print_table(title: str, result: dict[str, Any]) -> None:
    def fmt(x: Any, pct: bool = True) -> str:
        if x is None:
            return "   -"
        return f"{x:4.2f}" if pct else f"{x:g}"

    print(f"\n## {title}  ({result['cases']} runs)")
    print(f"{'type':16s} {'labels':>6s} {'found':>5s} {'TP':>4s} {'FP':>4s} {'prec':>5s} {'recall':>6s} {'F1':>5s} "
          f"{'med.step.err':>12s}  target")
    rows = list(result["types"].items()) + [("OVERALL", result["overall"])]
    for name, r in rows:
        target = "F1>=0.9" if name in TARGET_TYPES else ""
        print(f"{name:16s} {r['labels']:6d} {r['found']:5d} {r['tp']:4d} {r['fp']:4d} {fmt(r['precision']):>5s} "
              f"{fmt(r['recall']):>6s} {fmt(r['f1']):>5s} {fmt(r['median_step_error'], False):>12s}  {target}")
    exact = result["nan_exact_step"]
    print(f"NaN at the exact step: {exact[0]}/{exact[1]}")
    print(f"false alarms (>= warning) on healthy runs: {len(result['healthy_false_alarms'])}")
    for line in result["healthy_false_alarms"]:
        print(f"  - {line}")
    print(f"false-positive traps hit: {len(result['trap_hits'])}")
    for line in result["trap_hits"]:
        print(f"  - {line}")
    for line in result["errors"]:
        print(f"  ! {line}")


def print_cases(cases: list[Case]) -> None:
    for c in cases:
        labels = ", ".join(f"{lb['type']}@{lb['step']}({lb['confidence'][0]})" for lb in c.labels)
        print(f"\n{c.name}  [tol {c.tolerance}, {c.seconds * 1000:.0f} ms]  labels: {labels}")
        for f in c.findings:
            print(f"   {f.severity:8s} {f.type:20s} {f.step}-{f.end_step}  {f.message[:110]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=REPO.parent / "shared" / "realruns")
    ap.add_argument("--confidence", choices=("all", "medium", "high"), default="all",
                    help="score only labels of at least this confidence")
    ap.add_argument("--synthetic", action="store_true", help="also generate and score synthetic fault runs")
    ap.add_argument("--only-synthetic", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="list every run's labels and findings")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    min_conf = {"all": 0, "medium": 1, "high": 2}[args.confidence]
    results: dict[str, Any] = {}
    sets: list[tuple[str, list[Case]]] = []
    if not args.only_synthetic:
        sets.append(("real runs", real_cases(args.cases)))
    tmp = None
    if args.synthetic or args.only_synthetic:
        tmp = tempfile.TemporaryDirectory(prefix="stethoscope-synth-")
        sets.append(("synthetic runs", synthetic_cases(Path(tmp.name))))
    for title, cases in sets:
        for c in cases:
            diagnose_case(c)
        results[title] = score(cases, min_conf)
        if args.verbose and not args.json:
            print_cases(cases)
        if not args.json:
            print_table(f"{title}, labels of confidence {args.confidence}", results[title])
    if args.json:
        print(json.dumps(results, indent=1, default=str))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
