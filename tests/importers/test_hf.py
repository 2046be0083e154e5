from __future__ import annotations

import json
import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import pytest

from stethoscope.errors import InputError
from stethoscope.importers.hf import HFTrainerStateImporter, gradient_accumulation
from stethoscope.logtext.names import EPOCH
from stethoscope.records import EVAL_LOSS, GRAD_NORM, LOSS, LR
from tests.importers.series import names, series

STATE = """{
  "best_metric": 0.61,
  "best_model_checkpoint": "out/checkpoint-4",
  "epoch": 2.0,
  "eval_steps": 2,
  "global_step": 4,
  "log_history": [
    {"epoch": 0.5, "grad_norm": 1.5, "learning_rate": 1e-05, "loss": 2.5, "step": 1},
    {"epoch": 1.0, "grad_norm": NaN, "learning_rate": 2e-05, "loss": 2.25, "step": 2},
    {"epoch": 1.0, "eval_loss": 0.75, "eval_runtime": 3.5, "eval_samples_per_second": 10.0,
     "eval_steps_per_second": 2.5, "eval_wer": 33.0, "step": 2},
    {"epoch": 1.5, "grad_norm": Infinity, "learning_rate": 3e-05, "loss": -Infinity, "step": 3},
    {"epoch": 2.0, "grad_norm": 0.5, "learning_rate": 4e-05, "loss": 1.5, "step": 4},
    {"epoch": 2.0, "eval_loss": 0.61, "step": 4},
    {"epoch": 2.0, "step": 4, "total_flos": 1e+15, "train_loss": 2.0, "train_runtime": 12.5,
     "train_samples_per_second": 3.2, "train_steps_per_second": 0.32}
  ],
  "logging_steps": 1,
  "max_steps": 4,
  "num_train_epochs": 2,
  "train_batch_size": 8
}
"""


def test_rows_become_points_at_their_steps(write) -> None:
    run = HFTrainerStateImporter().read(write("trainer_state.json", STATE))
    assert run.format == "hf_trainer_state"
    assert series(run, LOSS) == {1: 2.5, 2: 2.25, 3: -math.inf, 4: 1.5}
    norms = series(run, GRAD_NORM)
    assert math.isnan(norms[2]) and norms[3] == math.inf and norms[4] == 0.5
    assert series(run, LR) == {1: 1e-05, 2: 2e-05, 3: 3e-05, 4: 4e-05}
    assert series(run, EVAL_LOSS) == {2: 0.75, 4: 0.61}
    assert series(run, "eval/wer") == {2: 33.0}
    assert series(run, "eval/runtime_s") == {2: 3.5}
    assert series(run, "eval/samples_per_s") == {2: 10.0}
    assert series(run, EPOCH) == {1: 0.5, 2: 1.0, 3: 1.5, 4: 2.0}
    # the eval rows repeat their train row's epoch: written once
    assert [p.step for p in run.points if p.name == EPOCH] == [1, 2, 3, 4]
    assert all(p.time is None for p in run.points)
    assert run.warnings == []


def test_summary_and_bookkeeping_go_to_meta(write) -> None:
    run = HFTrainerStateImporter().read(write("trainer_state.json", STATE))
    assert "train/runtime" not in names(run) and "train_runtime" not in names(run)
    assert run.meta["summary"]["train_runtime"] == 12.5
    for key, value in {"max_steps": 4, "num_train_epochs": 2, "train_batch_size": 8, "logging_steps": 1,
                       "eval_steps": 2, "best_metric": 0.61, "best_model_checkpoint": "out/checkpoint-4"}.items():
        assert run.meta[key] == value
    json.dumps(run.meta, allow_nan=False)  # meta is plain JSON


def test_resumed_run_keeps_repeated_steps_in_order(write) -> None:
    rows = [{"loss": 3.0, "step": 1}, {"loss": 2.0, "step": 2}, {"loss": 2.5, "step": 2}, {"loss": 1.0, "step": 3}]
    run = HFTrainerStateImporter().read(write("trainer_state.json", json.dumps({"log_history": rows})))
    assert [(p.step, p.value) for p in run.points if p.name == LOSS] == [(1, 3.0), (2, 2.0), (2, 2.5), (3, 1.0)]


def test_rows_without_step_land_on_the_step_before(write) -> None:
    rows = [{"eval_loss": 0.6, "step": 5}, {"predict_loss": 0.7, "predict_runtime": 2.0}]
    run = HFTrainerStateImporter().read(write("trainer_state.json", json.dumps({"log_history": rows})))
    assert series(run, "test/loss") == {5: 0.7}
    assert series(run, "test/runtime_s") == {5: 2.0}
    assert "rows_without_step" in run.meta["notes"]


def test_text_values_are_left_out_with_one_warning(write) -> None:
    rows = [{"loss": 1.0, "remaining_time": "1h:02m", "step": s} for s in (1, 2, 3)]
    path = write("trainer_state.json", json.dumps({"log_history": rows}))
    run = HFTrainerStateImporter().read(path)
    assert series(run, LOSS) == {1: 1.0, 2: 1.0, 3: 1.0}
    assert run.warnings == [f"{path}: log_history[0]: remaining_time value '1h:02m' is not a number; left out "
                            "(and 2 more)"]


def test_truncated_file_gives_the_complete_rows_and_a_warning(write) -> None:
    cut = STATE[: STATE.index('"learning_rate": 3e-05')]
    path = write("trainer_state.json", cut)
    run = HFTrainerStateImporter().read(path)
    assert series(run, LOSS) == {1: 2.5, 2: 2.25}
    assert series(run, EVAL_LOSS) == {2: 0.75}
    assert len(run.warnings) == 1 and run.warnings[0].startswith(f"{path}:12: truncated or damaged JSON")


def test_malformed_file_is_an_input_error_with_its_line(write) -> None:
    path = write("trainer_state.json", '{\n  "global_step": 3,\n  oops\n}')
    with pytest.raises(InputError) as err:
        HFTrainerStateImporter().read(path)
    assert err.value.line == 3 and str(path) in str(err.value)


def test_not_a_state_file(write) -> None:
    with pytest.raises(InputError, match="log_history"):
        HFTrainerStateImporter().read(write("trainer_state.json", '{"global_step": 3}'))


def test_sniff(tmp_path: Path) -> None:
    imp = HFTrainerStateImporter()
    assert imp.sniff(tmp_path / "trainer_state.json", "{\n")
    assert imp.sniff(tmp_path / "state-copy.json", '{"log_history": []}')
    assert not imp.sniff(tmp_path / "config.json", '{"hidden_size": 4}')


def test_gradient_accumulation_from_json_beside(write) -> None:
    path = write("ckpt/trainer_state.json", STATE)
    write("ckpt/config.json", '{"hidden_size": 8}')
    assert gradient_accumulation(path.parent) is None
    write("ckpt/training_args.json", '{"gradient_accumulation_steps": 16}')
    run = HFTrainerStateImporter().read(path)
    assert run.meta["gradient_accumulation_steps"] == 16


@dataclass
class FakeTrainingArguments:
    output_dir: str = "out"
    gradient_accumulation_steps: int = 16
    learning_rate: float = 2e-4


@pytest.mark.parametrize("ga", [16, 300, 70000])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_gradient_accumulation_from_pickled_args_without_unpickling(tmp_path: Path, ga: int, protocol: int) -> None:
    (tmp_path / "training_args.bin").write_bytes(pickle.dumps(FakeTrainingArguments(gradient_accumulation_steps=ga),
                                                              protocol=protocol))
    assert gradient_accumulation(tmp_path) == ga


def test_gradient_accumulation_from_torch_save(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.save(FakeTrainingArguments(gradient_accumulation_steps=8), tmp_path / "training_args.bin")
    assert gradient_accumulation(tmp_path) == 8


def test_a_per_step_train_loss_key_is_not_a_summary(write) -> None:
    rows = [{"train_loss": 2.0, "step": 1}, {"train_loss": 1.5, "step": 2}]
    run = HFTrainerStateImporter().read(write("trainer_state.json", json.dumps({"log_history": rows})))
    assert series(run, LOSS) == {1: 2.0, 2: 1.5}
    assert "summary" not in run.meta


def _varied_history() -> list[object]:
    """Spans of same-keyed rows with every case the row rules handle between and inside them."""
    train = [{"epoch": s / 10, "grad_norm": 0.5, "learning_rate": 1e-4, "loss": 3.0 - s / 100, "step": s}
             for s in range(1, 40)]
    evals = [{"epoch": 3.9, "eval_loss": 0.7, "step": 39}, {"epoch": 3.9, "eval_loss": 0.6, "step": 39}]
    resumed = [{"epoch": s / 10, "grad_norm": 0.4, "learning_rate": 1e-4, "loss": 2.0, "step": s} for s in range(30, 45)]
    odd = [{"loss": 1.0, "step": 45}, {"loss": 1.0, "step": 45}, {"loss": "n/a", "step": 46}, {"loss": True, "step": 47},
           {"step": 48.0, "loss": 1.0}, {"predict_loss": 0.5}, {"predict_loss": 0.4}, {"step": 49},
           {"step": 50}, {"loss": 1.0, "epoch": None, "step": 51}, {"loss": 1.0, "epoch": None, "step": 51},
           {"step": 52, "loss": 0.9}, {"loss": 0.8, "step": 53}]
    summary = [{"epoch": 4.0, "step": 53, "train_loss": 2.0, "train_runtime": 1.0, "train_samples_per_second": 2.0,
                "train_steps_per_second": 3.0}] * 2
    kinds = [{"loss": value, "step": 60 + i} for i, value in enumerate([1, 2.5, 3, "4.5", 5.0, "x", 6.0, True, 7])]
    return train + evals + resumed + odd + summary + train[:5] + kinds[:3] + [{"lr": 1.0, "step": 70}] + kinds[3:]


@pytest.mark.parametrize("parser", ["orjson", "json"])
@pytest.mark.parametrize("junk", [False, True])
def test_blocks_of_rows_read_like_one_row_at_a_time(write, monkeypatch, parser: str, junk: bool) -> None:
    import stethoscope.importers.hf as hf

    rows = _varied_history() + (["junk", {"loss": 0.1, "step": 60}] if junk else [])
    path = write("trainer_state.json", json.dumps({"global_step": 53, "log_history": rows}))
    if parser == "json":
        monkeypatch.setattr(hf, "orjson", None)  # what a failed import of orjson leaves
    blocks = []
    block = hf._Rows.block
    monkeypatch.setattr(hf._Rows, "block", lambda self, *span: blocks.append(block(self, *span)) or blocks[-1])
    fast = HFTrainerStateImporter().read(path)
    monkeypatch.setattr(hf._Rows, "block", lambda self, rows, start, stop: False)
    slow = HFTrainerStateImporter().read(path)
    assert blocks.count(True) == (0 if junk else 6)
    assert fast.columns == slow.columns and len(fast.columns.names) > 200
    assert [list(map(type, column)) for column in fast.columns] == [list(map(type, column)) for column in slow.columns]
    assert fast.warnings == slow.warnings and len(fast.warnings) == 2 + junk
    assert fast.meta == slow.meta and fast.meta["notes"] and fast.meta["summaries"]


def test_bare_nan_falls_back_to_json(write) -> None:
    text = json.dumps({"log_history": [{"loss": math.nan, "step": 1}, {"loss": math.inf, "step": 2},
                                       {"loss": 1.0, "note": "NaN Infinity", "step": 3}]})
    assert "NaN" in text
    run = HFTrainerStateImporter().read(write("trainer_state.json", text))
    loss = series(run, LOSS)
    assert math.isnan(loss[1]) and loss[2] == math.inf and loss[3] == 1.0


def _numeric_history() -> list[object]:
    """`_varied_history` without what only a dict can hold (text, bools, nulls, float steps): what the
    columnar reader takes, with every row rule still in it, and keys not always in sorted order."""
    train = [{"epoch": s / 10, "grad_norm": 0.5, "learning_rate": 1e-4, "loss": 3.0 - s / 100, "step": s}
             for s in range(1, 40)]
    evals = [{"epoch": 3.9, "eval_loss": 0.7, "step": 39}, {"epoch": 3.9, "eval_loss": 0.6, "step": 39}]
    resumed = [{"loss": 2.0, "epoch": s / 10, "step": s, "grad_norm": 0.4, "learning_rate": 1e-4} for s in range(30, 45)]
    odd = [{"loss": 1.0, "step": 45}, {"loss": 1.0, "step": 45}, {"predict_loss": 0.5}, {"predict_loss": 0.4},
           {"step": 49}, {"step": 50}, {"step": 52, "loss": 0.9}, {"loss": 0.8, "step": 53}, {"loss": 1, "step": 54},
           {"loss": 2, "step": 55}]
    summary = [{"epoch": 4.0, "step": 55, "train_loss": 2.0, "train_runtime": 1.0, "train_samples_per_second": 2.0,
                "train_steps_per_second": 3}] * 2
    return train + evals + resumed + odd + summary + train[:5] + [{"lr": 1.0, "step": 70}, {"lr": 2.0, "step": 71}]


@pytest.mark.parametrize("nonfinite", [False, True])

@pytest.mark.parametrize("indent", [None, 2])
def test_columnar_history_reads_like_the_dicts(write, monkeypatch, indent: int | None, nonfinite: bool) -> None:
    """pyarrow's columns (big files) and orjson's (or json's) dicts give the same run: points, meta, warnings."""
    pytest.importorskip("pyarrow")
    import stethoscope.importers.hf as hf
    import stethoscope.importers.hf_arrow as hf_arrow

    history = _numeric_history()
    if nonfinite:  # bare NaN and Infinity, in a span and in rows read as dicts
        history[3] = {**history[3], "grad_norm": math.nan}
        history[39] = {**history[39], "eval_loss": math.inf}
    text = json.dumps({"global_step": 55, "log_history": history, "max_steps": 70}, indent=indent,
                      sort_keys=indent is not None)
    path = write("trainer_state.json", text)
    monkeypatch.setattr(hf_arrow, "MIN_BYTES", 0)
    taken = []
    columns = hf._Rows.columns
    monkeypatch.setattr(hf._Rows, "columns", lambda self, *span: taken.append(columns(self, *span)) or taken[-1])
    fast = HFTrainerStateImporter().read(path)
    monkeypatch.setattr(hf_arrow, "split", lambda data: None)
    slow = HFTrainerStateImporter().read(path)
    assert taken.count(True) >= 4 and taken.count(False) >= 4  # spans as columns, and rows as dicts
    assert names(fast) == names(slow) and names(fast) >= {LOSS, EVAL_LOSS, GRAD_NORM, LR}
    assert [(p.name, p.step, repr(p.value), p.time) for p in fast.points] == [
        (p.name, p.step, repr(p.value), p.time) for p in slow.points]
    assert fast.warnings == slow.warnings
    assert fast.meta == slow.meta and fast.meta["notes"] and fast.meta["summaries"]


@pytest.mark.parametrize("history", [
    '[{"loss": -NaN, "step": 1}, {"loss": 1.0, "step": 2}]',  # pyarrow reads -NaN, json does not
    '[{"loss": 1.0, "step": 1}, {"loss": 1.0, "step": 2},{"loss": 1.0, "step": 3}]',  # a separator of its own
    [{"loss": "1.0", "step": 1}, {"loss": 1.0, "step": 2}],  # text
    [{"loss": True, "step": 1}, {"loss": 1.0, "step": 2}],  # a bool
    [{"loss": None, "step": 1}, {"loss": 1.0, "step": 2}],  # a null
    [{"loss": 1.0, "step": 1.0}, {"loss": 1.0, "step": 2}],  # a float step
    [{"loss": 1.0, "step": 1, "x": {"y": 1}}, {"loss": 1.0, "step": 2}],  # a nested object
    [{"loss": 1.0, "step": 2 ** 70}, {"loss": 1.0, "step": 2}],  # beyond 64 bits
])
def test_columnar_history_leaves_what_only_dicts_hold_to_them(monkeypatch, history: list[object] | str) -> None:
    import stethoscope.importers.hf_arrow as hf_arrow

    pytest.importorskip("pyarrow")
    monkeypatch.setattr(hf_arrow, "MIN_BYTES", 0)
    text = '{"log_history": ' + history + "}" if isinstance(history, str) else json.dumps({"log_history": history})
    assert hf_arrow.split(text.encode()) is None
    assert hf_arrow.split(json.dumps({"log_history": [{"loss": 1.0, "step": 1}, {"loss": 1, "step": 2}]}).encode())
