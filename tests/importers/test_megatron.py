from __future__ import annotations

import math
from pathlib import Path

import pytest

from stethoscope.importers.base import Columns, ImportedRun
from stethoscope.importers.megatron import GLOBAL_BATCH, LOSS_MISSING, MegatronImporter
from stethoscope.records import (
    EVAL_LOSS, GRAD_NORM, LOSS, LOSS_SCALE, LR, NAN_ITERS, SAMPLES_PER_S, SKIPPED, STEP_TIME, TFLOPS,
)
from tests.importers.series import names, series


def bloom(step: int, loss: str = "2.113567E+00", norm: str = "0.139", prefix: str = "[default7]:") -> str:
    return (f"{prefix} iteration {step:8d}/  115311 | consumed samples:     76002224 | consumed tokens: "
            "155652554752 | elapsed time per iteration (s): 111.00 | learning rate: 4.298E-05 | global batch "
            f"size:  2048 | lm loss: {loss} | grad norm: {norm} | num zeros: 0.0 | number of skipped "
            "iterations:   0 | number of nan iterations:   0 | samples per second: 18.451 | TFLOPs: 141.26 |")


def fp16(step: int, loss: str | None = "2.635663E+00", scale: str = "131072.0", norm: str = "17224.723",
         skipped: int = 0, nan: int = 0, gbs: int = 1024) -> str:
    loss_field = f" lm loss: {loss} |" if loss is not None else ""
    return (f" iteration {step:8d}/  311541 | consumed samples:     25709904 | elapsed time per iteration (ms): "
            f"25593.4 | learning rate: 9.135E-05 | global batch size: {gbs:5d} |{loss_field} loss scale: {scale} |"
            f" grad norm: {norm} | num zeros: 0.0 | number of skipped iterations: {skipped:3d} | number of nan "
            f"iterations: {nan:3d} |")


MODES = {"general": {"fast": False}, "fast": {}, "line_chunks": {"chunk_bytes": 1}, "small_chunks": {"chunk_bytes": 900},
         "regex": {"native": False}, "regex_small_chunks": {"native": False, "chunk_bytes": 900}}


@pytest.fixture(params=list(MODES))
def importer(request: pytest.FixtureRequest) -> MegatronImporter:
    """Every test runs through the general parser and through the fast paths (the line scanner's where
    it was built, the regex one), line by line and over chunks of a few lines (one line each, several):
    same answers."""
    return MegatronImporter(**MODES[request.param])


def read(importer: MegatronImporter, write, text: str) -> ImportedRun:
    return importer.read(write("train.log", text))


def test_bloom_lines_with_rank_prefix(importer, write) -> None:
    run = read(importer, write, "\n".join(bloom(s, f"{2 + s / 1e5:.6E}") for s in (45000, 45001, 45002)) + "\n")
    assert run.format == "megatron"
    assert series(run, LOSS) == {45000: 2.45, 45001: 2.45001, 45002: 2.45002}
    assert series(run, GRAD_NORM) == {45000: 0.139, 45001: 0.139, 45002: 0.139}
    assert series(run, STEP_TIME)[45001] == 111.0
    assert series(run, LR)[45002] == 4.298e-05
    assert series(run, SAMPLES_PER_S)[45000] == 18.451
    assert series(run, TFLOPS)[45000] == 141.26
    assert series(run, GLOBAL_BATCH) == {45000: 2048.0}  # written when it changes
    assert SKIPPED not in names(run) and NAN_ITERS not in names(run)  # zero counters are not written
    assert run.meta["total_iterations"] == 115311
    assert run.warnings == [] and run.lines == []


def test_ms_step_time_loss_scale_and_time_lines(importer, write) -> None:
    text = "\n".join([fp16(10), "time (ms)", fp16(20, loss="2.5E+00"), "time (ms)"])
    run = read(importer, write, text)
    assert series(run, STEP_TIME) == {10: pytest.approx(25.5934), 20: pytest.approx(25.5934)}
    assert series(run, LOSS_SCALE) == {10: 131072.0, 20: 131072.0}
    assert series(run, LOSS) == {10: 2.635663, 20: 2.5}
    assert run.lines == []


def test_hard_wrapped_record_is_rejoined(importer, write) -> None:
    # As in the BLOOM chronicle: wrapped at blanks, one kept at the start of a line, one lost.
    line = bloom(42780, prefix="[default7]:")
    first, rest = line.split(" rate: ", 1)
    second, third = rest.split(" iterations:   0 | samples", 1)
    text = "\n".join([first, " rate: " + second, "iterations:   0 | samples" + third, bloom(42781)])
    run = read(importer, write, text)
    assert series(run, TFLOPS) == {42780: 141.26, 42781: 141.26}
    assert series(run, LR) == {42780: 4.298e-05, 42781: 4.298e-05}
    assert sorted(series(run, LOSS)) == [42780, 42781]
    assert run.warnings == []


def test_validation_lines_become_eval_points(importer, write) -> None:
    text = "\n".join([
        bloom(45000),
        "[default7]:" + "-" * 60,
        "[default7]:valid loss at iteration 45000 | lm loss value: 2.327091E+00 | lm loss PPL: 1.024808E+01 |",
        " validation loss at iteration 46000 on test set | lm loss value: 2.5E+00 | lm loss PPL: 12.18 |",
    ])
    run = read(importer, write, text)
    assert series(run, EVAL_LOSS) == {45000: 2.327091}
    assert series(run, "eval/ppl") == {45000: 10.24808}
    assert series(run, "test/loss") == {46000: 2.5}


def test_missing_loss_without_skips_is_nan(importer, write) -> None:
    run = read(importer, write, "\n".join([fp16(9026, loss="7.02E+00", scale="16384.0"),
                                           fp16(9027, loss=None, scale="8192.0")]))
    assert math.isnan(series(run, LOSS)[9027])
    assert series(run, LOSS_MISSING) == {9027: 1.0}
    assert series(run, LOSS_SCALE) == {9026: 16384.0, 9027: 8192.0}
    assert "loss_nan" in run.meta["notes"]


def test_missing_loss_with_skipped_iterations_is_unknown_not_nan(importer, write) -> None:
    run = read(importer, write, "\n".join([fp16(10), fp16(20, loss=None, skipped=10)]))
    assert 20 not in series(run, LOSS)
    assert series(run, LOSS_MISSING) == {20: 1.0}
    assert series(run, SKIPPED) == {20: 10.0}


def test_missing_loss_with_nan_iterations_is_nan(importer, write) -> None:
    run = read(importer, write, fp16(20, loss=None, skipped=10, nan=3))
    assert math.isnan(series(run, LOSS)[20])
    assert series(run, NAN_ITERS) == {20: 3.0}


def test_truncated_last_line_keeps_complete_fields(importer, write) -> None:
    cut = ("iteration     3385/    8000 | consumed samples:       216640 | elapsed time per iteration (ms): "
           "7624.3 | learning rate: 6.676E-06 | global batch size:    64 | loss scale: 1.0 | gr")
    path = write("train.log", fp16(3384) + "\n" + cut)
    run = importer.read(path)
    assert series(run, LR)[3385] == 6.676e-06
    assert 3385 not in series(run, GRAD_NORM)
    assert math.isnan(series(run, LOSS)[3385])  # `loss scale` comes after the loss: it was really absent
    assert series(run, LOSS_MISSING) == {3385: 1.0}
    assert run.warnings == [f"{path}:2: record cut short; its last, unterminated field was dropped"]


def test_record_cut_before_the_loss_says_nothing_about_it(importer, write) -> None:
    run = read(importer, write, fp16(5) + "\n iteration        6/  311541 | consumed samples:   123 | elapsed")
    assert set(series(run, LOSS)) == {5}
    assert LOSS_MISSING not in names(run)
    assert len(run.warnings) == 1


def test_overflow_lines_count_as_skipped_at_the_next_record(importer, write) -> None:
    overflow = ("[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! Rank 0 "
                "Skipping step. Attempted loss scale: {}, reducing to {}")
    text = "\n".join([
        fp16(17061, scale="1048576.0"),
        overflow.format("1048576.0", "524288.0"),
        overflow.format("524288.0", "262144.0"),
        fp16(17062, scale="262144.0"),
        fp16(17063, scale="262144.0"),
        overflow.format("262144.0", "131072.0"),
    ])
    run = read(importer, write, text)
    assert series(run, SKIPPED) == {17062: 2.0, 17064: 1.0}  # the last one: after the last record
    assert series(run, LOSS_SCALE) == {17061: 1048576.0, 17062: 262144.0, 17063: 262144.0, 17064: 131072.0}
    assert [(ln.line, ln.step, ln.time) for ln in run.lines] == [
        (2, 17061, 1642597753.305), (3, 17061, 1642597753.305), (6, 17063, 1642597753.305)]


def test_zero_grad_norms_are_dropped_when_never_real(importer, write) -> None:
    run = read(importer, write, "\n".join(fp16(s, norm="0.000") for s in (29020, 29030)))
    assert GRAD_NORM not in names(run)
    assert "grad_norm_zero" in run.meta["notes"]
    assert set(series(run, LOSS)) == {29020, 29030}


def test_zero_grad_norm_is_kept_among_real_ones(importer, write) -> None:
    run = read(importer, write, "\n".join([fp16(1, norm="3.5"), fp16(2, norm="0.000"), fp16(3, norm="2.5")]))
    assert series(run, GRAD_NORM) == {1: 3.5, 2: 0.0, 3: 2.5}
    assert "notes" not in run.meta


def test_batch_size_rampup_and_counters(importer, write) -> None:
    text = "\n".join([fp16(1, gbs=16), fp16(2, gbs=16), fp16(3, gbs=32, skipped=1), fp16(4, gbs=32)])
    run = read(importer, write, text)
    assert series(run, GLOBAL_BATCH) == {1: 16.0, 3: 32.0}
    assert series(run, SKIPPED) == {3: 1.0}


def test_errors_and_timestamped_lines_are_kept(importer, write) -> None:
    text = "\n".join([
        "------------------------ arguments ------------------------",
        "  micro_batch_size ................................ 2",
        "  lr .............................................. 6e-05",
        "-------------------- end of arguments ---------------------",
        "building GPT model ...",
        fp16(43680),
        "time (ms)",
        "Traceback (most recent call last):",
        '  File "pretrain_gpt.py", line 222, in <module>',
        "    pretrain(train_valid_test_datasets_provider, model_provider, forward_step,",
        "RuntimeError: transform: failed to synchronize: cudaErrorECCUncorrectable: uncorrectable ECC error",
        "[2022-05-01 03:56:11] PULSE: tr11-176B-ml is running",
        "some ordinary chatter",
    ])
    run = read(importer, write, text)
    assert [(ln.line, ln.step) for ln in run.lines] == [(8, 43680), (9, 43680), (10, 43680), (11, 43680),
                                                         (12, 43680)]
    assert run.lines[-1].time == 1651377371.0
    assert run.meta["args"] == {"micro_batch_size": "2", "lr": "6e-05"}


def test_gpt_neox_lines(importer, write) -> None:
    text = "\n".join([
        "samples/sec: 1.702 | iteration        1/   55000 | elapsed time per iteration (ms): 18806.7 | learning "
        "rate: 1.212E-09 | approx flops per GPU: 5.7TFLOPS | lm_loss: 2.275809E+00 | number of skipped "
        "iterations:   0 | number of nan iterations:   0 |",
        "after 1 iterations memory (MB) | allocated: 19278.6 | max allocated: 27906.7 | reserved: 28864.0 | "
        "max reserved: 35216.0",
        "time (ms) | forward: 6617.48 | backward: 10201.60 | batch generator: 3237.32",
        " samples/sec: 2.721 | iteration        2/   55000 | elapsed time per iteration (ms): 11761.2 | learning "
        "rate: 2.424E-09 | approx flops per GPU: 9.1TFLOPS | lm_loss: 1.105449E+01 | number of skipped "
        "iterations:   0 | number of nan iterations:   0 |",
    ])
    run = read(importer, write, text)
    assert run.meta["dialect"] == "gpt-neox"
    assert series(run, LOSS) == {1: 2.275809, 2: 11.05449}
    assert series(run, TFLOPS) == {1: 5.7, 2: 9.1}
    assert series(run, SAMPLES_PER_S) == {1: 1.702, 2: 2.721}
    assert series(run, "perf/forward_s") == {1: pytest.approx(6.61748)}
    assert series(run, "perf/data_wait_s") == {1: pytest.approx(3.23732)}
    assert series(run, "memory/cuda_max_allocated_gib") == {1: pytest.approx(27906.7 / 1024)}


def test_nan_loss_value(importer, write) -> None:
    run = read(importer, write, "\n".join([fp16(1), fp16(2, loss="nan"), fp16(3)]))
    assert math.isnan(series(run, LOSS)[2])
    assert LOSS_MISSING not in names(run)


def test_sniff() -> None:
    imp = MegatronImporter()
    assert imp.sniff(Path("x.log"), "junk\n" + fp16(1))
    assert not imp.sniff(Path("x.log"), "iteration 5 of something")


def test_all_modes_agree_on_a_long_mixed_log(write) -> None:
    overflow = "[2022-01-19 13:09:13,305] [INFO] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8.0, reducing to 4.0"
    lines = []
    for s in range(1, 3001):
        lines.append(fp16(s, loss=f"{2 + s / 1e4:.6E}", gbs=512 if s < 1500 else 1024,
                          norm="0.000" if s % 777 == 0 else f"{1 + s / 1e3:.3f}", skipped=int(s % 500 == 0)))
        if s % 10 == 0:
            lines.append("time (ms)")
        if s % 400 == 0:
            lines += [overflow, "", " validation loss at iteration %d | lm loss value: 2.0E+00 | lm loss PPL: 7.39 |" % s]
        if s == 2000:
            cut = fp16(s + 1)
            lines[-1:] = [lines[-1], cut[:120], cut[120:]]
    lines.append("Traceback (most recent call last):")
    path = write("train.log", "\n".join(lines) + "\n")
    runs = [MegatronImporter(**mode).read(path) for mode in MODES.values()]
    for run in runs[1:]:
        assert [(p.name, p.step, p.value) for p in run.points] == [(p.name, p.step, p.value) for p in runs[0].points]
        assert run.lines == runs[0].lines and run.warnings == runs[0].warnings and run.meta == runs[0].meta
    assert len(series(runs[0], LOSS)) == 3000


def stamped(step: int, stamp: str = "2024-05-01 10:00:00", extra: str = "") -> str:
    return (f" [{stamp}] iteration {step:8d}/   10000 | consumed samples: {step * 256:12d} |{extra} elapsed time "
            f"per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 123.4 | learning rate: 1.000000E-04 | "
            f"global batch size:   256 | lm loss: {2 + step / 1000:.6E} | loss scale: 1.0 | grad norm: 1.234 | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |")


def test_megatron_lm_timestamps_become_point_times(importer, write) -> None:
    lines = [stamped(s, f"2024-05-01 10:00:{s:02d}.{s:06d}") for s in range(1, 40)]
    lines.insert(20, stamped(20, "2024-05-01 10:00:20", extra=" skipped samples:            8 |"))
    run = read(importer, write, "\n".join(lines) + "\n")
    times = {p.step: p.time for p in run.points if p.name == LOSS}
    assert times[1] == 1714557601.000001 and times[39] == 1714557639.000039
    assert series(run, TFLOPS)[5] == 123.4
    assert series(run, STEP_TIME)[5] == pytest.approx(1.2345)
    assert series(run, "train/skipped_samples") == {20: 8.0}


def test_crlf_line_ends(importer, write) -> None:
    text = "\r\n".join([fp16(1), "time (ms)", fp16(2), fp16(3, loss=None), bloom(4)]) + "\r\n"
    run = read(importer, write, text)
    assert set(series(run, LOSS)) == {1, 2, 3, 4}
    assert series(run, LOSS_MISSING) == {3: 1.0}
    assert run.warnings == []


def _awkward_log() -> str:
    """Long same-shaped stretches (read a chunk at a time) between every case the general parser handles."""
    overflow = "[2022-01-19 13:09:13,305] [INFO] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8.0, reducing to 4.0"
    neox = ("samples/sec: 1.702 | iteration {}/   55000 | elapsed time per iteration (ms): 18806.7 | learning rate: "
            "1.212E-09 | approx flops per GPU: 5.7TFLOPS | lm_loss: 2.275809E+00 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |")
    lines: list[str] = []
    for s in range(1, 6001):
        stretch, loss = s // 1000, f"{2 + s / 1e4:.6E}"
        if stretch == 0:
            lines.append(fp16(s, loss=loss))
        elif stretch == 1:
            lines.append(bloom(s, loss, prefix="[default3]:"))
        elif stretch == 2:
            lines.append(stamped(s, f"2024-05-01 10:{s % 60:02d}:{s % 60:02d}.{s:06d}"))
        elif stretch == 3:
            lines.append(neox.format(s))
        else:
            lines.append(fp16(s, loss=None if s % 997 == 0 else ("nan" if s % 991 == 0 else loss),
                              norm="0.000" if s % 599 == 0 else "1.5", gbs=512 if s < 5500 else 1024))
        if s % 50 == 0:
            lines.append("time (ms)")
        if s % 700 == 0:
            lines += [overflow, "", f" validation loss at iteration {s} | lm loss value: 2.0E+00 | lm loss PPL: 7.39 |"]
        if s % 1300 == 0:
            cut = lines.pop()
            lines += [cut[:100], cut[100:]]
    return "\r\n".join(lines[:3000]) + "\r\n" + "\n".join(lines[3000:]) + "\n iteration 6001/ 6001 | lm loss: 1.0"


def _same(columns: Columns) -> list[tuple[object, ...]]:
    """The points as comparable tuples (NaN == NaN here)."""
    return [(n, s, "nan" if math.isnan(v) else v, t) for n, s, v, t in zip(*columns)]


# The regex path reads a chunk at once only when every line in it fits: small chunks. The scanner reads
# the runs that fit within any chunk: its default (1 MiB, the whole log here) too.
@pytest.mark.parametrize(("chunk_bytes", "native"), [(2000, False), (1 << 14, False), (1 << 16, False),
                                                     (2000, True), (1 << 16, True), (1 << 20, True)])
def test_chunks_read_like_the_general_parser_on_an_awkward_log(write, monkeypatch, chunk_bytes: int, native: bool) -> None:
    from stethoscope.logtext import linescan
    from stethoscope.importers.megatron_fast import Template
    from stethoscope.importers.megatron_native import Shape

    if native and not linescan.available():
        pytest.skip("the line scanner was not built (no C compiler at install)")
    path = write("train.log", _awkward_log())
    blocks: list[object] = []
    owner, method = (Shape, "block") if native else (Template, "coded")
    make = getattr(owner, method)
    monkeypatch.setattr(owner, method, lambda self, *a: blocks.append(make(self, *a)) or blocks[-1])
    fast = MegatronImporter(chunk_bytes=chunk_bytes, native=native).read(path)
    general = MegatronImporter(fast=False).read(path)
    assert sum(getattr(block, "size", 0) > 0 for block in blocks) >= 3
    assert _same(fast.columns) == _same(general.columns)
    assert fast.lines == general.lines and fast.warnings == general.warnings and fast.meta == general.meta
    assert len(series(general, LOSS)) == 6000 and any(t is not None for t in general.columns.times)
    assert general.warnings and general.meta["notes"]


def test_bulk_float_parse_equals_float() -> None:
    import random
    import struct

    from stethoscope.importers.megatron_fast import floats

    rng = random.Random(0)
    texts = [b"-0", b"-0.0", b"0", b"1e-400", b"4.9e-324", b"2.2250738585072011e-308", b"9007199254740993",
             b"123456789012345678901234567890", b"1.00000000000000011102230246251565404236316680908203125",
             b"6.009562E+00", b"3.000E-04", b"65536.0", b"1E+05"]
    for _ in range(20000):
        x = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if math.isfinite(x):
            texts.append((rng.choice(["%r", "%.3e", "%.6E", "%.17g", "%.25g", "%.1f"]) % x).encode())
    for batch in (texts, texts[1:], texts[3:]):
        got, want = floats(batch), list(map(float, batch))
        assert [(v, math.copysign(1, v)) for v in got] == [(v, math.copysign(1, v)) for v in want]
    # not JSON numbers: float() reads them (or refuses) as before
    assert floats([b"nan", b"1.5"])[1] == 1.5 and math.isnan(floats([b"nan", b"1.5"])[0])
    assert floats([b"+1", b".5", b"1.", b"1e999", b"007"]) == [1.0, 0.5, 1.0, math.inf, 7.0]
    for bad in ([b"1,2"], [b"true"], [b'"1.5"'], [b"[1", b"2]"], [b"1x"]):
        with pytest.raises(ValueError):
            floats(bad)


def test_without_orjson_the_fast_path_reads_the_same(write, monkeypatch) -> None:
    import stethoscope.importers.megatron_fast as fast

    path = write("train.log", _awkward_log())
    with_orjson = MegatronImporter(chunk_bytes=2000).read(path)
    monkeypatch.setattr(fast, "orjson", None)
    assert _same(MegatronImporter(chunk_bytes=2000).read(path).columns) == _same(with_orjson.columns)


def test_the_scanner_reads_past_rank_prefixed_blank_lines(write, monkeypatch) -> None:
    """`[default7]:time (ms)` and `[default7]:` lines between records carry nothing: the scanner's run of
    records goes on past them (one block), and every path reads the same points."""
    from stethoscope.logtext import linescan
    from stethoscope.importers.megatron_native import Shape

    if not linescan.available():
        pytest.skip("the line scanner was not built (no C compiler at install)")
    lines = []
    for s in range(1, 401):
        lines.append(bloom(s, loss=f"{2 + s / 1e4:.6E}"))
        if s % 10 == 0:
            lines.append("[default7]:time (ms)" if s % 20 else "[default7]:")
    path = write("train.log", "\n".join(lines) + "\n")
    blocks: list[object] = []
    make = Shape.block
    monkeypatch.setattr(Shape, "block", lambda self, *a: blocks.append(make(self, *a)) or blocks[-1])
    runs = [MegatronImporter(**mode).read(path) for mode in ({}, {"native": False}, {"fast": False})]
    assert len(blocks) == 1 and blocks[0].steps.size == 399  # the first record teaches the shape
    for run in runs[1:]:
        assert _same(run.columns) == _same(runs[0].columns) and run.lines == runs[0].lines
    assert len(series(runs[0], LOSS)) == 400


@pytest.mark.parametrize("fraction", ["", ".250", ",250"])
def test_stamped_records_keep_their_times_on_every_path(write, fraction: str) -> None:
    """Megatron-LM's `[YYYY-MM-DD HH:MM:SS]` stamp, also with a fraction written either way: the same
    times through the scanner, the regex path and line by line."""
    lines = [stamped(s, f"2024-05-01 10:{s // 60 % 60:02d}:{s % 60:02d}{fraction}") for s in range(1, 301)]
    path = write("train.log", "\n".join(lines) + "\n")
    runs = [MegatronImporter(**mode).read(path) for mode in ({}, {"native": False}, {"fast": False})]
    for run in runs[1:]:
        assert _same(run.columns) == _same(runs[0].columns)
    times = {t for t in runs[0].columns.times if t is not None}
    assert len(times) == 300 and min(times) == 1714557601.0 + (0.25 if fraction else 0.0)
