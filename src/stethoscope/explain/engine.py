"""Crash logs and tracebacks → named failures with cause and fix (`stethoscope explain`).

The knowledge lives in `explain.signatures.SIGNATURES`; this engine is generic: it strips rank prefixes
(`[default3]:`, `[rank3]:`, `[1,3]<stderr>:`, `3: `), matches every signature over the text, folds
repeated lines into one finding, finds the last training step before the failure, and turns any
traceback that no signature explains into a generic `crash` finding naming the exception and the
innermost frame in the user's own code.

Ordering: root failures first; a `symptom` (an NCCL timeout) is demoted to `warning` and a `wrapper`
(torchrun's ChildFailedError) to `info` when a root failure of severity `error` or more is present.
An exception that only carries a collective's failure out of the process (`DistBackendError`: the
process-group watchdog taking the process down after a timeout) is a symptom, never a root: with no root
present it is the consequence of the collective failure the log names, which then leads.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from stethoscope.explain.lines import StepMarker, split_lines, step_before, step_markers
from stethoscope.explain.model import Detail, Hit, Line, Signature, ranks_of
from stethoscope.explain.signatures import SIGNATURES
from stethoscope.explain.tracebacks import COVER_AFTER, Traceback, find_tracebacks, traceback_at, user_frame
from stethoscope.findings.catalogue import CRASH
from stethoscope.records import Finding, severity_rank

# -- matching -----------------------------------------------------------------------------------


def _match(lines: Sequence[Line]) -> dict[str, list[Hit]]:
    # One pass of each pattern over the joined text is far faster than every pattern on every line.
    joined = "\n".join(line.text for line in lines)
    starts = list(accumulate((len(line.text) + 1 for line in lines), initial=0))
    hits: dict[str, list[Hit]] = {}
    for sig in SIGNATURES:
        candidates = {bisect.bisect_right(starts, m.start()) - 1 for p in sig.patterns for m in p.finditer(joined)}
        for index in sorted(candidates):
            line = lines[index]
            m = next((m for p in sig.patterns if (m := p.search(line.text))), None)
            if m:
                hits.setdefault(sig.id, []).append(Hit(line, m))
    return hits


def _drop_superseded(hits: dict[str, list[Hit]]) -> dict[str, list[Hit]]:
    dropped = {other for sig in SIGNATURES if sig.id in hits for other in sig.supersedes}
    return {k: v for k, v in hits.items() if k not in dropped}


# -- building findings --------------------------------------------------------------------------

_MAX_LINES = 20
_MAX_TEXT = 400


def _excerpt(hit: Hit) -> str:
    text = hit.line.text
    if len(text) <= _MAX_TEXT:
        return text.strip()
    start = max(0, hit.match.start() - 40)
    return text[start : start + _MAX_TEXT].strip()


def _base_evidence(hits: list[Hit], tracebacks: list[Traceback], sig_id: str) -> dict[str, Any]:
    first = hits[0]
    evidence: dict[str, Any] = {"signature": sig_id, "count": len(hits), "line": first.line.index + 1,
                                "text": _excerpt(first), "lines": [h.line.index + 1 for h in hits[:_MAX_LINES]]}
    ranks = ranks_of(hits)
    if ranks:
        evidence["ranks"] = ranks
    tb = next((tb for h in hits if (tb := traceback_at(tracebacks, h.line))), None)
    frame = user_frame(tb) if tb else None
    if frame:
        evidence["frame"] = frame
    return evidence


def _message(title: str, summary: str, evidence: dict[str, Any]) -> str:
    message = f"{title}: {summary}" if summary else title
    tags = []
    if evidence.get("count", 1) > 1:
        tags.append(f"{evidence['count']} lines")
    ranks = evidence.get("ranks") or []
    if ranks:
        tags.append(("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks)))
    return f"{message} [{'; '.join(tags)}]" if tags else message


@dataclass(slots=True)
class _Ranked:
    role: str
    finding: Finding


def _signature_finding(sig: Signature, hits: list[Hit], lines: Sequence[Line], markers: list[StepMarker],
                       tracebacks: list[Traceback], source: str) -> _Ranked:
    detail = sig.parse(hits, lines) if sig.parse else Detail()
    evidence = _base_evidence(hits, tracebacks, sig.id)
    evidence.update(detail.evidence)
    first = hits[0]
    finding = Finding(type=sig.type, severity=detail.severity or sig.severity,
                      step=step_before(markers, first.line.index, first.match.start()),
                      message=_message(sig.title, detail.summary, evidence), evidence=evidence,
                      causes=list(dict.fromkeys(detail.causes + sig.causes)),
                      fixes=list(dict.fromkeys(detail.fixes + sig.fixes)), source=source)
    return _Ranked(sig.role, finding)


# Hints for the commonest exception types that no signature names.
_EXCEPTION_HINTS = {
    "KeyError": "a key missing from a config, a batch dict or a state dict",
    "FileNotFoundError": "a path that does not exist on this node (relative path, unmounted shared "
                         "filesystem, a checkpoint directory not yet written)",
    "PermissionError": "no write permission where the run writes (checkpoint or cache directory)",
    "AttributeError": "an API that changed between library versions, or an object of the wrong type",
    "IndexError": "an index past the end of a list/dataset (dataset length or sampler mismatch)",
    "ZeroDivisionError": "an empty dataset, batch or epoch (division by a zero count)",
    "RecursionError": "an unbounded recursion (often __getattr__ in a wrapper)",
    "AssertionError": "an assumption in the code does not hold for this data or config",
}


def _generic_findings(tracebacks: list[Traceback], hits: dict[str, list[Hit]], markers: list[StepMarker],
                      source: str) -> list[_Ranked]:
    # `hits` still holds superseded signatures: a line any signature explains is not "unknown".
    covered = {(h.line.rank, h.line.index) for group in hits.values() for h in group}
    groups: dict[tuple[str, str], list[Traceback]] = {}
    for chain in _chains(tracebacks):
        if any(_is_covered(tb, covered) for tb in chain):
            continue
        root = chain[0]
        groups.setdefault((root.exc_type, re.sub(r"\d+", "N", root.message)), []).append(root)
    return [_generic_finding(tbs, markers, source) for tbs in groups.values()]


def _chains(tracebacks: list[Traceback]) -> list[list[Traceback]]:
    chains: list[list[Traceback]] = []
    for tb in sorted(tracebacks, key=lambda t: (str(t.rank), t.start)):
        if tb.chained and chains and chains[-1][-1].rank == tb.rank:
            chains[-1].append(tb)
        else:
            chains.append([tb])
    return chains


def _is_covered(tb: Traceback, covered: set[tuple[int | None, int]]) -> bool:
    return any((tb.rank, i) in covered for i in range(tb.start, tb.end + COVER_AFTER + 1))


def _generic_finding(tbs: list[Traceback], markers: list[StepMarker], source: str) -> _Ranked:
    tb = tbs[0]
    frame = user_frame(tb)
    where = f" at {frame}" if frame else ""
    short = tb.exc_type.rsplit(".", 1)[-1]
    evidence: dict[str, Any] = {"signature": _GENERIC, "exception": tb.exc_type,
                                "exception_message": tb.message[:_MAX_TEXT], "count": len(tbs),
                                "line": tb.start + 1, "lines": [t.start + 1 for t in tbs[:_MAX_LINES]]}
    ranks = sorted({t.rank for t in tbs if t.rank is not None})
    if ranks:
        evidence["ranks"] = ranks
    if frame:
        evidence["frame"] = frame
    cause = _EXCEPTION_HINTS.get(short)
    causes = ([cause] if cause else []) + [f"{tb.exc_type} raised{where}: {tb.message[:200]}".rstrip(": ")]
    fixes = [f"open {frame} — the innermost frame in your own code — and check the values it received"
             if frame else "read the full traceback above the exception line",
             "reproduce the failing step alone (same seed, same batch) to debug it quickly"]
    summary = f"{tb.exc_type}: {tb.message[:200]}".rstrip(": ") + where
    title, severity = "Unhandled exception", "error"
    if all(t.handled for t in tbs):  # `--- Logging error ---`: logging printed and swallowed it, the run went on
        title, severity = "Logging error (printed and swallowed by the logging handler; no crash)", "info"
        evidence["handled"] = True
        fixes = ["fix the log call's format string or arguments (the message was dropped, the run went on)"]
    finding = Finding(type=CRASH, severity=severity, step=step_before(markers, tb.start, 0),
                      message=_message(title, summary, evidence), evidence=evidence,
                      causes=causes, fixes=fixes, source=source)
    return _Ranked("symptom" if _CARRIER.search(tb.exc_type) else "root", finding)


# The exception a process group raises to carry a collective's failure (NCCL timeout, NCCL error) out of
# its watchdog or a collective call: what failed is the collective, not this exception.
_CARRIER = re.compile(r"(?:^|[.:])DistBackendError$")


_ROLE_ORDER = {"root": 0, "symptom": 1, "wrapper": 2}
_GENERIC = "unhandled_exception"
_DEMOTED = {"symptom": "warning", "wrapper": "info"}


def _rank(items: list[_Ranked]) -> list[Finding]:
    roots = [r.finding for r in items if r.role == "root" and severity_rank(r.finding.severity) >= 2]
    demote, by_role = [r for r in items if r.role in _DEMOTED], bool(roots)
    if not roots:  # no root: the collective failure a log names leads, the exception carrying it follows
        carriers = [r for r in items if r.role == "symptom" and r.finding.evidence.get("signature") == _GENERIC]
        named = sorted((r.finding for r in items if r.role == "symptom" and r not in carriers
                        and severity_rank(r.finding.severity) >= 2),
                       key=lambda f: (-severity_rank(f.severity), f.evidence.get("line", 0)))
        roots, demote = named[:1], carriers
    for item in demote if roots else ():
        if severity_rank(item.finding.severity) > severity_rank(_DEMOTED[item.role]):
            item.finding.severity = _DEMOTED[item.role]
            item.finding.evidence["consequence_of"] = roots[0].evidence.get("signature")
    items.sort(key=lambda r: (_ROLE_ORDER[r.role] if by_role else 0, -severity_rank(r.finding.severity),
                              r.finding.evidence.get("line", 0)))
    return [r.finding for r in items]


def explain_text(text: str, source: str = "<stdin>") -> list[Finding]:
    """Name every distinct failure in a crash log or traceback, root cause first.

    One finding per failure (repeated lines are folded into one, with `count`, `lines` and `ranks` in
    the evidence); `step` is the last training step seen before the failure, or None. Tracebacks that
    no known signature explains become a generic `crash` finding naming the exception and the
    innermost frame in the user's own code.
    """
    lines = split_lines(text)
    all_hits = _match(lines)
    hits = _drop_superseded(all_hits)
    markers = step_markers(lines)
    tracebacks = find_tracebacks(lines)
    items = [_signature_finding(sig, hits[sig.id], lines, markers, tracebacks, source)
             for sig in SIGNATURES if sig.id in hits]
    items += _generic_findings(tracebacks, all_hits, markers, source)
    return _rank(items)
