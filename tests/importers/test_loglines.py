from __future__ import annotations

import pytest

from stethoscope.logtext.loglines import (
    ALERT_HEAD, ALERT_TAIL, CONTEXT_TAIL, LineKeeper, is_alert, parse_timestamp, stamp_seconds, strip_rank,
)


@pytest.mark.parametrize("text,seconds", [
    ("[2022-05-01 03:56:11] PULSE", 1651377371.0),
    ("2022-05-01 03:56:11 | INFO | x", 1651377371.0),
    ("[2022-01-19 13:09:13,305] [INFO]", 1642597753.305),
    ("2022-05-01T03:56:11.5Z done", 1651377371.5),
    ("2022-05-01T05:56:11+02:00 done", 1651377371.0),
    ("iteration 5 at 2022-05-01 03:56:11", None),
    ("2022-13-01 03:56:11", None),
])
def test_parse_timestamp(text: str, seconds: float | None) -> None:
    assert parse_timestamp(text)[0] == seconds


def test_stamp_seconds_agrees_with_parse_timestamp() -> None:
    for stamp in ("2024-05-01 10:00:07", "2024-05-01 10:00:07.123456", "2024-12-31 23:59:59.999999"):
        assert stamp_seconds(stamp.encode()) == parse_timestamp(f"[{stamp}] iteration")[0]


def test_strip_rank() -> None:
    assert strip_rank("[default7]: iteration 5") == "iteration 5"
    assert strip_rank("[rank0]:hello") == "hello"
    assert strip_rank("[1,0]<stdout>:hello") == "hello"
    assert strip_rank("[2022-05-01 03:56:11] x") == "[2022-05-01 03:56:11] x"


@pytest.mark.parametrize("text,alert", [
    ("RuntimeError: CUDA error: an illegal memory access", True),
    ("[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout", True),
    ("NCCL INFO Channel 00/32 : 0 1 2 3", False),
    ("cudaErrorECCUncorrectable: uncorrectable ECC error encountered", True),
    ("| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.4 |", False),
    ("Volatile Uncorr. ECC", False),
    ("the learning rate schedule will change at 1000", False),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", True),
])
def test_alerts(text: str, alert: bool) -> None:
    assert is_alert(text) is alert


def test_keeper_keeps_tracebacks_whole() -> None:
    keeper = LineKeeper()
    lines = ["ordinary", "Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    boom()",
             "ValueError: boom", "ordinary again"]
    kept = [i for i, text in enumerate(lines, 1) if keeper.offer(i, text, 7)]
    assert kept == [2, 3, 4, 5]
    assert [ln.step for ln in keeper.lines()] == [7, 7, 7, 7]


def test_keeper_is_bounded_and_keeps_first_and_last_alerts() -> None:
    keeper = LineKeeper()
    n = 0
    for i in range(20_000):
        n += 1
        keeper.offer(n, f"[2022-05-01 03:56:11] note {i}", i)
        n += 1
        keeper.offer(n, f"RuntimeError: failure {i}", i)
    lines = keeper.lines()
    assert len(lines) == ALERT_HEAD + ALERT_TAIL + CONTEXT_TAIL
    texts = [ln.text for ln in lines]
    assert "RuntimeError: failure 0" in texts and "RuntimeError: failure 19999" in texts
    assert "[2022-05-01 03:56:11] note 19999" in texts and "[2022-05-01 03:56:11] note 0" not in texts
    assert [ln.line for ln in lines] == sorted(ln.line for ln in lines)
    assert keeper.alerts == 20_000
