"""Look inside a live run: the probe server, the hang watchdog, cross-rank health (see probe/live.py)."""

from __future__ import annotations

from stethoscope.probe.config import ProbeConfig
from stethoscope.probe.gc import SyncedGC

__all__ = ["ProbeConfig", "SyncedGC"]
