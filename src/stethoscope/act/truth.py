"""What an alert says is what `diagnose` says: the incident `diagnose.stored.run_incidents` computes over the
run's store at the time the alert goes out.

The rules (act/rules.py) decide from the streaming findings *when* to send: a critical NaN pages at once.
Before a message leaves, on the dispatcher's thread (never the trainer's), `Truth.settle` waits for the
store's pending writes (the finding that triggered it is one input of `run_incidents`), computes the run's
incidents, and gives the alert that incident's type, step, onset, severity, message, numbers, cause and
fix. A first page that `run_incidents` grades below a channel's `min_severity` is held back on that channel
(and its later messages with it); a held incident that escalates past it pages there then. A first page below
critical that no incident holds at all (the live detector's word, which the replay over the same store
withdrew) is held likewise: every view of the run denies it; a critical one still goes out as found.

Bounded and safe: the wait and the computation get at most `budget_s` together (the computation runs on a
thread of its own, joined with a timeout). On any failure or timeout the alert goes out as the streaming
finding wrote it, and its `basis` says why; the first such fallback is logged.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from stethoscope.act.alert import Alert, headline_numbers
from stethoscope.findings.catalogue import CATALOGUE
from stethoscope.records import Finding, severity_rank

log = logging.getLogger(__name__)

RUN_INCIDENTS = "run_incidents"
"""`Alert.basis` of an alert rendered from the incident `run_incidents` computed."""
EVENT = "the run's own event (a rollback, a recovery): not a finding"
"""`Alert.basis` of an alert about something the run did, which no incident describes."""
NOT_AN_INCIDENT = "held: not among the run's incidents (diagnose of the run reports no such problem)"
"""Why a live finding below critical that the run's incidents do not hold is not paged (a critical one is)."""
_NEAR_STEPS = 50  # the default DetectConfig.lead_steps: a streaming onset this close is the same incident

Delivery = tuple[int, Alert]
Held = tuple[int, Alert, str]


class Truth:
    """Settles a batch of deliveries against the run's incidents (see the module docstring)."""

    def __init__(self, run_dir: str, rank: int, channel_severities: list[str],
                 wait_durable: Callable[[float], bool] | None = None,
                 onset_time: Callable[[int | None], float | None] | None = None,
                 incidents: Callable[[], list[Finding]] | None = None) -> None:
        self.run_dir, self.rank = run_dir, rank
        self.channel_severities = list(channel_severities)
        self.wait_durable = wait_durable
        self.onset_time = onset_time
        self.incidents = incidents or self._run_incidents
        self.pending: list[Finding] = []
        """Findings the writer has not stored yet when alerts go out (those of the run's end)."""
        self.held: set[tuple[int, str]] = set()
        """(channel, alert key) of first pages held back: the incident's later messages stay off that channel."""
        self.sent: dict[tuple[int, str], str] = {}
        """(channel, alert key) -> the highest severity sent there: an escalation to no higher one is no news."""
        self.fallbacks = 0
        self.seconds = 0.0
        """Seconds spent computing incidents so far, waits for the store included (bench/alert_truth.py)."""
        self._busy: threading.Thread | None = None
        self._over: float | None = None  # seconds the computation once took past its budget

    def settle(self, deliveries: list[Delivery], budget_s: float) -> tuple[list[Delivery], list[Held]]:
        """(what to send, rendered from the run's incidents; what to hold back, with why)."""
        try:
            found, why = self._bounded(budget_s), ""
        except Exception as exc:  # noqa: BLE001 - a failure here must never cost the page: the streaming text goes
            found, why = None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        send: list[Delivery] = []
        held: list[Held] = []
        for ch, alert in deliveries:
            incident = of_alert(found, alert) if found is not None else None
            if alert.type not in CATALOGUE:  # the run's own act (a rollback), not a finding: says what it did
                alert = dataclasses.replace(alert, basis=EVENT)
            elif incident is None and found is not None and alert.severity != "critical" and \
                    (alert.kind == "trigger" or (ch, alert.key) in self.held):  # diagnose reports no such problem
                if alert.kind == "trigger":
                    self.held.add((ch, alert.key))
                elif alert.is_final:
                    self.held.discard((ch, alert.key))
                held.append((ch, alert, NOT_AN_INCIDENT))
                continue
            elif incident is None:
                alert = self._fallback(alert, why or "not among the run's incidents")
            else:
                alert = self._rendered(alert, incident)
            verdict = self._gate(ch, alert)
            was = self.sent.get((ch, alert.key))
            if verdict is None and alert.kind == "escalate" and was is not None and \
                    severity_rank(alert.severity) <= severity_rank(was):  # the page already said this severity
                verdict = f"held: already paged at {was}"
            if verdict is None and not alert.is_final:
                self.sent[(ch, alert.key)] = max(alert.severity, was or alert.severity, key=severity_rank)
            if verdict is None:
                send.append((ch, alert))
            else:
                held.append((ch, alert, verdict))
        return send, held

    # -- the gate: a channel's min_severity against the incident's severity ------------------------------
    def _gate(self, ch: int, alert: Alert) -> str | None:
        """None to send; else why it is held back on this channel."""
        floor = self.channel_severities[ch] if ch < len(self.channel_severities) else "warning"
        below = severity_rank(alert.severity) < severity_rank(floor)
        mark = (ch, alert.key)
        if alert.kind == "trigger" or (alert.kind == "escalate" and mark in self.held):
            if below:
                self.held.add(mark)
                return f"held: the run's incidents grade it {alert.severity}, below this channel's {floor}"
            if mark in self.held:  # first page on this channel after all, one level up
                self.held.discard(mark)
                alert.kind, alert.note = "trigger", alert.note if alert.note.startswith("escalated") else \
                    f"escalated: {alert.note}"
            return None
        if mark in self.held:
            if alert.is_final:
                self.held.discard(mark)
            return "held: the channel was never paged about this incident"
        return None

    # -- rendering ----------------------------------------------------------------------------------
    def _rendered(self, alert: Alert, f: Finding) -> Alert:
        severity = f.severity
        if alert.kind != "trigger" or alert.note.startswith("escalated"):  # the rules raised it: never lower
            severity = max(alert.severity, f.severity, key=severity_rank)
        onset = alert.onset_time if f.step == alert.step else self._onset(f.step, alert.onset_time)
        return dataclasses.replace(alert, type=f.type, severity=severity, step=f.step, message=f.message,
                                   onset_time=onset, end_step=f.end_step, evidence=headline_numbers(f),
                                   cause=f.causes[0] if f.causes else None, fix=f.fixes[0] if f.fixes else None,
                                   basis=RUN_INCIDENTS)

    def _fallback(self, alert: Alert, why: str) -> Alert:
        self.fallbacks += 1
        if self.fallbacks == 1:
            log.warning("stethoscope: an alert went out as the streaming finding wrote it, not from the run's "
                        "incidents (%s); further cases are recorded in the alert's basis", why)
        return dataclasses.replace(alert, basis=f"streaming finding: {why}")

    def _onset(self, step: int | None, default: float | None) -> float | None:
        try:
            t = self.onset_time(step) if self.onset_time is not None else None
        except Exception:  # noqa: BLE001 - the writer thread changed the window under us: keep the old one
            t = None
        return default if t is None else t

    # -- the bounded computation --------------------------------------------------------------------
    def _bounded(self, budget_s: float) -> list[Finding]:
        """The run's incidents, within `budget_s` (TimeoutError past it)."""
        if self._busy is not None and self._busy.is_alive():
            raise TimeoutError("the previous computation of the run's incidents is still running")
        if self._over is not None:  # the store only grows: a run past the budget once stays past it
            raise TimeoutError(f"computing the run's incidents took longer than {self._over:.3g} s once; the store "
                               "only grows: not tried again")
        start = time.monotonic()
        deadline = start + budget_s
        if self.wait_durable is not None:
            self.wait_durable(budget_s / 2)  # past it: the incidents of what is durable by then
        box: dict[str, Any] = {}
        worker = threading.Thread(target=self._compute, args=(box,), name="stethoscope-alerts-truth", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()))
        self.seconds += time.monotonic() - start
        if worker.is_alive():
            self._busy, self._over = worker, budget_s
            raise TimeoutError(f"computing the run's incidents took longer than {budget_s:.3g} s")
        if "error" in box:
            raise box["error"]
        return box["findings"]

    def _compute(self, box: dict[str, Any]) -> None:
        try:
            box["findings"] = self.incidents()
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which falls back
            box["error"] = exc

    def _run_incidents(self) -> list[Finding]:
        from stethoscope.diagnose.stored import run_incidents  # on the first alert only: the layers above
        from stethoscope.store.query import open_run

        with open_run(self.run_dir) as reader:
            return run_incidents(reader, self.rank, pending=self.pending).findings


def of_alert(findings: list[Finding], alert: Alert) -> Finding | None:
    """The incident among `findings` that an alert is about (of its type, or of the type it was opened as)."""
    opened_as = alert.key.rsplit("/", 1)[-1].rsplit("@", 1)[0]
    return incident_of(findings, [alert.type] + ([opened_as] if opened_as != alert.type else []), alert.step)


def incident_of(findings: list[Finding], types: list[str], step: int | None) -> Finding | None:
    """The incident of one of `types` at `step`; else the incident that owns such a finding as a symptom; else
    the nearest of those types whose span holds the step or that starts within `_NEAR_STEPS` of it."""
    for t in types:
        found = next((f for f in findings if f.type == t and f.step == step), None)
        if found is None:
            found = next((f for f in findings if any(s.get("type") == t and s.get("step") == step
                                                     for s in f.symptoms)), None)
        if found is not None:
            return found
    if step is None:
        return None
    near = [f for f in findings if f.type in types and f.step is not None and
            (f.step <= step <= (f.end_step if f.end_step is not None else f.step) or abs(f.step - step) <= _NEAR_STEPS)]
    return min(near, key=lambda f: abs(f.step - step)) if near else None  # type: ignore[operator]


def incident_at(run_dir: str, rank: int, type_: str, step: int | None, budget_s: float,
                wait_durable: Callable[[float], bool] | None = None) -> tuple[Finding | None, str]:
    """The incident `run_incidents` computes for a finding of `type_` at `step` (the callbacks' stop message),
    within `budget_s`; (None, why) when there is none or it could not be computed. Never raises."""
    try:
        found = incident_of(Truth(run_dir, rank, [], wait_durable)._bounded(budget_s), [type_], step)
    except Exception as exc:  # noqa: BLE001 - the caller falls back to the streaming finding's words
        return None, f"{type(exc).__name__}: {exc}"
    return found, "" if found is not None else "not among the run's incidents"
