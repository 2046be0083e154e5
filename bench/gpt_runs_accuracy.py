"""Accuracy of `stethoscope diagnose` on a tiny GPT's real CPU training runs, faults injected, in five formats.

    python bench/gpt_runs_accuracy.py [--assets tests/assets/gpt_runs] [--split dev|heldout|heldout2|heldout3|heldout4|heldout5|heldout6|heldout7|heldout8|heldout9]
                                      [--format nanogpt|hf|wandb|lightning|tensorboard] [--verbose] [--json]

The logs and labels are made by `bench/gpt_runs/make_logs.py` (a char-level GPT trained with AdamW,
warm-up + cosine LR, clipping and periodic evals on Python's stdlib source; faults nan, lr_jump,
lr_spike, frozen, stall, slowdown, overfit and healthy runs; each run written live as nanoGPT's
console, the HF Trainer's console, a W&B-style history JSONL, Lightning's metrics.csv and TensorBoard
events) and committed under tests/assets/gpt_runs; `bench/gpt_runs/labels.py` says how each label is
computed. The split is the generator's (`make_logs.SPLITS`, fixed before any scoring: seeds 6-8 held out,
then looked at; seeds 9-11 "heldout2", scored once and looked at; seeds 12-14 "heldout3", scored once and
looked at; seeds 15-17 "heldout4" scored once and looked at; seeds 18-20 "heldout5" scored once and looked at; seeds 21-23 "heldout6" scored once and looked at; seeds 24-26 "heldout7" scored once and looked at; seeds 27-29 "heldout8" scored once and looked at; seeds 30-32 "heldout9", the fresh held-out set).
Tune on dev; the held-out figure is the one that counts, and a held-out split scored twice is spent.

Every log is read through `importers.registry.read_any` and diagnosed with `diagnose_run`, as the CLI
does, and scored with `diagnosis_accuracy.py`'s rules (strict onsets: +-2 logged steps, +-10 for a
divergence; findings >= warning are predictions; info findings count for recall only). Printed: F1
per format and per fault for each split, the false alarms on healthy runs, and (not scored, for
information) findings >= warning of unscored types on runs without that fault.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

import diagnosis_accuracy as acc  # noqa: E402
from stethoscope.records import severity_rank  # noqa: E402

ASSETS = REPO / "tests" / "assets" / "gpt_runs"
sys.path.insert(0, str(REPO / "bench" / "gpt_runs"))
from make_logs import SPLITS  # noqa: E402  (one split, fixed in the generator)


def cases(root: Path, split: str | None, fmt: str | None) -> list[acc.Case]:
    rows = json.loads((root / "labels.json").read_text())
    out = []
    for r in rows:
        mine = next(k for k, seeds in SPLITS.items() if r["seed"] in seeds)
        if (split is None or mine == split) and (fmt is None or r["format"] == fmt):
            out.append(acc.Case(r["case"], root / r["file"], r["labels"], [], r.get("unscored", []),
                                r.get("unscored_spans", []), fmt=r["format"], split=mine, variant=r["fault"]))
    return out


def table(found: list[acc.Case]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in SPLITS:
        mine = [c for c in found if c.split == split]
        if not mine:
            continue
        res = acc.score(mine, 0)
        res["faults"] = {f: acc.score([c for c in mine if c.variant == f], 0)["overall"]
                         for f in sorted({c.variant for c in mine})}
        res["unscored_alarms"] = [f"{c.name}: {f.severity} {f.type}@{f.step}" for c in mine for f in c.findings
                                  if severity_rank(f.severity) >= 1
                                  and all(t in c.unscored for t in acc.label_types(f.type))]
        out[split] = res
    return out


def print_split(name: str, res: dict[str, Any]) -> None:
    print(f"\n## gpt runs, {name} ({res['cases']} logs)")
    print(f"{'':26s} {'P':>5s} {'R':>5s} {'F1':>5s}  labels found  TP  FP")
    keys = [("format", k, r) for k, r in res["formats"].items()] + [("fault", k, r) for k, r in res["faults"].items()]
    keys += [("type", k, r) for k, r in res["types"].items()] + [("", "OVERALL", res["overall"])]
    for kind, k, r in keys:
        print(f"{(kind + ' ' + k).strip()[:26]:26s} {acc._prf(r)}  {r['labels']:6d} {r['found']:5d} {r['tp']:3d} {r['fp']:3d}")
    acc._print_alarms(res)
    print(f"(not scored) findings >= warning of a type the run has no truth for: {len(res['unscored_alarms'])}")
    for line in res["unscored_alarms"]:
        print(f"  . {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--assets", type=Path, default=ASSETS)
    ap.add_argument("--split", choices=tuple(SPLITS), help="diagnose one split only")
    ap.add_argument("--format", help="one format only")
    ap.add_argument("--verbose", action="store_true", help="misses and false alarms per log")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    found = cases(args.assets, args.split, args.format)
    for c in found:
        acc.diagnose_case(c)
    res = table(found)
    if args.verbose and not args.json:
        acc.print_cases(found)
    if args.json:
        print(json.dumps(res, indent=1, default=str))
        return
    for split, r in res.items():
        print_split(split if split == "dev" else f"HELD-OUT {split} (the figure that counts)", r)


if __name__ == "__main__":
    main()
