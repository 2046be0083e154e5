"""The findings of `detect.trend`'s slow loss dynamics, built from the state its checks keep: a divergence
(one event), a slow comeback (a long loss spike, the divergence withdrawn), a plateau, a frozen loss or all
labels masked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from stethoscope.detect.comeback import withdrawn_divergence
from stethoscope.detect.frozen import eval_moved, paced, print_zero, sibling_moved, sig_digits, stalled_run, uniform_note
from stethoscope.findings.catalogue import DIVERGENCE, FROZEN_LOSS, LABEL_MASKING, LOSS_SPIKE, PLATEAU
from stethoscope.records import Finding

_FEW_DIGITS = 3  # a frozen train loss printed with this many significant digits or fewer is `info`
# A rise the run came back from within this share of the steps it had logged before it cost the run little: `info`
# (a per-iteration loss whose median of 8 sits above a lucky best for a few records, 20-1,890 steps of a 297k-step
# run; a x4 jump back in 2 steps at step 444). Longer comebacks (a young run's LR spike, 66 of 168 steps) warn.
_COST_SHARE = 0.05


def slow_comeback(div: dict[str, Any], f: Finding, level: float, source: str,
                  first_step: int | None = None) -> list[Finding]:
    """A rise the run undid (by its end, or fully before): a jump that took long to come back (a loss spike, at warning;
    `info` when it took at most `_COST_SHARE` of the steps logged before it), not a divergence. The divergence
    reported while the loss stayed up is withdrawn."""
    withdrawn_divergence(f, f"the loss came back to {level:.4g} at step {div['last_step']}")
    took = div["last_step"] - div["start"]
    msg = (f"loss jumped at step {div['start']} ({div['base']:.4g} -> {div['peak']:.4g} at step "
           f"{div['peak_step']}) and took {took} steps to come back (loss {level:.4g} at step {div['last_step']})")
    ev = {"level": div["base"], "peak": div["peak"], "peak_step": div["peak_step"], "last_level": level,
          "recovered": "slowly"}
    span = div["start"] - first_step if first_step is not None else 0
    severity = "warning"
    if span > 0 and took <= _COST_SHARE * span:
        severity = "info"
        msg += f" ({took / span:.1%} of the run so far): recovered, it cost the run little"
        ev["run_share"] = took / span
    spike = Finding(LOSS_SPIKE, severity, div["start"], msg, end_step=div["last_step"], evidence=ev,
                    causes=list(div.get("causes", [])), source=source)
    return [f, spike]


def divergence_finding(div: dict[str, Any], source: str) -> Finding:
    what = ("the loss rose on consecutive records" if div["kind"] == "runaway"
            else "the loss level stayed well above its best")
    msg = (f"loss diverged from step {div['start']}: {what} ({div['base']:.4g} -> {div['peak']:.4g} "
           f"at step {div['peak_step']})")
    ev = {
        "base": div["base"], "peak": div["peak"], "peak_step": div["peak_step"], "last": div["last"],
        "last_step": div["last_step"], "detected_step": div["detected"], "kind": div["kind"],
    }
    return Finding(DIVERGENCE, "error", div["start"], msg, evidence=ev, causes=list(div.get("causes", [])),
                   source=source)


def contradicted(f: Finding, better: tuple[str, float, float, int] | None) -> Finding:
    """A divergence through which an eval metric of the model's quality kept improving is `info`: the loss rose,
    the model did not get worse (RTMDet's box/quality-focal terms grow as more positives are matched)."""
    if better is not None:
        name, first, best, step = better
        f = replace(f, evidence=dict(f.evidence))  # a copy: the finding given may already have been emitted
        f.severity = "info"
        f.message += (f"; but {name} kept improving through it ({first:.4g} -> {best:.4g} at step {step}): the model "
                      "got better by the measure it is judged by, so the rise is the objective's, not a failure")
        f.evidence["improving_metric"] = {"name": name, "from": first, "best": best, "best_step": step}
    return f


def plateau_finding(p: dict[str, Any], vocab_size: int | None, source: str) -> Finding:
    span = p["last_step"] - p["start"]
    msg = (f"loss has not improved since step {p['start']}: {p['start_level']:.4g} -> {p['level']:.4g} "
           f"over {span} steps ({max(p['progress'], 0):.1%} better at best)")
    uniform = uniform_note(p["level"], vocab_size) if vocab_size else None
    if uniform:
        msg += f"; {uniform}"
    ev = {"start_level": p["start_level"], "level": p["level"], "progress": p["progress"], "steps": span}
    return Finding(PLATEAU, "warning", p["start"], msg, evidence=ev, source=source)


def frozen_finding(fz: dict[str, Any], vocab_size: int | None, source: str) -> Finding:
    v = fz["value"]
    ev = {"value": v, "records": fz["records"], "steps": fz["last"] - fz["start"]}
    where = f"from step {fz['start']} to {fz['last']} ({fz['records']} records)"
    why = print_zero(fz) if v == 0.0 else None
    if why:  # 0 at the print's resolution: a tiny loss, not one that is not computed
        ev["print_resolution"] = True
        msg = (f"loss is printed as exactly 0 {where}, and {why}: a loss below the print's last digit, not masked "
               "labels; print more digits (or the loss in another unit) to follow it")
        return Finding(FROZEN_LOSS, "info", fz["start"], msg, end_step=fz["last"], evidence=ev, source=source)
    if v == 0.0:
        msg = f"loss is exactly 0 {where}: every label is masked out (or the loss is not computed)"
        return Finding(LABEL_MASKING, "error", fz["start"], msg, end_step=fz["last"], evidence=ev, source=source)
    same = f"unchanged ({v!r}, to +-{fz['tol']:.1g})" if fz.get("tol") else f"identical ({v!r})"
    msg = f"loss is {same} {where}: nothing is learning"
    uniform = uniform_note(v, vocab_size)
    if uniform:
        msg += f"; {uniform}"
    digits = sig_digits(v)
    severity = "error"
    stalled = stalled_run(fz) if digits <= _FEW_DIGITS else None
    moved = eval_moved(fz) or sibling_moved(fz)
    if moved:  # a repeat of the train print while the evals move: a coincidence of the print, not frozen weights
        severity = "info"
        msg += f" - but {moved}: a coincidence of the print, not a model that stopped"
        ev["eval_moved"] = True
    elif stalled:  # half the run, train and eval both still: act now (stop it, or raise the LR it cut to nothing)
        severity = "warning"
        msg += f" for {stalled}; check the LR (a plateau scheduler at its floor) or stop the run"
        ev["stalled_share"] = fz["records"] / fz["n"]
    elif paced(fz):  # a smooth loss (a running mean) moving under one printed unit per record repeats its print
        severity = "info"
        msg += f" - but {paced(fz)}"
        ev["paced"] = fz["pace"]
    elif digits <= _FEW_DIGITS:  # Lightning's bar prints a running mean as `loss=1.350`: a slow one repeats it
        severity = "info"
        msg += (f" (the log prints {digits} significant digits: a loss moving slowly, or a running mean of it, "
                "repeats such a print by chance)")
    return Finding(FROZEN_LOSS, severity, fz["start"], msg, end_step=fz["last"], evidence=ev, source=source)
