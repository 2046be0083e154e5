"""`python -m stethoscope.probe.launch [--allow-eval] [--run-dir DIR] [--port N] [--] script.py ARGS…`
(or `-m module ARGS…`): start this process's probe server, then run the user's script as `__main__`.

This is what `stethoscope run -- python train.py` executes, for scripts that never import stethoscope;
a Monitor the script creates adopts the running probe (one server per process).
"""

from __future__ import annotations

import os
import runpy
import sys

from stethoscope.probe.config import ProbeConfig

USAGE = "usage: python -m stethoscope.probe.launch [--allow-eval] [--run-dir DIR] [--port N] [--] script.py|-m module ARGS…"


def parse(argv: list[str]) -> tuple[dict[str, object], list[str]]:
    opts: dict[str, object] = {"allow_eval": False, "run_dir": None, "port": 0}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--allow-eval":
            opts["allow_eval"] = True
        elif a in ("--run-dir", "--port") and i + 1 < len(argv):
            opts[a[2:].replace("-", "_")] = argv[i + 1] if a == "--run-dir" else int(argv[i + 1])
            i += 1
        elif a == "--":
            i += 1
            break
        else:
            break
        i += 1
    rest = argv[i:]
    if not rest:
        raise SystemExit(USAGE)
    return opts, rest


def main(argv: list[str] | None = None) -> None:
    opts, rest = parse(list(sys.argv[1:] if argv is None else argv))
    from stethoscope.probe.live import start

    run_dir = opts["run_dir"]
    if run_dir:
        os.makedirs(str(run_dir), exist_ok=True)
    probe = start(ProbeConfig(allow_eval=bool(opts["allow_eval"]), port=int(opts["port"])), run_dir=run_dir)
    try:
        if rest[0] == "-m" and len(rest) > 1:
            sys.argv = [rest[1], *rest[2:]]
            probe.refresh_registration()
            runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
        else:
            script = rest[0]
            sys.argv = list(rest)
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            probe.refresh_registration()  # `stethoscope ps` shows the script's command line
            runpy.run_path(script, run_name="__main__")
    finally:
        probe.close()


if __name__ == "__main__":
    main()
