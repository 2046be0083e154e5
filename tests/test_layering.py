"""DESIGN §2 layering, checked on the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "stethoscope"
TOP_LAYERS = ("serve", "cli", "diagnose", "explain", "report", "importers", "__main__")  # __main__: `python -m`, the CLI
# The live probe serves the dashboard's page from the training process; its code is imported on the first
# request for it (inside a function, checked below), never when the probe starts.
# What a live alert says is the incident `run_incidents` computes (act/truth.py): imported on the first alert,
# on the alerts' own thread.
ON_REQUEST = {"stethoscope.serve.dashboard": ("probe",), "stethoscope.diagnose.stored": ("act",)}
# The text-log engine (logtext/) reads lines by their shape; it imports the leaf modules, detect's pure name
# rules and itself. importers/, explain/ and diagnose/ sit on top of it.
LOGTEXT_USES = ("records", "errors", "config", "detect", "logtext")
FRAMEWORKS = ("torch", "transformers", "lightning", "pytorch_lightning", "tensorboard", "wandb", "mlflow")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at_module_level) for every import in the file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top))
    return out


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _sub(path: Path) -> str:
    return path.relative_to(PKG).parts[0].removesuffix(".py")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_layering(path):
    sub = _sub(path)
    for mod, at_top in _imports(path):
        parts = mod.split(".")
        if sub in ("records", "errors", "config"):
            assert parts[0] != "stethoscope" or mod == "stethoscope", f"{sub} must import nothing from the package: {mod}"
        if mod in ON_REQUEST and sub in ON_REQUEST[mod]:
            assert not at_top, f"{path.name} imports {mod} at module level: only on a request"
            continue
        if parts[0] == "stethoscope" and len(parts) > 1 and sub not in TOP_LAYERS:
            assert parts[1] not in TOP_LAYERS, f"{path.name}: lower layer imports {mod}"
        if sub == "detect":
            assert parts[0] not in FRAMEWORKS + ("numpy", "sqlite3", "os", "pathlib", "socket", "urllib"), \
                f"detect/ is pure; {path.name} imports {mod}"
        if sub == "logtext" and parts[0] == "stethoscope" and len(parts) > 1:  # the text-log engine, under importers/
            assert parts[1] in LOGTEXT_USES, f"logtext/ knows no format nor layer above it; {path.name} imports {mod}"
        if sub == "capture" and parts[0] == "stethoscope" and len(parts) > 1:
            assert parts[1] not in ("store",) or mod in ("stethoscope.store.db", "stethoscope.store.schema"), \
                f"capture/ never reads the store: {mod}"
        if parts[0] in FRAMEWORKS and sub not in ("demo",):
            assert not at_top, f"{path.relative_to(PKG)} imports {mod} at module level (must be lazy)"


def test_advice_lives_below_its_users():
    """act/ gives every alert the diagnosis' causes and fixes: they live in findings/ (pure), not in diagnose/."""
    ours = {mod for mod, _ in _imports(PKG / "findings" / "advice.py") if mod.split(".")[0] == "stethoscope"}
    assert all(m == "stethoscope.records" or m.startswith("stethoscope.findings.") for m in ours), ours
