"""`gc_paused` pauses the process's cyclic GC on the main thread only: from a background thread (an alert
settling a run's incidents beside training) it leaves the training loop's collections alone."""

from __future__ import annotations

import gc
import threading

from stethoscope.logtext.table import gc_paused


def test_the_main_thread_pauses_the_gc_and_restores_it() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_background_thread_leaves_the_gc_running() -> None:
    seen: list[bool] = []

    def work() -> None:
        with gc_paused():
            seen.append(gc.isenabled())

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [True] and gc.isenabled()
