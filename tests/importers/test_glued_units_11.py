"""A letter glued to a number is that number's unit, never the next number's key. `10.2G 0.1095` (YOLOv5's
memory column, a trainer's `mem 10.2G`) was read as a metric `G` of 0.1095, the memory as a bare 10.2. `G` is the
giga prefix, as `k`, `M` and `B` are read already (`3.1k`, `1.2B`): 10.2G is 10.2e9."""

from __future__ import annotations

from tests.importers.series import names, read_text, series


def _log(line: str, steps: int = 40) -> str:
    return "".join(line.format(step=s, loss=3.0 - s / 40) + "\n" for s in range(1, steps + 1))


def test_a_memory_printed_with_g_is_no_key_of_the_number_after_it() -> None:
    run = read_text(_log("step {step} | loss {loss:.4f} | mem 10.2G 0.1095"))
    assert not {n for n in names(run) if n.split("/")[-1].lower() == "g"}, names(run)
    assert set(series(run, "train/loss")) == set(range(1, 41))
    memory = [p.value for p in run.points if "mem" in p.name]
    assert memory and all(abs(v - 10.2e9) < 1e3 for v in memory), memory


def test_a_bare_g_before_a_number_is_still_its_key() -> None:
    """Guard: `g 3.0`, a word of its own (a space before it), keys the number after it."""
    run = read_text(_log("step {step} | loss {loss:.4f} | g 3.0"))
    assert set(series(run, "train/loss")) == set(range(1, 41))
    assert any(n.split("/")[-1] == "g" for n in names(run)), names(run)
