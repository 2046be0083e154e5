"""The house rule: every module of the package stays under 24 KiB (split by noun when one grows past it)."""

from __future__ import annotations

from pathlib import Path

import stethoscope

LIMIT = 24 * 1024


def test_every_module_is_under_24_kib():
    root = Path(stethoscope.__file__).parent
    big = {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*.py") if p.stat().st_size >= LIMIT}
    assert not big, f"modules at or over {LIMIT} bytes (split them by noun): {big}"
