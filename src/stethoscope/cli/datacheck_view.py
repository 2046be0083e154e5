"""`stethoscope check-data FILE [--eval FILE]`: a dataset's defects, before a run trains on them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.text import Text

from stethoscope.cli import render


@click.command("check-data")
@click.argument("file", type=click.Path())
@click.option("--eval", "eval_file", type=click.Path(), default=None,
              help="The eval/validation file: overlap with FILE and chat-template consistency are checked too "
                   "(default for a saved DatasetDict: its validation or test split).")
@click.option("--tokenizer", type=click.Path(), default=None,
              help="A local tokenizer.json (or a folder holding one): lengths in tokens, not characters. No downloads.")
@click.option("--max-len", type=int, default=None,
              help="Longest example the trainer keeps, in tokens (with --tokenizer or input_ids) or characters "
                   "[tokenizer_config.json's model_max_length when it sits beside the tokenizer].")
@click.option("--split", default=None, help="The split of a saved DatasetDict folder [train].")
@click.option("--near", type=click.Choice(["normalized", "minhash"]), default="normalized", show_default=True,
              help="Near duplicates: normalized (same text up to case, punctuation, spacing; fast) or minhash "
                   "(also small edits: Jaccard >= 0.8 over word 3-grams; ~3x slower, 256 bytes per row).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "never"]), default="never", show_default=True,
              help="Exit 1 when a check at or above this severity finds a problem.")
def check_data(file: str, eval_file: str | None, tokenizer: str | None, max_len: int | None, split: str | None,
               near: str, as_json: bool, fail_on: str) -> int:
    """Check a dataset: empty/over-long examples, duplicates, masked labels, NaN, templates, eval overlap.

    Reads JSONL, JSON, CSV/TSV, Parquet and folders written by datasets' save_to_disk. Rows are
    counted from 0 (as datasets and pandas count them); line numbers are given for JSONL and CSV.

    \b
    Examples:
      stethoscope check-data train.jsonl --eval valid.jsonl
      stethoscope check-data train.parquet --tokenizer ./tokenizer.json --max-len 2048
      stethoscope check-data ./my_dataset --json
    """
    from stethoscope.debug import datacheck

    source = datacheck.open_source(file, split)
    eval_source = datacheck.open_source(eval_file) if eval_file else datacheck.eval_split(file)
    tok, model_max = datacheck.load_tokenizer(tokenizer) if tokenizer else (None, None)
    with _progress(not as_json) as progress:
        result = datacheck.check(source, eval_source, tok, max_len if max_len is not None else model_max, progress,
                                 near)
    if as_json:
        click.echo(render.to_json(result))
    else:
        _print(result)
    floor = {"error": ("error",), "warning": ("error", "warning"), "never": ()}[fail_on]
    return 1 if any(c["count"] and c["severity"] in floor for c in result["checks"]) else 0


@contextmanager
def _progress(wanted: bool) -> Iterator[Callable[[Any], Callable[[int], None]]]:
    """A rich progress bar on stderr per file, only when stderr is a terminal."""
    if not (wanted and sys.stderr.isatty()):
        yield lambda source: (lambda n: None)
        return
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn(),
                  console=render.console(stderr=True), transient=True) as bar:
        def track(source: Any) -> Callable[[int], None]:
            task = bar.add_task(str(source.name)[-40:], total=source.total)
            return lambda n: bar.advance(task, n)

        yield track


def _print(result: dict[str, Any]) -> None:
    out = render.console()
    for f in result["files"]:
        length = f["length"]
        templates = ", ".join(f"{name} {count:,}" for name, count in f["templates"].items())
        out.print(Text(f"{f['file']}: {f['path']} ({f['format']}, {f['rows']:,} rows) — length in {length['unit']}: "
                       f"median {length['p50']:,}, p95 {length['p95']:,}, max {length['max']:,}"
                       + (f", limit {length['max_len']:,}" if length["max_len"] else "") + f"; templates: {templates}"))
    found = [c for c in result["checks"] if c["count"]]
    if found:
        rows = [(c["severity"], c["file"], c["title"], c["count"], f"{c['percent']:.2f}%", _where(c)) for c in found]
        out.print(render.rows_table(["severity", "file", "check", "rows", "share", "where (rows from 0)"], rows))
        for c in found:
            out.print(Text(f"{c['severity']}: {c['file']}: {c['title']} — {c['why']}"))
    passed = sorted({f"{c['title']}" for c in result["checks"] if not c["count"]} -
                    {c["title"] for c in found})
    if passed:
        out.print(Text("passed: " + "; ".join(passed)))
    out.print(Text(f"near duplicates by {result['near_duplicates']}"))
    problems = result["problems"]
    out.print(Text(f"{problems} check{'s' if problems != 1 else ''} found problems" if problems else "no problems found"))


def _where(c: dict[str, Any]) -> str:
    """The example rows of a check, with what each duplicates, its line, or its field."""
    if not c["count"]:
        return ""
    rows, lines = c["rows"], c.get("lines") or [None] * len(c["rows"])
    pairs = c.get("of_rows") or c.get("train_rows")
    parts = []
    for i, row in enumerate(rows[:5]):
        part = f"{row}" + (f" (line {lines[i]})" if lines[i] else "")
        if pairs:
            part += f" = {'train ' if 'train_rows' in c else ''}{pairs[i]}"
        if c.get("fields"):
            part += f" [{c['fields'].get(str(row))}]"
        parts.append(part)
    more = c["count"] - len(parts)
    if c["check"] == "template_mixed":
        return ", ".join(parts) + "; " + ", ".join(f"{k}: {v:,}" for k, v in c["templates"].items())
    if c["check"] == "template_mismatch":
        return ", ".join(parts) + f"; train: {c['train_template']}, eval: {c['eval_template']}"
    return ", ".join(parts) + (f" … +{more:,}" if more > 0 else "")


COMMANDS = [check_data]
