"""Alerts inside a live run: on the record writer's thread, after the detectors, never on the trainer's.

`LiveAlerts` wraps the live detection observer of the record writer (`record.writer.Observer`):
each batch of durable points goes to the detectors, their findings (already folded into incidents)
go through the rules, the deliveries to the dispatcher's own thread, and what became of them
(sent, failed) is written to the run's store as `alert` events, with the counts as
`stethoscope/alerts_sent` and `stethoscope/alerts_failed` points. With the store's `wait_durable` (a
Monitor's), what each alert says is the incident `run_incidents` computes when it goes out (act/truth.py):
the rules decide when to page, the run's incidents what the page says and whether it reaches a channel's
`min_severity`; a page held back that way is recorded as `held`. At the end of the run the
detectors close their incidents, still-open incidents get their `stop` message, and delivery gets
at most `timeout_s` to finish. A failure here is counted (`stethoscope/alerts_errors`) and logged once;
it never reaches training (with `strict`, tests, it is re-raised to the writer, which re-raises it later).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from stethoscope.act.config import AlertsConfig
from stethoscope.act.dispatch import Dispatcher, Outcome
from stethoscope.act.rules import AlertRules, Delivery
from stethoscope.act.truth import Truth
from stethoscope.records import Finding

log = logging.getLogger(__name__)

ALERTS_SENT = "stethoscope/alerts_sent"
ALERTS_FAILED = "stethoscope/alerts_failed"
ALERTS_ERRORS = "stethoscope/alerts_errors"
_ONSETS = 4096  # step -> wall time of the newest steps, for the onset time of a finding


class LiveAlerts:
    """An Observer (`observe(points)`, `finish()`) around the live detection one."""

    def __init__(self, detection: Any, config: AlertsConfig, write_events: Callable[[list[Any]], Any],
                 write_points: Callable[[list[Any]], Any], rank: int = 0, run_dir: str = "",
                 advise: Callable[[Finding], Finding] | None = None, clock: Callable[[], float] = time.time,
                 strict: bool = False, wait_durable: Callable[[float], bool] | None = None) -> None:
        self.detection = detection
        self.config = config
        severities = [getattr(ch, "min_severity", "warning") for ch in config.channels]
        self.rules = AlertRules(severities, config.rules, rank, run_dir, advise,
                                [bool(getattr(ch, "escalates_itself", False)) for ch in config.channels])
        self.truth = Truth(run_dir, rank, severities, wait_durable, self._onset) \
            if wait_durable is not None and run_dir else None
        self.dispatcher = Dispatcher(config.channels, config.retries, settle=None if self.truth is None else self.truth.settle,
                                     settle_s=config.timeout_s)
        self.errors = 0
        self.strict = strict
        self._write_events, self._write_points = write_events, write_points
        self._clock = clock
        self._status = "completed"
        self._times: OrderedDict[int, float] = OrderedDict()
        self._last: tuple[int, float | None] = (0, None)
        self._counts = (0, 0)

    def run_ended(self, status: str) -> None:
        """Called by the Monitor (training thread) before it closes the writer: how the run ended."""
        self._status = status

    # -- the writer thread ----------------------------------------------------------------------
    def observe(self, points: Sequence[tuple[str, int, float, Any]]) -> list[Finding]:
        return self.see(points, self.detection.observe(points))

    def finish(self) -> list[Finding]:
        return self.end(self.detection.finish())

    def see(self, points: Sequence[tuple[str, int, float, Any]], findings: list[Finding]) -> list[Finding]:
        """A stage of the Monitor's observer chain (capture/observers.py): the rules over these findings."""
        self._guard(self._on_points, points, findings)
        return findings

    def end(self, findings: list[Finding]) -> list[Finding]:
        self._guard(self._on_end, findings)
        return findings

    def _on_points(self, points: Sequence[tuple[str, int, float, Any]], findings: list[Finding]) -> None:
        times = self._times
        seen = None
        for _, step, _, t in points:
            if step != seen and t is not None and step not in times:
                times[step] = t
            seen = step
        if points:
            self._last = (points[-1][1], points[-1][3])
        while len(times) > _ONSETS:
            times.popitem(last=False)
        now = self._clock()
        deliveries = self.rules.on_findings(findings, now, self._onset) if findings else []
        self._submit(deliveries + self.rules.tick(now))
        self._record(self.dispatcher.outcomes())

    def _on_end(self, findings: list[Finding]) -> None:
        if self.truth is not None:  # the writer stores them after this stage: the last messages still see them
            self.truth.pending = list(findings)
        now = self._clock()
        deliveries = self.rules.on_findings(findings, now, self._onset) if findings else []
        self._submit(deliveries + self.rules.run_ended(self._status, self._last[0], now))
        self.dispatcher.close(self.config.timeout_s)
        self._record(self.dispatcher.outcomes())

    def _onset(self, step: int | None) -> float | None:
        if step is None:
            return None
        t = self._times.get(step)
        if t is None and self._times:  # a step older than the kept window: the nearest kept one
            t = next(iter(self._times.values()))
        return t

    def _submit(self, deliveries: list[Delivery]) -> None:
        if deliveries:
            self.dispatcher.submit(deliveries)

    def _record(self, outcomes: list[Outcome]) -> None:
        if not outcomes:
            return
        self._write_events([_event(o) for o in outcomes])
        counts = (self.dispatcher.sent, self.dispatcher.failed)
        if counts != self._counts:
            step, t = self._last
            self._write_points([(ALERTS_SENT, step, float(counts[0]), t), (ALERTS_FAILED, step, float(counts[1]), t)])
            self._counts = counts

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - alerts must never cost the run its findings or its life
            self.errors += 1
            if self.strict:
                raise  # tests: the writer records it and re-raises at flush/close
            if self.errors == 1:
                log.exception("stethoscope alerts failed (further failures are only counted, in %s)", ALERTS_ERRORS)
            try:
                self._write_points([(ALERTS_ERRORS, self._last[0], float(self.errors), self._last[1])])
            except Exception:  # noqa: BLE001 - the store itself is failing: the writer counts that
                pass

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The rules' state (open alerts, cooldowns): saved with a checkpoint, a resumed run does not re-page."""
        held = sorted(self.truth.held) if self.truth is not None else []
        return {"rules": self.rules.state_dict(), "held": [list(h) for h in held]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rules.load_state_dict(state.get("rules", {}))
        if self.truth is not None:
            self.truth.held = {(int(ch), str(key)) for ch, key in state.get("held", [])}


def knowledge_advice() -> Callable[[Finding], Finding]:
    """The diagnosis' causes and fixes per finding type (`findings.advice`: the same advice `diagnose` gives)."""
    from stethoscope.findings.advice import advise

    def advise_copy(f: Finding) -> Finding:
        return advise(Finding.from_dict(f.to_dict()))  # a copy: the finding stored in the run stays as found
    return advise_copy


def _event(o: Outcome) -> tuple[int | None, float, str, str, str, str, dict[str, Any]]:
    """An `alert` event row: (step, time, kind, severity, source, message, data)."""
    a = o.alert
    status = "sent" if o.ok else "held" if o.held else "failed"
    message = f"{status} {'back from' if o.held else 'to'} {o.channel} ({o.target}): {a.title()}"
    if o.error:
        message += f" — {o.error}"
    data = {"status": status, "channel": o.channel, "target": o.target, "attempts": o.attempts, "error": o.error,
            "alert": a.to_dict()}
    return (a.step, o.time, "alert", a.severity, "alerts", message, data)
