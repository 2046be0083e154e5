"""Accuracy of `stethoscope diagnose` on labelled runs: precision, recall, F1 and step error per type and format.

    python bench/diagnosis_accuracy.py [--cases ../shared/realruns] [--confidence high]
                                       [--synthetic | --only-synthetic [--split dev|heldout]]
                                       [--verbose] [--json]

Real runs: the cases of `labels.json` (see its README.md). Synthetic runs (`--synthetic`): tiny real
CPU training runs with injected faults (`synthetic_runs.py`), traces cached in `bench/.cache/`,
written through many real writers. Its DEVELOPMENT set (seeds 0-1) is for tuning; the HELD-OUT set
(seeds 2-4, plus writer variants no development run uses; its figure is also split by those writers)
is the figure that counts. Every case is read through `importers.registry.read_any` and diagnosed
with `diagnose_run`, exactly as the CLI does.

Scoring rules (fixed before looking at results; the same for real and synthetic runs):
* Types: a finding matches a label of its own type, or of the general type a more specific one
  counts for (TYPE_MAP): frozen_loss -> plateau, periodic_stall -> throughput_drop, crash -> hang,
  loss_scale_collapse -> plateau or grad_explosion, grad_spike -> grad_explosion.
* Steps: the finding's `step` (its onset) must be within +-2 logged steps of the label's step
  (+-10 for a divergence), a logged step being the median gap between the run's logged train steps.
  An interval that merely contains the label does NOT match (`end_step` is not used). A label
  without a step matches any finding of its type.
* Recall: a label is found when a finding of any severity matches it, or a symptom an incident owns
  (a divergence owns the spikes and NaNs in its span; `--json` lists them): the report shows it.
* Precision: every finding >= warning is a prediction; it is a true positive when it matches a
  label, else a false alarm, charged to its (first mapped) type -- types no label uses included.
  `info` findings count for recall and never as false alarms. Types a run has no ground truth for
  (a case's `unscored`, e.g. throughput on synthetic runs without injected stalls, whose step times
  are a shared machine's jitter) are neither, nor are findings whose onset falls in one of a case's
  `unscored_spans` (throughput before an injected stall; spikes after the first at a far-too-high LR). With `--confidence high`, lower-confidence labels are
  left out and findings matching only them are neither true nor false.
* Step error: per found label with a step, the smallest |finding step - label step| in logged steps.
* Healthy runs: every finding >= warning on a run labelled healthy is a false alarm (listed);
  `false_positive_traps` are hit by a finding >= warning of the trap's type at its step (a
  `healthy` trap by nothing >= warning there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from stethoscope.records import LOSS, Finding, severity_rank  # noqa: E402

TYPE_MAP = {"frozen_loss": ("plateau",), "periodic_stall": ("throughput_drop",), "crash": ("hang",),
            "loss_scale_collapse": ("plateau", "grad_explosion"), "grad_spike": ("grad_explosion",)}
NEVER_SCORED = ("healthy",)  # the clean bill of health is a verdict on the run, scored by the healthy label
TOLERANCE = {"divergence": 10}  # in logged steps; 2 for every other type
TARGET_TYPES = ("nan", "loss_spike", "divergence", "grad_explosion", "overfitting", "plateau")
CONFIDENCE = {"low": 0, "medium": 1, "high": 2}


@dataclass
class Case:
    name: str
    path: Path
    labels: list[dict[str, Any]]
    traps: list[dict[str, Any]] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)  # label types this run has no ground truth for
    spans: list[dict[str, Any]] = field(default_factory=list)  # {type, from, to}: steps with no ground truth
    fmt: str = "?"
    split: str = ""
    new_writer: bool = False  # a writer variant only held-out runs are written through
    variant: str = ""
    findings: list[Finding] = field(default_factory=list)
    symptoms: list[Finding] = field(default_factory=list)  # findings an incident owns, as info: recall only
    gap: int = 1  # one logged step: the median gap between logged train steps
    error: str | None = None
    seconds: float = 0.0
    misses: list[str] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)


@dataclass
class Tally:
    labels: int = 0
    found: int = 0
    tp: int = 0
    fp: int = 0
    errors: list[float] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.labels += other.labels
        self.found += other.found
        self.tp += other.tp
        self.fp += other.fp
        self.errors += other.errors

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
        for run in runs:
            findings = diagnose_run(run).findings
            case.findings.extend(findings)
            case.symptoms += [Finding(sym["type"], "info", sym.get("step"), f"a symptom of {f.type}@{f.step}")
                              for f in findings for sym in f.symptoms]
            case.gap = max(case.gap, _log_gap(run))
    except Exception as exc:  # a bench reports failures, it does not stop on them
        case.error = f"{type(exc).__name__}: {exc}"
    case.seconds = time.perf_counter() - t0


def _log_gap(run: Any) -> int:
    steps = sorted({p.step for p in run.points if p.name == LOSS})
    gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    return max(1, int(statistics.median(gaps))) if gaps else 1


# -- matching and scoring --------------------------------------------------------------------------
def label_types(finding_type: str) -> tuple[str, ...]:
    return TYPE_MAP.get(finding_type, (finding_type,))


def step_error(f: Finding, label: dict[str, Any], gap: int) -> float | None:
    """How many logged steps the finding's onset is from the label, or None when they do not match."""
    if label["type"] not in label_types(f.type):
        return None
    if label["step"] is None:
        return 0.0
    if f.step is None:
        return None
    err = abs(f.step - label["step"]) / gap
    return err if err <= TOLERANCE.get(label["type"], 2) else None


def _is_prediction(f: Finding, case: Case) -> bool:
    types = label_types(f.type)
    return (severity_rank(f.severity) >= 1 and f.type not in NEVER_SCORED
            and not all(t in case.unscored for t in types))


def _in_span(f: Finding, case: Case) -> bool:
    types = label_types(f.type)
    return f.step is not None and any(sp["type"] in types and sp["from"] <= f.step <= sp["to"] for sp in case.spans)


def score_case(case: Case, min_conf: int, tallies: dict[str, Tally]) -> None:
    """Add one case to the per-type tallies; record its misses and false alarms on the case."""
    labels = [lb for lb in case.labels if lb["type"] != "healthy"]
    scored = [lb for lb in labels if CONFIDENCE[lb["confidence"]] >= min_conf]
    ignored = [lb for lb in labels if CONFIDENCE[lb["confidence"]] < min_conf]
    case.misses, case.alarms = [], []
    for lb in scored:
        t = tallies[lb["type"]]
        t.labels += 1
        errs = [e for f in case.findings + case.symptoms if (e := step_error(f, lb, case.gap)) is not None]
        if errs:
            t.found += 1
            t.errors += [min(errs)] if lb["step"] is not None else []
            continue
        near = [f"{f.type}@{f.step}" for f in case.findings if lb["type"] in label_types(f.type)]
        case.misses.append(f"{lb['type']}@{lb['step']}" + (f" (findings of the type: {', '.join(near[:4])})"
                                                           if near else " (no finding of the type)"))
    for f in case.findings:
        if not _is_prediction(f, case):
            continue
        hit = next((lb for lb in scored if step_error(f, lb, case.gap) is not None), None)
        if hit is not None:
            tallies[hit["type"]].tp += 1
        elif not any(step_error(f, lb, case.gap) is not None for lb in ignored) and not _in_span(f, case):
            tallies[label_types(f.type)[0]].fp += 1
            same = [str(lb["step"]) for lb in labels if lb["type"] in label_types(f.type)]
            case.alarms.append(f"{f.severity} {f.type}@{f.step}" + (f" (label step {', '.join(same)})" if same else "")
                               + f": {f.message[:90]}")


def score(cases: list[Case], min_conf: int) -> dict[str, Any]:
    tallies: dict[str, Tally] = defaultdict(Tally)
    formats: dict[str, Tally] = defaultdict(Tally)
    healthy_alarms: list[str] = []
    trap_hits: list[str] = []
    for case in cases:
        mine: dict[str, Tally] = defaultdict(Tally)
        score_case(case, min_conf, mine)
        for k, t in mine.items():
            tallies[k].add(t)
            formats[case.fmt].add(t)
        if any(lb["type"] == "healthy" and CONFIDENCE[lb["confidence"]] >= min_conf for lb in case.labels):
            healthy_alarms += [f"{case.name}: {a}" for a in case.alarms]
        trap_hits += _trap_hits(case)
    total = Tally()
    for t in tallies.values():
        total.add(t)
    return {"types": {k: tallies[k].row() for k in sorted(tallies)}, "formats": {k: formats[k].row() for k in sorted(formats)},
            "overall": total.row(), "healthy_runs": sum(any(lb["type"] == "healthy" for lb in c.labels) for c in cases),
            "healthy_false_alarms": healthy_alarms, "trap_hits": trap_hits, "cases": len(cases),
            "errors": [f"{c.name}: {c.error}" for c in cases if c.error]}


def _trap_hits(case: Case) -> list[str]:
    out = []
    for trap in case.traps:
        if trap["type"] == "healthy":
            near = [f for f in case.findings if severity_rank(f.severity) >= 1 and f.step is not None
                    and abs(f.step - trap["step"]) <= 2 * case.gap]
            if not near:
                out.append(f"{case.name}: nothing >= warning at step {trap['step']} ({trap['note'][:80]})")
            continue
        for f in case.findings:
            if severity_rank(f.severity) >= 1 and step_error(f, trap, case.gap) is not None:
                out.append(f"{case.name}: {f.severity} {f.type}@{f.step} hits the trap: {trap['note'][:80]}")
    return out


# -- cases -----------------------------------------------------------------------------------------
def real_cases(root: Path) -> list[Case]:
    rows = json.loads((root / "labels.json").read_text())
    return [Case(r["case"], root / r["file"], r["labels"], r.get("false_positive_traps", []), fmt=r.get("format", "?"))
            for r in rows]


def synthetic_cases(workdir: Path, splits: tuple[str, ...]) -> list[Case]:
    from synthetic_runs import generate

    return [Case(c["case"], Path(c["path"]), c["labels"], c.get("traps", []), c.get("unscored", []),
                 c.get("unscored_spans", []), c["format"], c["split"], c.get("new_writer", False),
                 c.get("variant", ""))
            for c in generate(workdir, splits, log=lambda m: print(m, file=sys.stderr))]


# -- output ----------------------------------------------------------------------------------------
def _fmt(x: Any, pct: bool = True) -> str:
    if x is None:
        return "   -"
    return f"{x:4.2f}" if pct else f"{x:.1f}"


def print_table(title: str, result: dict[str, Any]) -> None:
    print(f"\n## {title}  ({result['cases']} cases)")
    print(f"{'':30s} {'labels':>6s} {'found':>5s} {'TP':>4s} {'FP':>4s} {'prec':>5s} {'recall':>6s} {'F1':>5s} "
          f"{'med.err':>7s}  target")
    rows = [(f"type {k}", r) for k, r in result["types"].items()] + [(f"format {k}", r) for k, r in result["formats"].items()]
    for name, r in rows + [("OVERALL", result["overall"])]:
        target = "F1>=0.9" if name.removeprefix("type ") in TARGET_TYPES else ""
        print(f"{name[:30]:30s} {r['labels']:6d} {r['found']:5d} {r['tp']:4d} {r['fp']:4d} {_fmt(r['precision']):>5s} "
              f"{_fmt(r['recall']):>6s} {_fmt(r['f1']):>5s} {_fmt(r['median_step_error'], False):>7s}  {target}")
    _print_alarms(result)


def _print_alarms(result: dict[str, Any]) -> None:
    print(f"false alarms (>= warning) on {result['healthy_runs']} healthy runs: {len(result['healthy_false_alarms'])}")
    for line in result["healthy_false_alarms"]:
        print(f"  - {line}")
    if result["trap_hits"]:
        print(f"false-positive traps hit: {len(result['trap_hits'])}")
    for line in result["trap_hits"]:
        print(f"  - {line}")
    for line in result["errors"]:
        print(f"  ! {line}")


def _prf(r: dict[str, Any] | None) -> str:
    if r is None:
        return f"{'-':>5s} {'-':>5s} {'-':>5s}"
    return f"{_fmt(r['precision']):>5s} {_fmt(r['recall']):>5s} {_fmt(r['f1']):>5s}"


def print_side_by_side(dev: dict[str, Any], held: dict[str, Any]) -> None:
    """Dev beside held-out, per format and per type; the held-out column is the one that counts."""
    print(f"\n## synthetic runs: development ({dev['cases']} cases) vs HELD-OUT ({held['cases']} cases, the figure "
          "that counts)")
    print(f"{'':24s} {'dev P':>6s} {'R':>5s} {'F1':>5s}   {'HELD-OUT P':>10s} {'R':>5s} {'F1':>5s}  labels  FP")
    keys = [("format", k) for k in sorted(set(dev["formats"]) | set(held["formats"]))]
    keys += [("type", k) for k in sorted(set(dev["types"]) | set(held["types"]))]
    for kind, k in keys + [("", "OVERALL")]:
        d = dev[kind + "s"].get(k) if kind else dev["overall"]
        h = held[kind + "s"].get(k) if kind else held["overall"]
        dcell, hcell = _prf(d), _prf(h)
        extra = f"{h['labels']:6d} {h['fp']:3d}" if h else ""
        print(f"{(kind + ' ' + k).strip():24s} {dcell:>18s}   {hcell:>22s}  {extra}")
    for name, r in (("development", dev), ("HELD-OUT", held)):
        print(f"[{name}] ", end="")
        _print_alarms(r)


def print_cases(cases: list[Case]) -> None:
    """Misses and false alarms per case, then the error classes counted over all cases."""
    classes: Counter[str] = Counter()
    for c in cases:
        if not (c.misses or c.alarms or c.error):
            continue
        labels = ", ".join(f"{lb['type']}@{lb['step']}" for lb in c.labels)
        print(f"\n{c.name}  [{c.fmt}, logged step {c.gap}]  labels: {labels or '-'}")
        for m in c.misses:
            print(f"   MISS  {m}")
            classes[f"miss {m.split('@')[0]} [{c.fmt}]" + (" (finding at another step)" if "(findings" in m else "")] += 1
        for a in c.alarms:
            print(f"   FALSE {a}")
            kind = a.split(" ")[1].split("@")[0]
            classes[f"false alarm {kind} [{c.fmt}]" + (" (off the label's step)" if "(label step" in a else "")] += 1
        if c.error:
            print(f"   ERROR {c.error}")
            classes[f"read error [{c.fmt}]"] += 1
    print("\n## error classes (count)")
    for k, n in classes.most_common(30):
        print(f"{n:5d}  {k}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=REPO.parent / "shared" / "realruns")
    ap.add_argument("--confidence", choices=("all", "medium", "high"), default="all",
                    help="score only labels of at least this confidence")
    ap.add_argument("--synthetic", action="store_true", help="also score the synthetic runs, dev and held-out")
    ap.add_argument("--only-synthetic", action="store_true")
    ap.add_argument("--split", choices=("dev", "heldout"), help="synthetic runs of one split only")
    ap.add_argument("--verbose", action="store_true", help="misses and false alarms per case, and error classes")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    min_conf = {"all": 0, "medium": 1, "high": 2}[args.confidence]
    results: dict[str, Any] = {}
    if not args.only_synthetic:
        cases = real_cases(args.cases)
        for c in cases:
            diagnose_case(c)
        results["real runs"] = score(cases, min_conf)
        if args.verbose and not args.json:
            print_cases(cases)
        if not args.json:
            print_table(f"real runs, labels of confidence {args.confidence}", results["real runs"])
    if args.synthetic or args.only_synthetic:
        splits = (args.split,) if args.split else ("dev", "heldout")
        with tempfile.TemporaryDirectory(prefix="stethoscope-synth-") as tmp:
            cases = synthetic_cases(Path(tmp), splits)
            for c in cases:
                diagnose_case(c)
        for split in splits:
            results[f"synthetic {split}"] = score([c for c in cases if c.split == split], min_conf)
        if "heldout" in splits:  # unseen seeds through the dev writers vs through writers dev never used
            for new in (False, True):
                held = [c for c in cases if c.split == "heldout" and c.new_writer == new]
                results[f"synthetic heldout, {'new' if new else 'dev'} writers"] = score(held, min_conf)
            for v in sorted({c.variant for c in cases if c.split == "heldout" and c.new_writer}):
                held = [c for c in cases if c.split == "heldout" and c.variant == v]
                results[f"synthetic heldout, writer {v}"] = score(held, min_conf)
        if args.verbose and not args.json:
            print_cases(cases)
        if not args.json and len(splits) == 2:
            print_side_by_side(results["synthetic dev"], results["synthetic heldout"])
            for new in ("dev", "new"):
                r = results[f"synthetic heldout, {new} writers"]
                print(f"HELD-OUT through {new} writers ({r['cases']} cases): P/R/F1 {_prf(r['overall'])}")
            for key in [k for k in results if k.startswith("synthetic heldout, writer ")]:
                r = results[key]
                print(f"  {key.removeprefix('synthetic heldout, writer ')} ({r['cases']} cases): P/R/F1 {_prf(r['overall'])}")
        elif not args.json:
            print_table(f"synthetic {splits[0]}", results[f"synthetic {splits[0]}"])
    if args.json:
        print(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
