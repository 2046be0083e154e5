"""DetectConfig: built from a TOML table or `key=value` strings, validated, and documented in docs/diagnose.md.

Regenerate that page's "Tuning the detectors" table with `python tests/detect/test_config.py --write`
(without `--write` it prints the table).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from stethoscope.detect.config import DetectConfig

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "src" / "stethoscope" / "detect" / "config.py"
DOCS = ROOT / "docs" / "diagnose.md"


def table_rows() -> list[str]:
    """The docs table's rows, from config.py: section comments, each field's default and docstring."""
    text = SOURCE.read_text()
    sections = {i + 1: m.group(1) for i, line in enumerate(text.splitlines())
                if (m := re.match(r"\s+# -- (.+?) -+$", line))}
    cls = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == "DetectConfig")
    rows, body = [], cls.body
    for i, node in enumerate(body):
        if not isinstance(node, ast.AnnAssign):
            continue
        for line in [n for n in sections if n < node.lineno]:
            rows.append(f"| **{sections.pop(line)}** | | |")
        nxt = body[i + 1] if i + 1 < len(body) else None
        doc = nxt.value.value if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) else ""
        default = ast.literal_eval(node.value)
        shown = "none" if default is None else repr(default)
        meaning = " ".join(doc.split()).replace("|", "\\|")
        rows.append(f"| `{node.target.id}` | {shown} | {meaning} |")
    return rows


def _table_span(lines: list[str]) -> tuple[int, int]:
    """Where the docs table's rows lie in `lines` (after its header and rule)."""
    section = next(i for i, line in enumerate(lines) if line.startswith("#") and "Tuning the detectors" in line)
    start = next(i for i in range(section, len(lines)) if lines[i].startswith("| key |")) + 2
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return start, end


def _docs_rows() -> list[str]:
    lines = DOCS.read_text().splitlines()
    start, end = _table_span(lines)
    return lines[start:end]


def test_docs_table_agrees_with_the_fields():
    assert _docs_rows() == table_rows(), "docs/diagnose.md out of date: python tests/detect/test_config.py --write"


def test_every_field_has_a_docstring_and_a_row():
    keys = [re.match(r"\| `(\w+)`", r).group(1) for r in table_rows() if r.startswith("| `")]
    assert keys == list(DetectConfig.__dataclass_fields__)
    assert all(not r.endswith("|  |") for r in table_rows())


def test_from_mapping_takes_numbers_and_strings():
    cfg = DetectConfig.from_mapping({"spike_sigma": 8, "spike_window": 256.0, "warmup_steps": "2000"})
    assert (cfg.spike_sigma, cfg.spike_window, cfg.warmup_steps) == (8.0, 256, 2000)
    assert type(cfg.spike_sigma) is float and type(cfg.spike_window) is int
    assert cfg.level_window == DetectConfig().level_window  # the rest stays default


def test_with_overrides_parses_to_the_fields_type():
    cfg = DetectConfig(warmup_steps=100).with_overrides(["warmup_steps=none", "spike_window = 1e3",
                                                         "grad_norm_ceiling=5", "clip_fraction=0.3"])
    assert cfg.warmup_steps is None and cfg.spike_window == 1000 and cfg.grad_norm_ceiling == 5.0
    assert cfg.clip_fraction == 0.3
    assert DetectConfig().with_overrides([]) == DetectConfig()


@pytest.mark.parametrize("item, message", [
    ("spike_sigmaa=8", r"unknown detector setting 'spike_sigmaa' \(did you mean 'spike_sigma'\?\); valid keys: "),
    ("spike_window=2.5", r"DetectConfig.spike_window expects an integer, got 2.5"),
    ("spike_window=nan", r"DetectConfig.spike_window expects an integer"),
    ("spike_sigma=abc", r"DetectConfig.spike_sigma expects a number, got 'abc'"),
    ("spike_sigma=none", r"DetectConfig.spike_sigma expects a number, got 'none'"),
    ("warmup_steps=x", r"DetectConfig.warmup_steps expects an integer or none"),
    ("spike_sigma=inf", r"DetectConfig.spike_sigma must be a finite number"),
    ("clip_fraction=2", r"DetectConfig.clip_fraction must be in \(0, 1\]"),
    ("spike_sigma", r"expected key=value, got 'spike_sigma'"),
    ("=3", r"expected key=value"),
])
def test_bad_overrides_raise_value_error_naming_the_key(item, message):
    with pytest.raises(ValueError, match=message):
        DetectConfig().with_overrides([item])


def test_from_mapping_refuses_booleans_and_other_types():
    with pytest.raises(ValueError, match="spike_window expects an integer, got True"):
        DetectConfig.from_mapping({"spike_window": True})
    with pytest.raises(ValueError, match="spike_sigma expects a number, got \\[1\\]"):
        DetectConfig.from_mapping({"spike_sigma": [1]})


if __name__ == "__main__":
    import sys

    if "--write" in sys.argv:
        lines = DOCS.read_text().splitlines()
        start, end = _table_span(lines)
        DOCS.write_text("\n".join(lines[:start] + table_rows() + lines[end:]) + "\n")
    else:
        print("| key | default | meaning |\n|---|---|---|")
        print("\n".join(table_rows()))
