"""The adapters' error boundary: a failure inside stethoscope is logged once and counted, never raised
into the training loop (unless the Monitor is strict, as in our tests)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def guarded(fn: F) -> F:
    """Wrap an adapter method: exceptions are counted in `self.errors` (the first one logged)."""

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - never crash the run
            self.errors = getattr(self, "errors", 0) + 1
            if self.errors == 1:
                log.warning("stethoscope failed in %s: %s; training goes on (further failures are only counted, "
                            "in the callback's `errors`)", fn.__qualname__, exc, exc_info=exc)
            if getattr(getattr(getattr(self, "monitor", None), "settings", None), "strict", False):
                raise
            return None

    return wrapper  # type: ignore[return-value]
