"""A train-loss term that blew up by orders of magnitude and never came back (`exploded_terms`), whatever the
headline loss does.

The streaming detectors watch the one train loss a log names `loss`; a run logs its objective's terms beside it
(a VAE's KL, a GAN's or a detector's components) and often leaves one out of the total it prints, or weighs it
down. A term that grew `_ORDERS` orders of magnitude over its own start and stayed there is broken (a posterior
variance run away, a term that will overflow to NaN), and the headline is no reassurance: act now (wild-logs-6 X4,
a bayou VAE: `KL_loss` 13.2 -> 1.4e10 -> 1e16 over 20k iterations while `loss` fell 8.2 -> 2.5; its `gen_loss`
and `FS_loss` rising x1.8 and x3 with it). A term that starts negligible beside the total (a KL warmed up from 1e-4:
`_NEGLIGIBLE`) has no start to grow from. Used by `diagnose.engine`.
"""

from __future__ import annotations

import re

import numpy as np

from stethoscope.diagnose.table import Table
from stethoscope.findings.catalogue import DIVERGENCE
from stethoscope.records import LOSS, Finding

_EDGE = 8  # records whose median is a term's start / end
_ORDERS = 3  # its end at least 10**_ORDERS x its start...
_STAYED = 2  # ...and none of its last _EDGE records back under 10**_STAYED x its start
_NEGLIGIBLE = 0.01  # a term starting under this share of the total's start: a term warmed up from ~0, no start
_ROSE = 1.5  # other terms that ended at least this many times their start are named beside it
_HELD_OUT = re.compile(r"eval|valid|val[/_]|test", re.IGNORECASE)
# named for a loss but no term of it: an AMP loss scale (x2 every 2,000 clean steps), a term's weight or coefficient
# (annealed up by design)
_NOT_A_TERM = re.compile(r"scale|weight|coef|lambda|beta|^(?:amp|opt|perf)/", re.IGNORECASE)


def exploded_terms(table: Table) -> list[Finding]:
    _, total = table.series(LOSS)
    total = total[np.isfinite(total)]
    base = float(np.median(total[:_EDGE])) if total.size >= _EDGE else None
    terms = []
    for name in table.names:
        if name == LOSS or "loss" not in name.lower() or _HELD_OUT.search(name) or _NOT_A_TERM.search(name):
            continue
        s, v = table.series(name)
        ok = np.isfinite(v)
        s, v = s[ok], v[ok]
        if v.size < 2 * _EDGE or np.any(v <= 0):
            continue
        start, end = float(np.median(v[:_EDGE])), float(np.median(v[-_EDGE:]))
        terms.append((name, s, v, start, end))
    out = []
    for name, s, v, start, end in terms:
        if base is not None and start < _NEGLIGIBLE * abs(base):
            continue
        if end < 10.0 ** _ORDERS * start or float(np.min(v[-_EDGE:])) < 10.0 ** _STAYED * start:
            continue
        onset = int(s[int(np.argmax(v >= 10.0 ** _STAYED * start))])
        msg = (f"{name} exploded from step {onset}: {start:.4g} (its first {_EDGE} records) -> {end:.4g} (its last "
               f"{_EDGE}), x{end / start:.2g}, and never came back")
        rose = [f"{n} {a:.4g} -> {b:.4g}" for n, _, _, a, b in terms if n != name and b >= _ROSE * a]
        if rose:
            msg += f"; {', '.join(rose)} rose with it"
        if base is not None:
            msg += (f"; the train loss went {base:.4g} -> {float(np.median(total[-_EDGE:])):.4g}: a term of the "
                    "objective diverged whatever the headline loss does")
        ev = {"series": name, "start": start, "end": end, "ratio": end / start, "rose": rose}
        out.append(Finding(DIVERGENCE, "warning", onset, msg, end_step=int(s[-1]), evidence=ev, source="verdicts",
                           causes=[f"{name} has no bound or weight that keeps it in range (a VAE's KL with an "
                                   "unbounded log-variance, a term left out of the total that is printed)",
                                   "the LR too high for that part of the model"],
                           fixes=[f"clamp what feeds {name} (the log-variance), weigh or anneal it, lower the LR, "
                                  "and restart from a checkpoint before step " + str(onset)]))
    return out
