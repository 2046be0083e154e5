"""Re-derive the `divergence` labels of the committed LR-jump logs after a change of the label rule
(`common.diverged`), from the losses the libraries' hooks saw (labels.json keeps them: `logged_loss`),
without training anything again.

    python bench/real_trainers/relabel.py [--split dev|heldout|all] [--labels tests/assets/real_trainers/labels.json]

Only the `divergence` label of `lr_jump` rows can change; the row's other labels stay as they were. Prints the
development rows that changed, and only a count for the held-out split (its labels are not for reading).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
LABELS = HERE.parents[1] / "tests" / "assets" / "real_trainers" / "labels.json"


def relabel(row: dict) -> bool:
    """Sets the row's `divergence` label by the current rule; True when it changed."""
    from common import Plan, diverged

    if row["fault"] != "lr_jump":
        return False
    mod = importlib.import_module(row["library"])
    at = getattr(mod, "at", {}).get(row["source"])
    at = functools.partial(at, Plan(row["library"], row["fault"], row["seed"])) if at else (lambda kind, n: n)
    onset = at("onset", row["onset"])  # logged_loss is in the log's numbering: so is the onset compared with it
    labels = [lb for lb in row["labels"] if lb["type"] != "divergence"]
    had = len(labels) != len(row["labels"])
    now = diverged([(k, v) for k, v in row["logged_loss"]], onset)
    if now:
        at_pos = sum(1 for lb in labels if lb["type"] == "lr_schedule")  # after lr_schedule, as `labels` orders them
        labels.insert(at_pos, {"type": "divergence", "step": onset, "confidence": "high"})
    row["labels"] = labels
    return now != had


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
    ap.add_argument("--labels", type=Path, default=LABELS)
    args = ap.parse_args()
    rows = json.loads(args.labels.read_text())
    changed = [r for r in rows if args.split in ("all", r["split"]) and relabel(r)]
    args.labels.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    for r in changed:
        if r["split"] == "dev":
            print(f"{r['case']}: {[(lb['type'], lb['step']) for lb in r['labels']]}")
    print(f"{len(changed)} rows relabelled ({sum(r['split'] != 'dev' for r in changed)} held-out, not shown)")


if __name__ == "__main__":
    main()
