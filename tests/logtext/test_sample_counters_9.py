"""A sample (or batch) counter printed as a bar's `N/T` beside a value named the step: the step is the named
value, the count is no step. Read short (line by line) and long (a shape at a time)."""

from __future__ import annotations

import pytest

from stethoscope.logtext.console_line import parse
from stethoscope.records import LOSS
from tests.importers.series import read_text, series

LINES = [12, 3000]
FORMS = ["{n}/60000 step: {s} loss: {l:.5f}",
         "{n}/60000 [00:01<00:10, step={s}, loss={l:.5f}]"]


def _log(form: str, lines: int) -> tuple[str, dict[int, float]]:
    out, truth = [], {}
    for k in range(1, lines + 1):
        step = 100 * k
        loss = round(3 - k / 100_000, 5)
        truth[step] = loss
        out.append(form.format(n=step * 64 % 60000, s=step, l=loss))
    return "\n".join(out) + "\n", truth


@pytest.mark.parametrize("lines", LINES)
@pytest.mark.parametrize("form", FORMS)
def test_a_named_step_beside_a_bars_count_is_the_step(form: str, lines: int) -> None:
    """The bar's count (samples seen, 6400 at step 100) was read as the step."""
    text, truth = _log(form, lines)
    assert series(read_text(text), LOSS) == truth


def test_the_count_is_no_value_and_a_bar_without_a_named_step_keeps_its_count() -> None:
    line = parse("6400/60000 step: 100 loss: 1.9")
    assert line.step == 100 and not line.bar
    assert [v.key for v in line.values] == ["loss"]
    plain = parse("6400/60000 [00:01<00:10, loss=1.9]")
    assert plain.step == 6400 and plain.bar
