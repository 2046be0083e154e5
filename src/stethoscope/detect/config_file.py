"""The detectors' thresholds from a TOML file: its `[detect]` table as a `DetectConfig`.

The same file `stethoscope diagnose --config FILE.toml` reads (and `report`, `compare`, `export
prometheus-rules`), loadable from Python too:

    from stethoscope.detect.config_file import load_detect_config
    Monitor("runs/exp", model, opt, detect=load_detect_config("stethoscope.toml"))
"""

from __future__ import annotations

from typing import Any

from stethoscope.detect.config import DetectConfig
from stethoscope.errors import InputError, UsageError


def load_detect_config(path: Any) -> DetectConfig:
    """The `[detect]` table of the TOML file at `path` (a str or os.PathLike). InputError (exit status 2 in
    the CLI) names the file and what is wrong: missing, not TOML, no [detect] table, a bad key or value."""
    table = detect_table(path)
    try:
        return DetectConfig.from_mapping(table)
    except ValueError as exc:
        raise InputError(path, f"[detect]: {exc}") from None


def detect_table(path: Any) -> dict[str, Any]:
    """The `[detect]` table of a TOML file, unchecked."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UsageError("--config needs Python 3.11+ or the tomli package (pip install tomli)") from None
    try:
        with open(path, encoding="utf-8") as f:
            data = tomllib.loads(f.read())
    except FileNotFoundError:
        raise InputError(path, "no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not valid TOML ({exc})") from None
    table = data.get("detect")
    if not isinstance(table, dict):
        raise InputError(path, "no [detect] table (detector thresholds go under [detect], e.g. spike_sigma = 8)")
    return table
