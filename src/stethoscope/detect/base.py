"""The Detector protocol. Detectors are pure: no torch, no I/O, no clock.

A detector sees one `StepRecord` at a time, in step order, and returns the findings that record
completes; `finish()` at the end of a run (or of a replayed log) closes what is still open. A later finding with the same (source, type, step) as an earlier one *supersedes* it:
that is how an incident is followed up ("recovered after 12 steps", a divergence's end_step).
"""

from __future__ import annotations

from typing import Any, Protocol

from stethoscope.records import Finding, StepRecord


class Detector(Protocol):
    name: str

    def update(self, record: StepRecord) -> list[Finding]: ...

    def finish(self) -> list[Finding]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
