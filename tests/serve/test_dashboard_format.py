"""The dashboard page's number format, run in node (skipped without it): a step is an integer, never 1.000e+6."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from stethoscope.serve.dashboard import STATIC

NODE = shutil.which("node")


def _fmt(values: list[float]) -> list[str]:
    source = (STATIC / "dashboard.js").read_text()
    start = source.index("function fmt(v)")
    body = source[start:source.index("\n  }\n", start) + 4]
    script = f"{body}\nconsole.log(JSON.stringify({json.dumps(values)}.map(fmt)));"
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="no node on PATH")
def test_a_step_is_shown_as_an_integer_and_a_value_as_before():
    steps = _fmt([1_000_000, 299, 0, 123_456_789])
    assert steps == ["1,000,000", "299", "0", "123,456,789"]
    assert not any(re.search(r"e[+-]", s) for s in steps)
    assert _fmt([2.2614, 1.5e-4, 1234567.5]) == ["2.2614", "1.500e-4", "1.235e+6"]  # measurements keep their form
