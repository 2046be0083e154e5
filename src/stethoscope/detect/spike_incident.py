"""How a loss-spike incident ends: back at its level (`loss_recovered`), or not by the last record or a gap in
the log (`loss_unrecovered`), and what it cost the run. Used by `detect.spike`."""

from __future__ import annotations

import math
from typing import Any

from stethoscope.detect.comeback import came_back, how_far_back, recovered_fraction, withdrawn_divergence
from stethoscope.detect.config import DetectConfig
from stethoscope.detect.spike_findings import divergence, g, loss_finding
from stethoscope.detect.spike_track import Track, echo
from stethoscope.records import Finding

_BLIP_RECORDS = 1  # a spike on this many records that then recovers is a blip...
REAL_SPIKE_RATIO = 2.0  # ...unless it reached 2x the level and twice the spike threshold in sigmas
# A log that prints every _AGGREGATE_GAP steps or more prints an aggregate of them (detectron2 and torchvision's
# MetricLogger: the median of the last 20; mmengine, Megatron, fairseq, HF: the mean since the last print). Its
# noise is the aggregate's, tiny, so a brief x1.4 bump reads "14 sigma": sigmas there are no cost. A spike in such
# a log back at its level within _BRIEF_RECORDS records and _BRIEF_SHARE of the steps logged before it, under
# REAL_SPIKE_RATIO x its level, cost the run little: info. (Per-step logs keep the hard-batch rules above.)
_AGGREGATE_GAP = 10
_BRIEF_RECORDS = 10
_BRIEF_SHARE = 0.02
# A spike whose rise is under this share of what the run had learned (its first loss less the level before the
# spike) cost the run little: info when it came back, however long it took, or when the records end before it has
# held _STUCK_RECORDS records (too soon to call it stuck); while it stays that small, it is neither paged nor a
# divergence (`SpikeDetector._loss_incident`), though the records' end still finds it stuck (`_stuck`). A spike off a
# converged floor (a Marian NMT cost per word at 0.006, from 6.7) is many sigmas and x2 its level, yet nothing lost.
# A spike of 10% or more of its level is under 5% of the fall only once the loss fell below a third of its start.
_SMALL_OF_LEARNED = 0.05
# A run whose loss spikes and comes straight back again and again (an RL value loss, a physics loss on random
# collocation points, a detector's hard images) has spikes of that size in its nature: after the first, a spike whose
# rise is at most _RECUR x that of the biggest spike the run came back from, back within RECUR_RECORDS records, is one
# more of the same: info that names the first. One incident to act on, not a warning each time.
_RECUR = 1.5
RECUR_RECORDS = 3
# A spike that stayed under SMALL_RATIO x its level and _QUICK_SHARE of what the run had learned (its first loss less
# the level), back within QUICK_RECORDS records, cost the run a few records at a loss a little higher: info, whatever
# its sigmas (PaiNN's epoch loss x1.37, 8% of what it had learned, for 5 of 650 epochs). A garbage batch's spike (x2
# and more), or an LR spike that gives back most of what a young run learned (a tiny GPT x1.45, 69%), keeps the rules
# above.
SMALL_RATIO = 1.5
QUICK_RECORDS = 5
_QUICK_SHARE = 0.25
_STUCK_RATIO = 1.5  # a last loss this many times the pre-spike level, with < 25% of the jump undone,...
_STUCK_RECORDS = 3  # ...held over this many records...
_STUCK_JUMP = 4.0  # ...or this many times the level: the run ended diverged


def release(inc: dict[str, Any]) -> bool:
    """The severity held back at the onset, now that the spike outlived one record."""
    held = inc.pop("held", None)
    if held is not None:
        inc["severity"] = held
    return held is not None


def recurring(inc: dict[str, Any], came_back: list[float] | None) -> bool:
    """Is this spike's rise at most `_RECUR` x that of the biggest spike the run came back from before?"""
    return came_back is not None and 0 < inc["peak"] - inc["level"] <= _RECUR * came_back[1]


def small_and_young(inc: dict[str, Any], first_loss: float | None) -> bool:
    """Has the spike stayed under `SMALL_RATIO` x its level and `_QUICK_SHARE` of what the run had learned, for at
    most `QUICK_RECORDS` records (no divergence)?"""
    learned = (first_loss or 0.0) - inc["level"]
    return inc.get("records", 1) <= QUICK_RECORDS and inc["peak"] < SMALL_RATIO * inc["level"] and \
        learned > 0 and inc["peak"] - inc["level"] < _QUICK_SHARE * learned and not inc["diverged"]


def small_of_learned(inc: dict[str, Any], first_loss: float | None) -> float | None:
    """The spike's rise (its peak less the level before it) as a share of what the run had learned (its first loss
    less that level), when under `_SMALL_OF_LEARNED`; None otherwise or when the run had learned nothing."""
    learned = (first_loss or 0.0) - inc["level"]
    if learned <= 0:
        return None
    share = (inc["peak"] - inc["level"]) / learned
    return share if share < _SMALL_OF_LEARNED else None


def loss_recovered(inc: dict[str, Any], step: int, cfg: DetectConfig, first_loss: float | None,
                   first_step: int | None, source: str) -> list[Finding]:
    out = []
    z = (inc["peak"] - inc["level"]) / inc["sigma"] if inc["sigma"] else math.inf
    real = inc["peak"] >= REAL_SPIKE_RATIO * inc["level"] and z >= 2 * cfg.spike_sigma
    brief = brief_share(inc, step, first_step)
    small = small_of_learned(inc, first_loss)  # a rise off a floor far below the start: little lost
    if small is not None:
        inc["severity"] = "info"
        inc.pop("held", None)
    quick = small_and_young(inc, first_loss)
    if ((inc["records"] <= _BLIP_RECORDS or echo(inc)) and not real) or brief is not None or quick:
        inc["severity"] = "info"  # a one-record blip that came straight back and was not huge: a hard batch
        inc.pop("held", None)  # (or a brief bump: a small share of the run, under 2x its level)
    again = "recurring" in inc and inc["records"] <= RECUR_RECORDS and recurring(inc, inc["recurring"]) \
        and not inc["diverged"]
    # back within RECUR_RECORDS records, no higher than the loss printed by itself over its last 64 records (a
    # per-iteration loss swinging x10 print to print): the loss's own range, nothing lost (nor a divergence, though
    # a log printing every divergence_min_steps held it that long)
    own = not again and inc.get("range") is not None and inc["peak"] <= inc["range"] and \
        inc["records"] <= RECUR_RECORDS
    if again or own:
        inc["severity"] = "info"
        inc.pop("held", None)
    release(inc)
    f = loss_finding(inc, source)
    f.end_step = step
    took = step - inc["start"]
    f.message += f"; recovered after {took} step{'' if took == 1 else 's'}"
    if brief is not None:
        f.message += f" ({brief:.1%} of the run so far, under x2 its level): it cost the run little"
        f.evidence["run_share"] = brief
    elif small is not None:
        f.message += f" (a rise of {small:.1%} of what the run had learned): little lost"
    elif again:
        first = int(inc["recurring"][0])
        f.message += (f"; the run came back from a spike as big at step {first}: one more of the spikes this loss "
                      "keeps making, not a new event")
        f.evidence["recurring_since"] = first
    elif own:
        f.message += f"; no higher than the loss printed by itself lately ({inc['range']:.4g}): its own range"
        f.evidence["own_range"] = inc["range"]
    f.evidence.update(recovered="fully", recovered_step=step)
    out.append(f)
    # it stayed up long enough to be called a divergence, and then came back: the divergence is withdrawn and the
    # spike keeps the grade of the rules above (it came back; what it cost is what they weigh), not a warning for
    # having been up that long (a log printing every divergence_min_steps "diverges" in one record)
    if inc["diverged"]:
        d = divergence(inc, step, source)
        d.end_step = step
        d.evidence["recovered"] = "fully"
        out.append(withdrawn_divergence(d, f"the loss came back to its level at step {step}"))
    return out


def loss_unrecovered(inc: dict[str, Any], step: int, track: Track, cfg: DetectConfig, first_loss: float | None,
                     source: str) -> list[Finding]:
    small = small_of_learned(inc, first_loss)
    records = inc.get("records", 1)
    young = (small is not None and records < _STUCK_RECORDS and not inc.get("blew_up")) or \
        small_and_young(inc, first_loss)
    if young:  # the records stop before a small rise has held long enough to call it stuck: too soon to call
        inc["severity"] = "info"
        inc.pop("held", None)
    release(inc)
    frac = recovered_fraction(inc)
    how, ev = how_far_back(inc["level"], inc["peak"], inc["peak_step"], inc["last"])
    f = loss_finding(inc, source)
    f.end_step = inc["last_step"]
    f.message += f"; {how} by the last record (step {step}, loss {g(inc['last'])})"
    f.evidence.update(ev)
    if young:
        f.message += (f"; the records stop {records} record{'s' if records > 1 else ''} into a rise of {small:.1%} of "
                      "what the run had learned: too soon to call, and little at stake")
        f.evidence["learned_share"] = small
        return [f]  # and no divergence: a small rise is one only once it is stuck by its records (`_stuck`)
    out = [f]
    if inc["diverged"] or _stuck(inc) or (inc.get("blew_up") and frac < 0.25):
        d = divergence(inc, inc["last_step"], source)
        d.end_step = inc["last_step"]
        if not inc.get("blew_up") and came_back(inc["level"], track.recent_level(inc["start"]), cfg):
            out.append(withdrawn_divergence(d, "the loss came back to its level before the jump by the end"))
            return out
        if inc.get("blew_up"):
            d.message = (f"loss jumped at step {inc['start']} ({g(inc['level'])} -> {g(inc['first'])}) and then "
                         "turned NaN/Inf: the run blew up")
        else:
            d.message += f"; {how} by the last record"
        d.evidence.update(ev)
        out.append(d)
    return out


def _stuck(inc: dict[str, Any]) -> bool:
    """The loss still far up with under a quarter of the jump undone, and evidence that it stayed up: several
    records, or a jump so large (x4: far past a fresh model's loss for a trained one) that one record is enough.
    A stream that ends so is in a diverged state (one event, with the jump as its start)."""
    held = inc.get("records", 1) >= _STUCK_RECORDS or inc["last"] >= _STUCK_JUMP * inc["level"]
    return recovered_fraction(inc) < 0.25 and inc["level"] > 0 and inc["last"] >= _STUCK_RATIO * inc["level"] and held


def brief_share(inc: dict[str, Any], step: int, first_step: int | None) -> float | None:
    """The share of the steps logged before it that a recovered spike in an aggregated print (`_AGGREGATE_GAP`)
    took, when it was brief (`_BRIEF_RECORDS`, `_BRIEF_SHARE`) and stayed under `REAL_SPIKE_RATIO` x its level."""
    span = inc["start"] - (first_step if first_step is not None else inc["start"])
    if span <= 0 or inc["level"] <= 0 or inc["records"] > _BRIEF_RECORDS or inc.get("gap", 1) < _AGGREGATE_GAP:
        return None
    if inc["peak"] >= REAL_SPIKE_RATIO * inc["level"] or inc["diverged"]:
        return None
    share = (step - inc["start"]) / span
    return share if share <= _BRIEF_SHARE else None
