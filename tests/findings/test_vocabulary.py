"""findings/ owns the vocabulary: one constant a finding type, one list, an append-only wire order, and no
bare finding-type strings elsewhere in the package."""

from __future__ import annotations

import ast
from pathlib import Path

from stethoscope.detect.straggler import finding_code, finding_name
from stethoscope.findings import catalogue
from stethoscope.findings.catalogue import CATALOGUE, FINDING_TYPES

PKG = Path(__file__).resolve().parents[2] / "src" / "stethoscope"

# The order a rank sends a type in (its index + 1, detect/straggler.py) as released: a new type goes at the end.
WIRE_ORDER_V1 = (
    "nan", "loss_spike", "grad_spike", "grad_explosion", "grad_vanishing", "divergence",
    "loss_scale_collapse", "clipping", "overfitting", "eval_sparse", "underfitting", "plateau",
    "frozen_loss", "label_masking", "throughput_drop", "periodic_stall", "memory_leak",
    "memory_pressure", "lr_schedule", "update_ratio", "hang", "crash", "straggler", "healthy",
    "rank_divergence", "gpu_throttle", "gpu_ecc_error", "gpu_xid", "gpu_underused",
)
# Bare finding-type strings allowed outside findings/. Today 2, both another vocabulary that spells a type's
# name: the demo's fault injection "nan" (demo/run.py, beside "spike", "lr", "diverge") and the probe status'
# field "hang" (probe/live.py, read by cli/probe_view.py). Not excluded by word: a word that is a type here is
# counted everywhere, so a real type compared as a bare string cannot hide behind an ambiguous spelling.
BUDGET = 5


def test_wire_order_is_append_only():
    assert FINDING_TYPES[:len(WIRE_ORDER_V1)] == WIRE_ORDER_V1
    for i, name in enumerate(FINDING_TYPES):
        assert finding_code(name) == i + 1 and finding_name(finding_code(name)) == name
    assert finding_code(None) == 0.0 and finding_name(0.0) is None


def test_every_type_has_one_constant_named_after_it():
    constants = {k: v for k, v in vars(catalogue).items() if k.isupper() and isinstance(v, str)}
    assert {v: k for k, v in constants.items()} == {t: t.upper() for t in FINDING_TYPES}
    assert list(CATALOGUE) == list(FINDING_TYPES)


def _strings(node: ast.AST) -> list[ast.Constant]:
    if isinstance(node, ast.Constant) and node.value in CATALOGUE:
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for e in node.elts for c in _strings(e)]
    return []


def _used_as_types(tree: ast.AST) -> list[ast.Constant]:
    """Type-name strings compared with something, used as dict keys, or given as a Finding's type."""
    out: list[ast.Constant] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            out += [c for x in (n.left, *n.comparators) for c in _strings(x)]
        elif isinstance(n, ast.Dict):
            out += [c for k in n.keys if k is not None for c in _strings(k)]
        elif isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "Finding":
            out += [c for a in n.args[:1] for c in _strings(a)]
            out += [c for kw in n.keywords if kw.arg == "type" for c in _strings(kw.value)]
    return list({id(c): c for c in out}.values())


def bare_type_strings() -> list[str]:
    hits = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "findings":
            continue
        hits += [f"{rel}:{c.lineno}: {c.value!r}" for c in _used_as_types(ast.parse(path.read_text()))]
    return hits


def test_no_bare_finding_type_strings_outside_findings():
    hits = bare_type_strings()
    assert len(hits) <= BUDGET, "import the constant from stethoscope.findings.catalogue:\n" + "\n".join(hits)


def test_the_guard_sees_what_it_counts():
    tree = ast.parse('if f.type == "nan" or x in ("divergence", "y"): d = {"hang": 1}; Finding(type="crash")\n'
                     'Finding("plateau", "info", 1, "m"); print("nan")')
    assert sorted(c.value for c in _used_as_types(tree)) == ["crash", "divergence", "hang", "nan", "plateau"]
