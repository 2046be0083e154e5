"""Step 3 of a guided workflow: the LR schedule, from the run's LR history, the optimizer and the scheduler."""

from __future__ import annotations

import math
import statistics
from typing import Any

from stethoscope import records as R
from stethoscope.debug.forward import norms, to_host
from stethoscope.debug.history import History
from stethoscope.debug.steps import Step, Thresholds, fmt, skipped


def check_lr(kind: str, ctx: Any, finding: Any, hist: History, th: Thresholds) -> Step:
    title, call = "check the LR schedule", "optimizer.param_groups / scheduler.get_last_lr() / the run's opt/lr"
    lr_steps, lrs = hist.get(R.LR)
    if ctx.optimizer is None and ctx.scheduler is None and not lrs:
        return skipped(title, call, "optimizer=, scheduler= or run= (the run directory)")
    problems, notes, data = [], [], {}
    step = getattr(finding, "step", None)
    if lrs and step is not None:
        _lr_history(lr_steps, lrs, step, th, problems, notes, data)
    if ctx.optimizer is not None:
        _lr_optimizer(ctx, th, problems, notes, data)
    found = "; ".join(problems + notes) or "the LR is on schedule and in range"
    if problems:
        nxt = "fix the schedule (warm-up, peak LR, a scheduler restored on resume) and rerun from a checkpoint"
    else:
        nxt = "the LR is not the trigger: go on to the numerics"
    return Step(title, call, "problem" if problems else ("note" if notes else "ok"), found, nxt, data,
                "schedule" if problems else "")


def _lr_history(steps: list[int], lrs: list[float], at: int, th: Thresholds, problems: list[str],
                notes: list[str], data: dict[str, Any]) -> None:
    from stethoscope.detect.config import DetectConfig
    from stethoscope.detect.lr import LrTracker

    tracker = LrTracker(DetectConfig())
    events = []
    for s, v in zip(steps, lrs):
        if s > at:
            break
        if math.isfinite(v):
            events += tracker.update(s, v)
    lr_at = tracker.prev_lr
    data.update(lr_at_step=lr_at, peak_lr=tracker.top, events=[(e.kind, e.step, e.before, e.after) for e in events])
    notes.append(f"LR {fmt(lr_at)} at step {at} (peak so far {fmt(tracker.top)})")
    jump = tracker.jump_cause(at, th.lr_within)
    if jump:
        problems.append(jump)
    since = tracker.since_warmup_end(at)
    if since is not None and 0 <= since <= th.lr_within:
        problems.append(f"{since} steps after warm-up ended at step {tracker.warmup_end_step}: the finding came at the "
                        "peak LR (lower it or warm up longer)")
    reset = tracker.recent_reset(at)
    if reset is not None:
        problems.append(f"the schedule restarted/resumed at step {reset}, just before (a scheduler not restored "
                        "from the checkpoint restarts warm-up or jumps the LR)")
    first = next((v for v in lrs if math.isfinite(v)), None)
    if first is not None and tracker.top > 0 and first >= 0.9 * tracker.top and len(lrs) > 2 and not jump:
        notes.append("no warm-up: the run started at its peak LR")


def _lr_optimizer(ctx: Any, th: Thresholds, problems: list[str], notes: list[str], data: dict[str, Any]) -> None:
    groups = ctx.optimizer.param_groups
    lrs = [float(g.get("lr", math.nan)) for g in groups]
    data["optimizer_lr"] = lrs
    adam = any("betas" in g for g in groups)
    limit = th.adam_lr if adam else th.sgd_lr
    high = [lr for lr in lrs if lr > limit]
    if high:
        problems.append(f"optimizer LR {fmt(max(high))} is above {fmt(limit)}, high for "
                        f"{'an Adam-family optimizer' if adam else 'SGD'}")
    if ctx.scheduler is not None and hasattr(ctx.scheduler, "get_last_lr"):
        sched = [float(v) for v in ctx.scheduler.get_last_lr()]
        data["scheduler_lr"] = sched
        if any(not math.isclose(a, b, rel_tol=1e-6) for a, b in zip(sched, lrs)):
            problems.append(f"the scheduler says LR {fmt(sched[0])} but the optimizer uses {fmt(lrs[0])}: "
                            "the scheduler is not driving this optimizer (or was restored without it)")
    ratio = _adam_update_ratio(ctx.optimizer)
    if ratio is not None:
        data["update_ratio"] = ratio
        from stethoscope.detect.config import DetectConfig

        msg = f"Adam update/weight ratio {ratio:.3g} per step (healthy ~1e-3)"
        (problems if ratio > DetectConfig().update_ratio_high else notes).append(msg)


def _adam_update_ratio(optimizer: Any) -> float | None:
    """The median over parameters of ||lr * m / (sqrt(v) + eps)|| / ||w||, from Adam's state."""
    import torch

    ups, ws = [], []
    for g in optimizer.param_groups:
        eps = g.get("eps", 1e-8)
        for p in g["params"]:
            st = optimizer.state.get(p, {})
            m, v = st.get("exp_avg"), st.get("exp_avg_sq")
            if not isinstance(m, torch.Tensor) or not isinstance(v, torch.Tensor):
                continue
            ups.append(m / (v.sqrt() + eps) * float(g["lr"]))
            ws.append(p.detach())
    if not ups:
        return None
    un, wn = to_host([torch.stack([n.to(ups[0].device) for n in norms(ups)]),
                      torch.stack([n.to(ups[0].device) for n in norms(ws)])])
    ratios = [u / w for u, w in zip(un, wn) if w > 0 and math.isfinite(u)]
    return statistics.median(ratios) if ratios else None
