"""The training thread wakes the writer thread only when it must (a flush, a full batch of points, the end):
each wake hands it the GIL while the loop waits, 10-20 times a second on short steps (issue 28, measured
on an H200: the tiny GPT's step went 1.06-1.09x with a wake every `log_every` steps)."""

from __future__ import annotations

import threading

import torch

from stethoscope import Monitor
from stethoscope.store.query import open_run


class CountingEvent(threading.Event):
    def __init__(self) -> None:
        super().__init__()
        self.sets_from_training = 0
        self._training = threading.get_ident()

    def set(self) -> None:
        if threading.get_ident() == self._training:
            self.sets_from_training += 1
        super().set()


def test_steps_with_batch_ids_never_wake_the_writer_and_lose_nothing(tmp_path) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    mon = Monitor(tmp_path / "run", model=model, optimizer=opt, log_every=10, gpu_health=False)
    wake = CountingEvent()
    mon._recorder.queue.wake = wake  # the writer waits on whatever event the queue holds at each turn
    for step in range(40):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        mon.step(step, loss=loss, batch_ids=torch.arange(4 * step, 4 * step + 4))
    assert wake.sets_from_training == 0  # 4 flushes of 10 steps, each with its batch ids: no wake
    mon.close()
    assert wake.sets_from_training >= 1  # close does wake it, and waits for it
    with open_run(tmp_path / "run") as run:
        steps, _ = run.series("train/loss")
        assert steps == list(range(40))
        cols, rows = run.query("SELECT count(*) FROM batches")
        assert rows[0][0] == 40  # every step's batch ids reached the store though nothing woke the writer for them
