"""A loss logged only in parts is judged by its total.

YOLOv5/v8 write `train/box_loss`, `train/obj_loss` (or `dfl_loss`), `train/cls_loss` and no total; MMDetection's
and DETR's terms are `loss_bbox`, `loss_cls`. Without a train loss nothing judges the run ("too few to judge"),
and a NaN or a blow-up in one term goes unreported. The trainer optimises their sum: it is the train loss,
at every step that logs all the parts; `val/*_loss` parts likewise make the eval loss when none is logged.
Terms of two players (a GAN's generator and discriminator, `G_*`/`D_*`) are not one objective and are never
summed."""

from __future__ import annotations

import re
from typing import Any

from stethoscope.logtext.columns import Columns, ImportedRun
from stethoscope.records import EVAL_LOSS, LOSS

_PART = re.compile(r"^(?:(train|eval)/)?(?:([a-z0-9]+)_loss|loss_([a-z0-9]+))$", re.IGNORECASE)
_PLAYERS = {"g", "d", "gen", "disc", "generator", "discriminator", "adv", "critic", "actor"}


def loss_from_parts(run: ImportedRun) -> ImportedRun:
    """`run` with a train (and eval) loss made of the parts it logs, when it logs no such total."""
    columns = run.columns
    names = list(getattr(columns, "labels", None) or dict.fromkeys(columns.names))
    made = {total: parts for total, parts in ((LOSS, _parts(names, "train")), (EVAL_LOSS, _parts(names, "eval")))
            if total not in names and len(parts) >= 2}
    if not made:
        return run
    lists = columns.lists() if hasattr(columns, "lists") else columns
    run._columns = _with_totals(lists, made)
    run._points = None
    notes = run.meta.setdefault("notes", {})
    for total, parts in made.items():
        notes[total] = f"logged only in parts: the sum of {', '.join(parts)}"
    return run


def _parts(names: list[str], scope: str) -> list[str]:
    out = []
    for name in names:
        m = _PART.match(name)
        if m is None or (m.group(1) or "train").lower() != scope:
            continue
        if (m.group(2) or m.group(3)).lower() in _PLAYERS:
            return []  # two players' terms: no single objective
        out.append(name)
    return out


def _with_totals(columns: Columns, made: dict[str, list[str]]) -> Columns:
    """The points in their order, each total placed right after the last of its parts at that step."""
    owner = {part: total for total, parts in made.items() for part in parts}
    pending: dict[tuple[str, int], list[Any]] = {}  # (total, step) -> [parts seen, sum, time]
    names: list[str] = []
    steps: list[int] = []
    values: list[float] = []
    times: list[float | None] = []
    for name, step, value, when in zip(columns.names, columns.steps, columns.values, columns.times):
        names.append(name)
        steps.append(step)
        values.append(value)
        times.append(when)
        total = owner.get(name)
        if total is None:
            continue
        acc = pending.setdefault((total, step), [set(), 0.0, when])
        if name in acc[0]:
            continue  # a part twice at one step: the first stands
        acc[0].add(name)
        acc[1] += value
        if len(acc[0]) == len(made[total]):
            names.append(total)
            steps.append(step)
            values.append(float(f"{acc[1]:.12g}"))
            times.append(acc[2])
            del pending[(total, step)]
    return Columns(names, steps, values, times)
