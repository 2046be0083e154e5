"""`stethoscope ckpt list|verify|prune|inspect DIR`: checkpoints on disk, ours and other tools'."""

from __future__ import annotations

from pathlib import Path

import click

from stethoscope.cli import render
from stethoscope.errors import UsageError

_UNVERIFIED = ("unverified: the manifest and every file's size checked, not the contents; "
               "`stethoscope ckpt verify DIR` checks every hash")


@click.group("ckpt")
def ckpt() -> None:
    """Checkpoints: list, verify hashes, apply retention, inspect contents (also HF and Megatron layouts).

    \b
    Examples:
      stethoscope ckpt list runs/demo
      stethoscope ckpt verify runs/demo
      stethoscope ckpt inspect output/checkpoint-500
    """


def _root(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file or folder")
    return p


def _checkpoints_of(root: Path) -> Path:
    """`root`, or the checkpoint folder of the run folder `root` (`runs/demo` -> `runs/demo/checkpoints`) when
    it holds no checkpoint itself."""
    if (root / "manifest.json").is_file() or any(root.glob("step-*")) or any(root.glob("superseded-step-*")):
        return root
    for name in ("checkpoints", "ckpt"):
        if (root / name).is_dir():
            return root / name
    return root


@ckpt.command("list")
@click.argument("dir", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_(dir: str, as_json: bool) -> None:
    """Every checkpoint with step, size, status: `unverified` (manifest and file sizes checked; `verify`
    checks the hashes), corrupt or partial.

    \b
    Examples:
      stethoscope ckpt list runs/demo
      stethoscope ckpt list output/ --json
    """
    root = _checkpoints_of(_root(dir))
    rows = _rows(root, verify=False)
    _print(rows, as_json, f"checkpoints in {root if root != Path(dir) else dir}")
    if not as_json and any(r["status"] == "unverified" for r in rows):
        click.echo(_UNVERIFIED)


@ckpt.command()
@click.argument("dir", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def verify(ctx: click.Context, dir: str, as_json: bool) -> None:
    """Check every file of every checkpoint against its manifest (size and content hash).

    Exit status 1 when any checkpoint is corrupt or half-written.

    \b
    Examples:
      stethoscope ckpt verify runs/demo
      stethoscope ckpt verify runs/exp1/ckpt/step-00000500 --json
    """
    root = _checkpoints_of(_root(dir))
    rows = _rows(root, verify=True)
    _print(rows, as_json, f"verified {root if root != Path(dir) else dir}")
    bad = [r for r in rows if r["status"] not in ("ok", "foreign")]
    if not as_json:
        click.echo(f"{len(rows) - len(bad)} ok, {len(bad)} bad" + ("" if not bad else
                   ": " + "; ".join(f"{r['path']}: {r['reason']}" for r in bad)))
    ctx.exit(1 if bad else 0)


@ckpt.command()
@click.argument("dir", type=click.Path(file_okay=False))
@click.option("--keep-last", type=int, default=3, show_default=True, help="Newest checkpoints to keep.")
@click.option("--keep-best", default=None, metavar="METRIC", help="Also keep the best by this metric (e.g. eval/loss).")
@click.option("--best-mode", type=click.Choice(["min", "max"]), default="min", show_default=True,
              help="Which end of --keep-best is best.")
@click.option("--corrupt", is_flag=True, help="Also delete corrupt and half-written checkpoints (verifies first).")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
def prune(dir: str, keep_last: int, keep_best: str | None, best_mode: str, corrupt: bool, dry_run: bool) -> None:
    """Apply retention: keep the newest N, the best and every milestone; never the newest verified one.

    \b
    Examples:
      stethoscope ckpt prune runs/demo --keep-last 2 --dry-run
      stethoscope ckpt prune runs/demo --keep-best eval/loss --corrupt
    """
    from stethoscope.checkpoint import disk, retention

    if keep_last < 1:
        raise UsageError(f"--keep-last must be >= 1, got {keep_last}")
    root = _checkpoints_of(_root(dir))  # a run folder, as list/verify
    infos = disk.catalogue(root, check_hashes=corrupt)
    gone = retention.to_delete(infos, keep_last, keep_best, best_mode)
    if corrupt:
        ok = [i for i in infos if i.status == "ok"]
        newest_ok = ok[-1].step if ok else None
        gone += [i for i in infos if i.status != "ok" and (newest_ok is None or i.step != newest_ok)]
    for info in gone:
        if not dry_run:
            disk.delete_checkpoint(info.path)
        click.echo(f"{'would delete' if dry_run else 'deleted'} {info.path} (step {info.step}, {info.status})")
    aside = sum(1 for p in root.glob("superseded-step-*") if p.is_dir())  # `ckpt list` shows them; retention never
    kept = f"{len(infos) - len(gone)} kept" + (f", and {aside} set aside by a rollback (superseded-step-*: kept, never "
                                               f"resumed from; delete them by hand once the run is understood)" if aside else "")
    click.echo(f"{len(gone)} {'to delete' if dry_run else 'deleted'}, {kept}")
    if any(i.status == "unverified" for i in infos):
        click.echo(_UNVERIFIED)


@ckpt.command()
@click.argument("path", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the description as JSON.")
@click.option("--trust", is_flag=True, help="Unpickle Python objects in .pt files (only files you trust).")
@click.option("--tensors", "max_tensors", type=int, default=50, show_default=True, help="Tensors to print.")
def inspect(path: str, as_json: bool, trust: bool, max_tensors: int) -> None:
    """What a checkpoint holds: step, files and sizes, tensor keys with shapes and dtypes.

    Reads ours (step-N/), HF Trainer (checkpoint-N/) and Megatron (iter_XXXXXXX/, or the folder with
    latest_checkpointed_iteration.txt). Loads with weights_only unless --trust.

    \b
    Examples:
      stethoscope ckpt inspect runs/exp1/ckpt/step-00000500
      stethoscope ckpt inspect output/checkpoint-500 --json
      stethoscope ckpt inspect megatron_ckpt/
    """
    from stethoscope.checkpoint.inspect import WEIGHTS
    from stethoscope.checkpoint.inspect import inspect as describe

    info = describe(_checkpoints_of(_root(path)), trust=trust, max_tensors=max(max_tensors, 0) if not as_json else 100_000)
    if not any(Path(f["name"]).suffix in WEIGHTS for f in info["files"]):  # a run folder, a log folder: no checkpoint
        raise UsageError(f"{info['path']}: no checkpoint here (no {', '.join(WEIGHTS)} file); "
                         "`stethoscope ckpt list DIR` lists the checkpoints a folder holds")
    if info["note"]:
        click.echo(f"note: {info['note']}", err=True)
    if as_json:
        click.echo(render.to_json(info))
        return
    con = render.console()
    items = [("path", info["path"]), ("layout", info["layout"]), ("step", info["step"]),
             ("files", len(info["files"])), ("bytes", info["bytes"]), ("tensors", len(info["tensors"]))]
    items += [(f"trainer_state.{k}", v) for k, v in (info.get("trainer_state") or {}).items()]
    con.print(render.kv_table(items, title="checkpoint"))
    con.print(render.rows_table(("file", "bytes"), [(f["name"], f["bytes"]) for f in info["files"]]))
    if info["tensors"]:
        rows = [(t["file"], t["key"], "x".join(map(str, t["shape"])) or "scalar", t["dtype"], t["bytes"])
                for t in info["tensors"][:max_tensors]]
        con.print(render.rows_table(("file", "key", "shape", "dtype", "bytes"), rows))
    for problem in info["problems"]:
        click.echo(f"note: {problem}")


def _rows(root: Path, verify: bool) -> list[dict]:
    from stethoscope.checkpoint import disk
    from stethoscope.checkpoint.inspect import checkpoints_in

    if (root / "manifest.json").is_file():  # one checkpoint folder
        return [disk.describe(root, disk.step_of(root), verify).to_dict()]
    ours = [i.to_dict() for i in disk.catalogue(root, check_hashes=verify)]
    for p in sorted(root.glob("superseded-step-*")):  # set aside by a rollback: kept, listed, never resumed from
        if p.is_dir():
            row = disk.describe(p, disk.step_of(p), verify).to_dict()
            if not verify and row["status"] == "unverified":  # verify says what the hashes say (its reason: superseded)
                row["status"] = "superseded"
            ours.append(row)
    foreign = [{"step": step, "path": str(p), "status": "foreign", "reason": f"{kind} layout (no manifest to verify)",
                "bytes": sum(f.stat().st_size for f in p.rglob("*") if f.is_file()), "time": None, "metrics": {},
                "milestone": False, "verified": False}
               for step, p, kind in checkpoints_in(root) if kind != "stethoscope" and p != root]
    return sorted(ours + foreign, key=lambda r: (r["step"] if r["step"] is not None else -1))


def _print(rows: list[dict], as_json: bool, title: str) -> None:
    if as_json:
        click.echo(render.to_json(rows))
        return
    if not rows:
        click.echo(f"{title}: no checkpoints")
        return
    cols = ("step", "path", "bytes", "status", "time", "milestone", "metrics", "reason")
    table = [(r["step"], r["path"], r["bytes"], r["status"], r["time"], r["milestone"],
              " ".join(f"{k}={render.fmt(v)}" for k, v in r["metrics"].items()), r["reason"] or "") for r in rows]
    render.console().print(render.rows_table(cols, table, title=title))


COMMANDS = [ckpt]
