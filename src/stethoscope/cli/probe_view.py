"""`stethoscope probe TARGET VERB`, `probe --all RUN VERB`, `ps`, `run -- python train.py`, `hook install`:
look inside live training processes. Renders only; the probe client finds and asks."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import click

from stethoscope.cli import render
from stethoscope.errors import UsageError

EPILOG = """\b
Exit status: 0 answered (with --all: at least one rank answered; dead or unreachable ranks are rows of
their own), 1 no rank answered or the process refused, 2 usage or input error (one line on stderr)."""


@click.command("probe", epilog=EPILOG)
@click.argument("target")
@click.argument("verb", type=click.Choice(["status", "backtrace", "query", "eval", "dump", "dashboard"]))
@click.argument("arg", required=False)
@click.option("--all", "fan_out", is_flag=True, help="TARGET is a run directory: ask every rank, merged with a rank column.")
@click.option("--rank", type=int, default=None, help="Which rank of a run directory (default: the lowest).")
@click.option("--locals", "with_locals", is_flag=True, help="backtrace: each frame's locals (reprs cut to a size limit).")
@click.option("--engine", type=click.Choice(["auto", "sqlite", "duckdb"]), default="auto", show_default=True,
              help="query: auto answers SQL over metrics/points with DuckDB when installed (fast aggregates; SQLite "
                   "when DuckDB cannot parse it), else SQLite.")
@click.option("--token", default=None, help="Token for a HOST:PORT target not in the registry [$STETHOSCOPE_TOKEN].")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for each answer.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def probe(target: str, verb: str, arg: str | None, fan_out: bool, rank: int | None, with_locals: bool,
          engine: str, token: str | None, timeout: float, as_json: bool) -> None:
    """Look inside a live run: status, every thread's stack, read-only SQL, eval, dump to the store.

    TARGET is a PID, HOST:PORT, or a run directory. A Python process that never imported stethoscope
    still answers `backtrace`, through py-spy (needs ptrace permission). `dashboard` prints the address
    of the run's dashboard served by the process itself (it holds the token: open it in your browser).

    \b
    Examples:
      stethoscope probe 12345 backtrace --locals
      stethoscope probe --all runs/exp1 backtrace
      stethoscope probe runs/exp1 query "SELECT step / 1000 AS w, AVG(value) FROM metrics GROUP BY w"
    """
    from stethoscope.probe import client

    if verb in ("query", "eval") and not (arg and arg.strip()):
        raise UsageError(f"probe {verb} needs {'SQL' if verb == 'query' else 'code'}: "
                         f"stethoscope probe {target} {verb} \"…\"")
    entries = client.resolve(target, token)
    if not entries:
        _fallback(target, verb, with_locals)
        return
    if not fan_out:
        chosen = [e for e in entries if rank is None or e.rank == rank]
        if not chosen:
            raise UsageError(f"{target}: no rank {rank} (ranks: {', '.join(str(e.rank) for e in entries)})")
        entries = chosen[:1]
    if verb == "dashboard":
        for e in entries:
            click.echo(f"http://{e.address}/dashboard/?token={e.token}")
        return
    answers = client.ask_all(entries, verb, arg, with_locals, timeout, engine)
    if not fan_out and answers[0].problem is not None:  # one target: its refusal is the command's error
        a = answers[0]
        if a.status == 400:
            raise UsageError(a.problem)
        raise client.ProbeError(f"rank {a.rank} (pid {a.pid}): {a.problem}", a.status)
    _render(verb, answers, as_json, fan_out)
    if not any(a.result is not None for a in answers):
        raise SystemExit(1)
    if verb == "eval" and any(a.result is not None and a.result.get("error") for a in answers):
        raise SystemExit(1)  # the code raised: its traceback is printed, the command failed


def _fallback(target: str, verb: str, with_locals: bool) -> None:
    from stethoscope.probe import client

    if not target.isdigit():
        raise UsageError(f"{target}: no live probe found")
    pid = int(target)
    try:
        os.kill(pid, 0)  # signal 0: is there such a process at all (a typo, one that ended)?
    except ProcessLookupError:
        raise UsageError(f"pid {pid}: no such process (`stethoscope ps` lists the live runs)") from None
    except (PermissionError, OverflowError, ValueError):
        pass
    if verb != "backtrace":
        raise UsageError(f"pid {pid} has no stethoscope probe (it never started one); only `backtrace` works on "
                         "such a process (through py-spy). Start it with `stethoscope run -- python …` for the rest")
    if not client.is_python_process(pid):
        raise UsageError(f"pid {pid} is not a Python process")
    click.echo(f"pid {pid} has no stethoscope probe; stacks from py-spy:", err=True)
    click.echo(client.py_spy_dump(pid, with_locals), nl=False)


def _render(verb: str, answers: list[Any], as_json: bool, fan_out: bool) -> None:
    if as_json:
        out = [{"rank": a.rank, "pid": a.pid, "address": a.address, "ok": a.result is not None,
                "problem": a.problem, "result": a.result} for a in answers]
        click.echo(render.to_json(out if fan_out else out[0]))
        return
    for a in answers:
        if a.result is None:
            click.echo(f"rank {a.rank} (pid {a.pid}, {a.address}): {a.problem}")
    ok = [a for a in answers if a.result is not None]
    if not ok:
        return
    {"status": _status, "backtrace": _backtrace, "query": _query, "eval": _eval, "dump": _dump}[verb](ok, fan_out)


def _status(answers: list[Any], _fan_out: bool) -> None:
    cols = ["rank", "pid", "step", "steps/s", "since last step", "hang", "last finding", "uptime"]
    rows = []
    for a in answers:
        s = a.result
        hang = s.get("hang")
        f = s.get("last_finding")
        rows.append([a.rank, s.get("pid"), s.get("step"), _num(s.get("steps_per_s")),
                     render.fmt_duration(s.get("since_last_step_s")),
                     f"{hang['where']}: {hang['call']}" if hang else "-",
                     f"{f['type']} ({f['severity']}) @ {f['step']}" if f else "-", render.fmt_duration(s.get("uptime_s"))])
    render.console().print(render.rows_table(cols, rows))


def _backtrace(answers: list[Any], fan_out: bool) -> None:
    from stethoscope.probe.stacks import format_text

    for a in answers:
        r = a.result
        if fan_out or len(answers) > 1:
            click.echo(f"== rank {a.rank} (pid {r.get('pid')}, step {r.get('step')}) ==")
        click.echo(format_text(r.get("threads", [])))


def _query(answers: list[Any], fan_out: bool) -> None:
    cols = answers[0].result.get("columns", [])
    if fan_out:
        head = ["probe_rank" if "rank" in cols else "rank", *cols]
        rows = [[a.rank, *row] for a in answers for row in a.result.get("rows", [])]
    else:
        head, rows = cols, answers[0].result.get("rows", [])
    render.console().print(render.rows_table(head, rows))
    if any(a.result.get("truncated") for a in answers):
        click.echo("(rows cut at the server's limit: add a LIMIT or aggregate)", err=True)


def _eval(answers: list[Any], fan_out: bool) -> None:
    for a in answers:
        r = a.result
        prefix = f"rank {a.rank}: " if fan_out else ""
        if r.get("output"):
            click.echo(r["output"], nl=not r["output"].endswith("\n"))
        if r.get("error"):
            click.echo(f"{prefix}{r['error']}", err=True)
        elif r.get("value") is not None:
            click.echo(f"{prefix}{r['value']}")


def _dump(answers: list[Any], _fan_out: bool) -> None:
    rows = [[a.rank, a.result.get("snapshot"), a.result.get("threads"), a.result.get("store") or a.result.get("file")]
            for a in answers]
    render.console().print(render.rows_table(["rank", "snapshot", "threads", "written to"], rows))


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:.3g}"


@click.command("ps")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (never the tokens).")
def ps(as_json: bool) -> None:
    """Live processes with a probe server (this user's), their run directory, rank and address.

    \b
    Examples:
      stethoscope ps
      stethoscope ps --json
    """
    from stethoscope.probe import registry

    entries = registry.live_entries()
    if as_json:
        click.echo(render.to_json([e.public() for e in entries]))
        return
    if not entries:
        click.echo("no live stethoscope processes (started with the Monitor, `stethoscope run` or STETHOSCOPE=1)")
        return
    rows = [[e.pid, e.rank, e.world_size, e.run_dir or "-", e.address, render.fmt_duration(registry.uptime(e)),
             e.argv[:60]] for e in entries]
    render.console().print(render.rows_table(["pid", "rank", "world", "run", "address", "uptime", "command"], rows))


@click.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--allow-eval", is_flag=True, help="Answer `probe … eval` (runs code inside the process).")
@click.option("--run-dir", type=click.Path(file_okay=False), default=None,
              help="Where `dump` writes and where the probe's token file goes (default: the registry only).")
@click.option("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default: a free one).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(allow_eval: bool, run_dir: str | None, port: int, command: tuple[str, ...]) -> None:
    """Run a Python script with a probe server, for scripts that never import stethoscope.

    \b
    Examples:
      stethoscope run -- python train.py --lr 3e-4
      stethoscope run --allow-eval -- python -m mypkg.train
    """
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("nothing to run: stethoscope run -- python train.py …")
    interp = sys.executable
    if Path(argv[0]).name.startswith("python"):
        interp, argv = argv[0], argv[1:]
    elif not argv[0].endswith(".py"):
        raise UsageError(f"{argv[0]}: stethoscope run starts Python scripts (python train.py …); under torchrun, "
                         "the Monitor starts a probe on every rank")
    opts = (["--allow-eval"] if allow_eval else []) + (["--run-dir", run_dir] if run_dir else []) + \
        (["--port", str(port)] if port else [])
    cmd = [interp, "-m", "stethoscope.probe.launch", *opts, "--", *argv]
    try:
        code = subprocess.call(cmd, env=dict(os.environ))
    except FileNotFoundError:
        raise UsageError(f"{interp}: no such interpreter") from None
    raise SystemExit(code)


@click.group("hook")
def hook() -> None:
    """`STETHOSCOPE=1 python train.py` starts a probe server in any script: install the start-up hook once.

    \b
    Examples:
      stethoscope hook install      then: STETHOSCOPE=1 python train.py
      stethoscope hook remove
    """


def _pth() -> Path:
    from stethoscope.probe.autostart import PTH_NAME

    return Path(sysconfig.get_paths()["purelib"]) / PTH_NAME


@hook.command("install")
def hook_install() -> None:
    """Write the start-up hook into this environment's site-packages (it does nothing unless $STETHOSCOPE=1)."""
    from stethoscope.probe.autostart import PTH_LINE

    path = _pth()
    path.write_text(PTH_LINE)
    click.echo(f"installed {path}: STETHOSCOPE=1 python train.py now starts a probe server")


@hook.command("remove")
def hook_remove() -> None:
    """Remove the start-up hook."""
    path = _pth()
    path.unlink(missing_ok=True)
    click.echo(f"removed {path}")


COMMANDS = [probe, ps, run, hook]
