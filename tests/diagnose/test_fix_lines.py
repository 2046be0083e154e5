"""A cause the log names with no fix of its own gets "start with this cause" only when it leads the causes;
behind a cause with its own fix it gets no fix line (user-trial-4 item 7: the --recover demo's divergence
listed "start with this cause: the log points to it" twice in a row, under "undo the LR change")."""

from __future__ import annotations

import io

from rich.console import Console

from stethoscope.cli.findings_view import print_findings
from stethoscope.findings.advice import advise
from stethoscope.records import Finding
from stethoscope.report.html import _list

CAUSES = ["LR jumped 0.002083 -> 0.2067 (x99.2) at step 150 and stayed there: the run trains on at an LR it cannot use",
          "grad norm jumped at the same step (0.4267 -> 5.989)",
          "spike 102 steps after LR warm-up ended (peak LR 0.003): peak LR too high?"]


def _fix_lines(f: Finding) -> list[str]:
    buf = io.StringIO()
    print_findings(Console(file=buf, width=400), [f], indent="", min_severity="info")
    lines = buf.getvalue().splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("fix  :"))
    return [line.split(":", 1)[1].strip() for line in lines[first:first + 4]]


def test_one_fix_line_each_and_no_second_start_with():
    f = advise(Finding("divergence", "error", 151, "loss jumped", causes=list(CAUSES)))
    assert len(f.causes) == len(f.fixes) and f.fixes[0].startswith("undo the LR change")
    assert not any(x.startswith("start with this cause") for x in f.fixes), f.fixes
    assert f.fixes[1:3] == ["", ""]  # evidence beside the LR jump: no fix of their own
    assert advise(f).fixes == f.fixes  # advise stays idempotent
    shown = [x for x in f.fixes if x]
    assert _fix_lines(f)[:len(shown)] == shown[:4]  # one line per fix, no empty one
    out = _list(f.fixes)
    assert out.count("<li>") == len(shown) and "<li></li>" not in out


def test_a_leading_cause_without_a_fix_still_says_start_with_it():
    f = advise(Finding("divergence", "error", 151, "loss jumped", causes=CAUSES[1:]))
    assert f.fixes[0].startswith("start with this cause") and f.fixes[1] == ""
    assert sum(x.startswith("start with this cause") for x in f.fixes) == 1
