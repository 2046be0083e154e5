"""`STETHOSCOPE=1 python train.py`: imported at interpreter start by the `stethoscope-probe.pth` hook
(`stethoscope hook install` writes it into site-packages) when $STETHOSCOPE is set; starts this
process's probe server. Never raises: a process that cannot be probed still runs."""

from __future__ import annotations

import atexit
import logging

from stethoscope.config import env_autoprobe

PTH_NAME = "stethoscope-probe.pth"
PTH_LINE = ('import os; os.environ.get("STETHOSCOPE", "").strip().lower() in ("1", "true", "yes", "on") '
            'and __import__("stethoscope.probe.autostart")\n')


def _start() -> None:
    if not env_autoprobe():
        return
    try:
        from stethoscope.probe.live import start

        probe = start()
        atexit.register(probe.close)
    except Exception:  # noqa: BLE001 - never stop the user's script from starting
        logging.getLogger(__name__).debug("stethoscope: could not start the probe server", exc_info=True)


_start()
