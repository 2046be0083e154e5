"""`stethoscope diagnose`, `explain`, `import`, `report` and `compare`."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.text import Text

from stethoscope.cli import render
from stethoscope.cli.findings_view import fails, print_findings, shown
from stethoscope.errors import InputError, StethoscopeError, UsageError
from stethoscope.importers.base import ImportedRun
from stethoscope.records import severity_rank

if TYPE_CHECKING:
    from stethoscope.detect.config import DetectConfig

BIG_INPUT_BYTES = 20 << 20


def _status(path: str, what: str) -> Any:
    """A spinner on stderr for inputs big enough to take a while; a no-op context otherwise."""
    import contextlib

    p = Path(path)
    size = p.stat().st_size if p.is_file() else 0
    if size < BIG_INPUT_BYTES or not sys.stderr.isatty():
        return contextlib.nullcontext()
    return render.console(stderr=True).status(f"{what} {p.name} ({size / 2**20:,.0f} MiB)…")


def detect_config(config_file: str | None, overrides: tuple[str, ...]) -> DetectConfig | None:
    """The detectors' thresholds: the [detect] table of `config_file` (detect/config_file.py), then `--set`
    overrides; None for the defaults. A bad key or value is a UsageError (exit 2) naming it and what is valid."""
    if config_file is None and not overrides:
        return None
    from stethoscope.detect.config import DetectConfig
    from stethoscope.detect.config_file import load_detect_config

    config = load_detect_config(config_file) if config_file is not None else DetectConfig()
    try:
        return config.with_overrides(overrides)
    except ValueError as exc:
        raise UsageError(f"--set: {exc}") from None


def diagnose_paths(paths: tuple[str, ...], as_json: bool, fail_on: str, rank: int | None,
                   config: DetectConfig | None = None, min_severity: str | None = None) -> int:
    """Diagnose every input; one that cannot be read is named on stderr (exit 2) and the others still
    printed. Returns the exit status."""
    from stethoscope.diagnose.engine import diagnose_run
    from stethoscope.diagnose.sources import RUN_FORMAT
    from stethoscope.diagnose.stored import run_incidents
    from stethoscope.store.query import is_run, open_run

    if "-" in paths and not Path("-").exists():
        raise UsageError("-: diagnose reads files, not stdin: save the log first (`python train.py 2>&1 | tee "
                         "train.log`), then `stethoscope diagnose train.log`; `stethoscope explain -` reads a crash "
                         "log from stdin")
    results, failed = [], []
    inputs = _inputs(paths)
    for path, stored in inputs:
        try:
            if is_run(Path(path)):  # a stored run: the incidents every view prints (diagnose/stored.py)
                with _status(path, "diagnosing"), open_run(path) as reader:
                    results.append(read_input(lambda _: run_incidents(reader, rank, config), path))
                continue
            with _status(path, "reading"):
                runs = _foreign(path, rank, stored)
                runs = _with_steps(runs, RUN_FORMAT) if runs or not stored else []
            if rank is not None and runs:  # a foreign log keeps one rank's lines (the first seen) whatever --rank says
                read = sorted({r.meta["rank"] for r in runs if "rank" in r.meta})
                click.echo(f"stethoscope: note: {path}: --rank applies to stethoscope runs; this log is read as "
                           + (f"rank {read[0]}'s lines (the first rank seen)" if read else "one stream of records"),
                           err=True)
        except UsageError as exc:
            crash = None if getattr(exc, "structured", False) else _crash_log(path)
            if crash is not None:  # no training steps, but a failure `explain` names: explained as it does
                results.append(crash)
                continue
            if len(inputs) == 1:
                raise
            failed.append(str(exc))
            click.echo(f"stethoscope: error: {exc}", err=True)
            continue
        for run in runs:
            _warn(run)
            with _status(path, "diagnosing"):
                results.append(diagnose_run(run, config))
    if as_json:
        dicts = [_json(d, min_severity) for d in results]
        click.echo(render.to_json(dicts[0] if len(dicts) == 1 and len(inputs) == 1 else dicts))
    else:
        con = render.console()
        for d in results:
            con.print(_header(d))
            if d.classification.get("label") == "too_short" and not shown(d.findings, min_severity or "warning"):
                steps = f"{d.steps:,} step{'s' * (d.steps != 1)}"
                con.print(Text(f"  {steps}: too few to judge ({d.classification.get('detail')})"))
            else:
                print_findings(con, d.findings, min_severity=min_severity or "warning")
    if failed:
        return 2
    return 1 if any(fails(d.findings, fail_on) for d in results) else 0


def _inputs(paths: tuple[str, ...]) -> list[tuple[str, list[Path]]]:
    """Each input with the stored runs of its folder: a folder holding runs gives each run (read, and failing,
    on its own), then the folder itself for the foreign logs beside them."""
    out: list[tuple[str, list[Path]]] = []
    for path in paths:
        stored = _stored_runs(path)
        if stored and stored[0] != Path(path):
            out += [(str(d), []) for d in stored]
        out.append((path, stored))
    return out


def _stored_runs(path: str) -> list[Path]:
    """The stethoscope runs `path` is or holds (a folder of runs, an imported log of several runs)."""
    from stethoscope.cli.listing import find_runs

    p = Path(path)
    return find_runs(p) if p.is_dir() else []


def _foreign(path: str, rank: int | None, stored: list[Path]) -> list[ImportedRun]:
    """The foreign logs read from `path`, less those inside a stored run's folder (its own exports, such as
    its tensorboard/ event files: the run is read from its store). A folder holding runs and no log: none."""
    from stethoscope.diagnose.sources import load

    try:
        runs = read_input(load, path, rank)
    except InputError:
        if not stored:
            raise
        return []
    return [r for r in runs if not any(Path(r.path).is_relative_to(d) for d in stored)]


def _json(d: Any, min_severity: str | None) -> dict[str, Any]:
    out = d.to_dict()
    if min_severity is not None:
        floor = severity_rank(min_severity)
        out["findings"] = [f for f in out["findings"] if severity_rank(f["severity"]) >= floor]
    return out


def _header(d: Any) -> Text:
    """`PATH  (format, last step N, M steps logged)  run: …` (the word agrees with the verdict below it), the
    path as plain text (never markup)."""
    head = Text()
    head.append(d.path, style="bold")
    last = f"last step {d.last_step:,}, " if getattr(d, "last_step", None) is not None else ""
    head.append(f"  ({d.format}, {last}{d.steps:,} step{'s' * (d.steps != 1)} logged)  run: ")
    head.append(d.label, style="bold")
    return head


def read_input(read: Callable[..., Any], path: str, *args: Any) -> Any:
    """`read(path, *args)`, where a reader's own failure (a bug on input it did not expect) becomes one line
    naming the file: the CLI never shows a traceback (--debug shows the one behind it)."""
    try:
        return read(path, *args)
    except InputError as exc:
        raise _binary(exc) from None
    except (StethoscopeError, OSError):
        raise
    except OverflowError as exc:  # a number in the file beyond 64 bits: the input, not the reader
        raise InputError(path, str(exc)[:200]) from exc
    except Exception as exc:  # noqa: BLE001 - the boundary between a reader and the person
        raise InputError(path, f"could not be read ({type(exc).__name__}: {str(exc)[:200]}); this is a bug in "
                               "stethoscope's reader: please report it with the file") from exc


def _binary(exc: InputError) -> InputError:
    """'no known log format' said of a binary file (an image, a checkpoint, a zip) says it is one: the list of
    formats tried reads as if a text log had been misread."""
    p = Path(exc.path)
    if not exc.problem.startswith("no known log format") or not p.is_file():
        return exc
    with p.open("rb") as f:
        head = f.read(4096)
    odd = sum(b == 0 or (b < 32 and b not in (9, 10, 12, 13, 27)) for b in head)
    if odd <= max(8, len(head) // 20) or head.startswith(b"SQLite format 3\x00"):  # a database: its readers tried it
        return exc
    return InputError(p, f"binary data, not a text log ({odd} of its first {len(head):,} bytes are not text); "
                         "stethoscope reads training logs and metric files (docs/log-formats.md)")


def _crash_log(path: str) -> Any:
    """A log with no training step in it whose failures `stethoscope explain` names (a traceback, NCCL
    lines): those findings, said on stderr to be a crash log's; None when it is none."""
    from stethoscope.diagnose.engine import Diagnosis
    from stethoscope.explain import explain_text
    from stethoscope.importers.source import read_text

    try:
        findings = explain_text(read_text(Path(path)), path) if Path(path).is_file() else []
    except (OSError, ValueError):
        return None
    if all(f.evidence.get("handled") for f in findings):  # only logging errors the handler swallowed: no crash
        return None
    click.echo(f"stethoscope: note: {path}: no training steps, a crash log: explained as "
               f"`stethoscope explain {path}` does", err=True)
    return Diagnosis(path, "crash log", 0, findings, {"label": "crashed"})


# Files whose format is known by their structure (a JSON state, a CSV/JSONL table, event files): one whose rows
# were all refused is malformed input (exit 2 naming the rows), never a crash log to explain.
_STRUCTURED = ("hf_trainer_state", "lightning_csv", "tensorboard", "csv", "jsonl")


def _with_steps(runs: list[ImportedRun], own_format: str) -> list[ImportedRun]:
    """A foreign log from which no training step was read is never "no problems found": exit 2 naming
    it and the closest shape seen when nothing else was read; a warning and the others otherwise."""
    from stethoscope.importers.console import zero_steps

    empty = [r for r in runs if r.format != own_format and not r.meta.get("source_format") and not r.n_points]
    if empty and len(empty) == len(runs):
        if empty[0].format in _STRUCTURED:  # rows of a known file, each refused: why, not a crash-log reading
            error = InputError(empty[0].path, f"no usable record in this {empty[0].format} file: "
                               + ("; ".join(w.removeprefix(f"{empty[0].path}: ") for w in empty[0].warnings[:3])
                                  or "it holds no step with a metric"))
            error.structured = True  # type: ignore[attr-defined]
            raise error
        raise UsageError(zero_steps(empty[0]))
    for run in empty:
        click.echo(f"stethoscope: warning: {zero_steps(run)}", err=True)
    return [r for r in runs if all(r is not e for e in empty)]


def _warn(run: ImportedRun, limit: int = 10) -> None:
    """What an importer could not read (a truncated line, a non-number), on stderr: stdout stays JSON."""
    for w in run.warnings[:limit]:
        click.echo(f"stethoscope: warning: {w}", err=True)
    if len(run.warnings) > limit:
        click.echo(f"stethoscope: warning: … and {len(run.warnings) - limit} more in {run.path}", err=True)


def explain_source(source: str, as_json: bool, fail_on: str) -> int:
    from stethoscope.explain import explain_text

    if source == "-":
        text, name = sys.stdin.read(), "<stdin>"
    else:
        from stethoscope.importers.source import read_text

        path = Path(source)
        if not path.is_file():
            raise InputError(path, "no such file" if not path.exists() else "a directory; give the log file")
        text, name = read_text(path), source  # a .gz log is decompressed
    _check_text(text, name)
    findings = explain_text(text, name)
    if as_json:
        click.echo(render.to_json({"path": name, "findings": [f.to_dict() for f in findings]}))
    else:
        con = render.console()
        con.print(Text(name, style="bold"))
        if findings:
            print_findings(con, findings)
        else:
            con.print("  no known failure signature found (the text has no traceback or error we recognise)")
    return 1 if fails(findings, fail_on) else 0


def _check_text(text: str, name: str) -> None:
    """An empty or binary input is said to be one, not 'no known failure signature'."""
    if not text.strip():
        raise InputError(name, "empty: no text to explain (give the log of the failed run, or pipe it: … 2>&1 | "
                               "stethoscope explain -)")
    sample = text[:65536]
    odd = sum(ch == "\x00" or ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\x1b\x0c") for ch in sample)
    if odd > max(8, len(sample) // 20):
        raise InputError(name, f"binary data, not a text log ({odd} of the first {len(sample):,} characters are not "
                               "text); explain reads crash logs and tracebacks")


def import_source(source: str, into: str, as_json: bool) -> None:
    from stethoscope.diagnose.sources import RUN_FORMAT, import_into

    done = read_input(import_into, source, into, lambda runs: _with_steps(runs, RUN_FORMAT))
    if as_json:
        click.echo(render.to_json([{"run": str(t), "path": r.path, "format": r.format, "points": r.n_points,
                                    "steps": r.steps, "warnings": r.warnings} for t, r in done]))
        return
    con = render.console()
    for target, run in done:
        con.print(Text(f"imported {run.path} ({run.format}): {run.n_points:,} points over {run.steps:,} "
                       f"logged steps → {target}"))
        _warn(run)  # on stderr, as diagnose says it: stdout stays what was imported


def report_input(run: ImportedRun, findings: list[Any]) -> Any:
    from stethoscope.report.html import ReportInput

    series: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    cols = run.columns
    for name, step, value in zip(cols.names, cols.steps, cols.values):
        steps, values = series[name]
        steps.append(step)
        values.append(value)
    title = Path(run.path).name if Path(run.path).name not in ("trainer_state.json", "metrics.csv", "train.log") \
        else f"{Path(run.path).parent.name}/{Path(run.path).name}"
    meta = {"format": run.format, "path": run.path, **run.meta}
    return ReportInput(title=title, series=dict(series), findings=findings, meta=meta)


def write_report(path: str, out: str, rank: int | None, config: DetectConfig | None = None) -> Path:
    from stethoscope.cli.listing import one_run
    from stethoscope.diagnose.sources import load
    from stethoscope.report.html import render_report

    path = one_run(path, "report") if Path(path).is_dir() else path  # a log is reported as it is
    runs = read_input(load, path, rank)
    if len(runs) > 1:
        names = ", ".join(r.path for r in runs[:4]) + (", …" if len(runs) > 4 else "")
        raise UsageError(f"{path}: holds {len(runs)} runs ({names}); a report is of one run: "
                         f"`stethoscope import {path} --into DIR` stores each in a folder of DIR to report, or "
                         f"`stethoscope compare {path}` draws them side by side")
    run = runs[0]
    _warn(run)
    page = report_input(run, _incidents(path, run, rank, config).findings)
    page.ranks = _rank_series(path)
    html = render_report(page)
    target = Path(out)
    target.write_text(html, encoding="utf-8")
    return target


def _rank_series(path: str) -> dict[int, dict[str, tuple[list[int], list[float]]]] | None:
    """A run of several ranks: each rank's lines of the dashboard's per-rank charts (loss, step time, tokens/s,
    grad norm, memory, GPU), so a straggler the findings name is seen beside the others; None for one rank."""
    from stethoscope.serve.data import RANK_METRICS
    from stethoscope.store.query import is_run, open_run

    if not is_run(Path(path)):
        return None
    with open_run(path) as reader:
        if len(reader.ranks) < 2:
            return None
        ranks = {k: {m: reader.series(m, k) for m in RANK_METRICS} for k in reader.ranks}
    return {k: {m: xy for m, xy in per.items() if xy[0]} for k, per in ranks.items()}


def _incidents(path: str, run: ImportedRun, rank: int | None, config: DetectConfig | None) -> Any:
    """What every view shows of `run` (read from `path`): a stored run's `run_incidents`, a log's diagnosis."""
    from stethoscope.diagnose.engine import diagnose_run
    from stethoscope.diagnose.stored import run_incidents
    from stethoscope.store.query import is_run, open_run

    if not is_run(Path(path)):
        return diagnose_run(run, config)
    with open_run(path) as reader:
        return read_input(lambda _: run_incidents(reader, rank, config), path)


def write_compare(paths: tuple[str, ...], out: str, config: DetectConfig | None = None) -> tuple[Path, list[Any]]:
    from stethoscope.report.html import render_compare
    from stethoscope.diagnose.sources import load

    inputs = []
    for given in paths:
        stored = [str(d) for d in _stored_runs(given)]
        for path in stored or [given]:  # a folder of runs: each of them
            runs = read_input(load, path)
            for run in runs:
                page = report_input(run, _incidents(path, run, None, config).findings)
                if not stored and len(runs) == 1 and Path(given).is_dir():  # the folder named, not the log found
                    page.title = given.rstrip("/")  # in it (two lightning_logs/version_N: events.out.tfevents.…)
                inputs.append(page)
    if len(inputs) < 2:
        raise UsageError("compare needs at least two runs")
    target = Path(out)
    target.write_text(render_compare(inputs), encoding="utf-8")
    return target, inputs


def _hyperparameters(meta: dict[str, Any]) -> dict[str, Any]:
    """The run's config: ours (`config`), Lightning's hparams.yaml (`hparams`), or both."""
    found = {k: meta[k] for k in ("config", "hparams") if isinstance(meta.get(k), dict) and meta[k]}
    return next(iter(found.values())) if len(found) == 1 else found


def print_compare(inputs: list[Any]) -> None:
    from stethoscope.report.html import flatten, logged_steps
    from stethoscope.records import EVAL_LOSS, LOSS, TOKENS_PER_S

    flat = [flatten(_hyperparameters(i.meta)) for i in inputs]
    keys = sorted({k for f in flat for k in f})
    differ = [k for k in keys if len({f.get(k) for f in flat}) > 1]
    cols = ["", *[i.title for i in inputs]]
    rows = [[k, *[f.get(k, "-") for f in flat]] for k in differ]
    def lowest(v: Any) -> float | None:  # as show's summary: NaN (SQL's NULL) left out of a min or a median
        kept = sorted(x for x in v if x == x)
        return kept[0] if kept else None

    def middle(v: Any) -> float | None:
        kept = sorted(x for x in v if x == x)
        return kept[len(kept) // 2] if kept else None

    for label, name, agg in (("last loss", LOSS, lambda v: v[-1]), ("min eval loss", EVAL_LOSS, lowest),
                             ("median tokens/s", TOKENS_PER_S, middle)):
        rows.append([label, *[agg(i.series[name][1]) if name in i.series and len(i.series[name][1]) else None
                              for i in inputs]])
    rows.append(["steps logged", *[logged_steps(i.series) for i in inputs]])
    rows.append(["findings ≥ warning", *[sum(f.severity != "info" for f in i.findings) for i in inputs]])
    render.console().print(render.rows_table(cols, rows, title="config that differs, and outcomes"))
