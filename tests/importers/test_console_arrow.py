"""Long runs of one line shape read by pyarrow's CSV parser (logtext/console_arrow.py) and by the native
scanner's token columns (`_linescan.columns`) give exactly what the token-list path gives: the same points
(steps, values to the last bit, timestamps), warnings, resumes and ranks, also through everything that
sends a run back to the other paths."""

from __future__ import annotations

import random

import pytest

from stethoscope.logtext import console_arrow, linescan
from stethoscope.logtext.console_reader import ConsoleReader

pytest.importorskip("pyarrow")
N = console_arrow.MIN_LINES + 500


def _titan(s: int, rng: random.Random, rank: int = 0) -> str:
    return (f"[rank{rank}]:[titan] 2024-07-24 {11 + s // 3600 % 12:02d}:{s // 60 % 60:02d}:{s % 60:02d},"
            f"{rng.randrange(1000):03d} - root - INFO - \x1b[31mstep: {s:5}  \x1b[32mloss: {2 + rng.random():8.5f}  "
            f"\x1b[38;2;180;60;0mgrad_norm: {rng.random():7.4f}  \x1b[38;2;54;234;195mmemory: {30 + rng.random():5.2f}"
            f"GiB(41.20%)  \x1b[34mtps: {rng.randrange(10_000, 99_999):,}  \x1b[35mmfu: {40 + rng.random():.2f}%\x1b[39m\n")


def _llmc(s: int, rng: random.Random) -> str:
    return (f"step {s:5d}/99999 | train loss {2 + rng.random():7.6f} | norm {rng.random():6.4f} | lr "
            f"{6e-4 * rng.random():.2e} | {220 + rng.random():.2f} ms | {38 + rng.random():.1f}% A100 fp16 MFU | "
            f"{3400 + rng.random() * 100:.0f} tok/s\n")


def _key_equals(s: int, rng: random.Random) -> str:
    return (f"[1,{s % 2}]<stdout>: step={s} loss={2 + rng.random():.4f} lr={3e-4 * rng.random():.3e} "
            f"grad_norm={rng.random():.4f} throughput={800 + rng.random() * 10:.1f} samples/s\n")


def _dict(s: int, rng: random.Random) -> str:
    return (f"{{'loss': {round(2 + rng.random(), 4)}, 'grad_norm': {rng.random()}, 'learning_rate': "
            f"{3e-4 * (1 + rng.random()):.6f}, 'epoch': {s / 1e5:.5f}}}\n")


def _dict_alike(s: int, rng: random.Random) -> str:
    """The HF Trainer's dicts with the LR's repr switching notation: shapes read alike (`_runs`)."""
    return (f"{{'loss': {round(2 + rng.random(), 4)}, 'grad_norm': {round(rng.random(), 4)}, 'learning_rate': "
            f"{(1.5e-05, 0.00012)[s % 3 == 0]}, 'epoch': {s / 1e5:.5f}}}\n")


def _log(write_line, *, resume_at: int | None = None, damage: str | None = None, ranks: int = 1) -> bytes:
    rng = random.Random(7)
    lines = []
    for i in range(1, N + 1):
        s = 10_000 + (i if resume_at is None or i < resume_at else i - 300)  # a restart sends the counter back
        lines.append(write_line(s, rng) if ranks == 1 else write_line(s, rng, rank=i % ranks))
    if damage == "blank":
        lines[N // 2] = "\n"
    elif damage == "token":  # the shape of a number, not a number
        lines[N // 3] = lines[N // 3].replace("loss: ", "loss: 1.2.", 1).replace("loss ", "loss 1.2.", 1)
    elif damage == "cut":  # the last line without its newline
        lines[-1] = lines[-1].rstrip("\n")
    return "".join(lines).encode()


def _read(data: bytes, arrow: bool, monkeypatch, native: bool = False) -> tuple:
    """What the reader makes of `data`, and how many runs went through pyarrow (or the native columns)."""
    monkeypatch.setattr(console_arrow, "available", lambda: arrow)
    monkeypatch.setenv("STETHOSCOPE_NATIVE", "1" if native else "0")
    used = []
    module, name = (linescan, "columns") if native else (console_arrow, "read")
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a: used.append(r := real(*a)) or r)
    reader = ConsoleReader("log")
    reader.feed(data)
    run = reader.result()
    c = run.columns
    values = [v if v == v else "nan" for v in c.values]
    # the ranks seen (what the reader reports); how often each was counted depends on the pieces read
    return (list(c.names), list(c.steps), values, list(c.times), run.warnings, reader.resumes,
            sorted(reader.ranks)), sum(r is not None for r in used)


@pytest.mark.parametrize("writer, options", [
    (_titan, {}), (_titan, {"ranks": 2}), (_llmc, {}), (_llmc, {"resume_at": 3000}), (_key_equals, {}),
    (_dict, {}), (_dict_alike, {}), (_llmc, {"damage": "blank"}), (_titan, {"damage": "token"}), (_llmc, {"damage": "token"}),
    (_key_equals, {"damage": "cut"}),
], ids=["titan", "titan-2-ranks", "llm.c", "llm.c-resume", "mpirun-key=value", "hf-dict", "hf-dict-alike-shapes", "blank-line",
        "titan-bad-token", "llm.c-bad-token", "cut-last-line"])
@pytest.mark.parametrize("piece_bytes", [1 << 24, 4096], ids=["one-piece", "many-pieces"])
def test_arrow_reads_exactly_what_the_token_path_reads(writer, options, piece_bytes, monkeypatch):
    """Long runs are read in pieces (two at a time by the native scanner): many small ones give the same."""
    from stethoscope.logtext import console_reader

    monkeypatch.setattr(console_reader, "ARROW_CHUNK_BYTES", piece_bytes)
    monkeypatch.setattr(console_reader, "NATIVE_PIECE_BYTES", piece_bytes)
    data = _log(writer, **options)
    (want, _), (got, arrow_runs) = _read(data, False, monkeypatch), _read(data, True, monkeypatch)
    assert got == want
    assert len(got[0]) > N  # points were read
    if not options.get("damage"):
        assert arrow_runs >= 1  # the run went through pyarrow
    if linescan.available():
        native, native_runs = _read(data, True, monkeypatch, native=True)
        assert native == want
        if not options.get("damage"):
            assert native_runs >= 1  # the run went through the native columns


@pytest.mark.skipif(not linescan.available(), reason="the line scanner was not built (no C compiler)")
def test_a_run_the_native_columns_cannot_read_falls_back_whole():
    from stethoscope.logtext.console_tokens import Plan, _native

    plan = Plan(width=2, step=0, values=(1,), scales=(1.0,), rank=None, time=None)
    read = _native(plan, b"it 1 loss 2.5\nit 2 loss 2.4\n", 2, None)
    assert read is not None and read.steps.tolist() == [1, 2] and read.values[0].tolist() == [2.5, 2.4]
    assert _native(plan, b"it 1 loss 2.5\nit 2 loss 2.4 3\n", 2, None) is None  # one token more
    assert _native(plan, b"it 1 loss 2.5\nit 2 loss 2.4.1\n", 2, None) is None  # not a number
    assert _native(plan, b"it 1 loss 2.5\n\nit 2 loss 2.4\n", 2, None) is None  # a blank line
    assert _native(plan, b"it 1.5 loss 2.5\n", 1, None) is None  # a step int() refuses


def test_a_run_pyarrow_cannot_read_falls_back_whole():
    """A field count that differs inside what was taken as one shape: None, nothing half-read."""
    from stethoscope.logtext.console_tokens import Plan

    plan = Plan(width=2, step=0, values=(1,), scales=(1.0,), rank=None, time=None)
    read = console_arrow.read(plan, b"it 1 loss 2.5\nit 2 loss 2.4\n", 2, None)
    assert read is not None and read.steps.tolist() == [1, 2] and read.values[0].tolist() == [2.5, 2.4]
    assert console_arrow.read(plan, b"it 1 loss 2.5\nit 2 loss  2.4\n", 2, None) is None  # one field more
    assert console_arrow.read(plan, b"it 1 loss 2.5\nit 2 loss 2.4.1\n", 2, None) is None  # not a number
    assert console_arrow.read(plan, b"it 1 loss 2.5\n\nit 2 loss 2.4\n", 2, None) is None  # a blank line
    assert console_arrow.read(plan, b"it 1 loss 2.5\nit 2 loss 2.4\n", 3, None) is None  # a line short
