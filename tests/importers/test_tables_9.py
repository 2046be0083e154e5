"""Console tables that are no one line of one-word names over aligned numbers (wild-logs-3's R1, the eighth
grammar's matlab_table and spacy_table): a header and rows split by blank lines (AWR's `\\r\\r\\n` line ends),
names of two words whose columns a rule of dashes draws (spaCy), a table drawn with pipes and a header of two
rows (MATLAB's trainNetwork). The step column is chosen by its name (`Iteration`, `#`) over the epoch's."""

from __future__ import annotations

import pytest

from stethoscope.errors import InputError
from stethoscope.importers import read_any
from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import names, series

_AWR_NAMES = ["Iteration", "Wall_Time", "Samples", "Train_Return", "Test_Return", "Critic_Loss", "Actor_Loss"]


def _awr(end: str) -> str:
    """AWR's whitespace table (`%-25s` a cell), each line ended by `end`."""
    rows = ["".join(f"{c:<25}" for c in _AWR_NAMES)]
    for k in range(6):
        it = 50 * k
        cells = [it, 0.1 * k + 0.0007, 2142 + 106000 * k, 21.9 + 40 * k, 44.0 + 50 * k, 0.004 / (k + 1), 2.65 - 0.1 * k]
        rows.append("".join(f"{c!s:<25}" for c in cells))
    return end.join(rows) + end


@pytest.mark.parametrize("end", ["\r\r\n", "\r\r", "\n"])
def test_awrs_table_is_read_by_its_iteration_column_whatever_blank_lines_its_line_ends_make(write, end) -> None:
    """Written `\\r\\r\\n` (or `\\r\\r`) a line, the table's lines are split by blank ones: it was refused
    ("no known log format"). The step is `Iteration`, not the sample counter beside it."""
    (run,) = read_any(write("hopper_awr_log0.txt", _awr(end).encode()))
    assert run.format == "texttable"
    assert sorted(series(run, "Critic_Loss")) == [0, 50, 100, 150, 200, 250]
    assert series(run, "test/Return")[100] == pytest.approx(144.0)
    assert series(run, "Samples")[50] == 108142


def test_an_actors_and_a_critics_losses_are_not_summed_into_one_train_loss(write) -> None:
    """Two networks' objectives, each its own optimiser's: no sum of parts (ultralytics' box+cls+dfl is one)."""
    (run,) = read_any(write("hopper_awr_log0.txt", _awr("\n")))
    assert LOSS not in names(run)
    assert series(run, "Actor_Loss")[0] == pytest.approx(2.65)


_MATLAB_RULE = "|" + "=" * 102 + "|"
_MATLAB_HEAD = ["|  Epoch  |  Iteration  |  Time Elapsed  |  Mini-batch  |  Validation  |  Mini-batch  |  Validation  |",
                "|         |             |   (hh:mm:ss)   |   Accuracy   |   Accuracy   |     Loss     |     Loss     |"]


def _matlab(prefix: str) -> str:
    """trainNetwork's verbose table, its lines logged with `prefix` (the header's continuation lines without)."""
    out = [prefix + _MATLAB_RULE, *_MATLAB_HEAD, _MATLAB_RULE]
    for k in range(5):
        it = 1 + 50 * k
        val = f"{60 + k:.2f}%" if k % 2 == 0 else ""
        vloss = f"{1.9 - 0.1 * k:.4f}" if k % 2 == 0 else ""
        out.append(f"{prefix}|{1 + k // 2:>8} |{it:>12} |{'00:00:%02d' % (11 + k):>15} |{f'{40 + 5 * k:.2f}%':>13} |"
                   f"{val:>13} |{2.5 - 0.2 * k:>13.4f} |{vloss:>13} |")
        if k == 2:
            out.append(f"{prefix}Validation patience reached.")
    out.append(prefix + _MATLAB_RULE)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("prefix", ["", "[R0] Jul 24 11:00:03 [INFO|trainer.py:2345] ", "(rank=0) INFO | "])
def test_matlabs_table_of_two_header_rows_is_read_by_its_iteration(write, prefix) -> None:
    """MATLAB's names span two rows (`Mini-batch` over `Loss`), its cells sit between pipes; a logger's prefix
    may hold a pipe of its own. It was refused (or read no train loss)."""
    (run,) = read_any(write("train.log", _matlab(prefix)))
    assert run.format == "texttable"
    assert series(run, LOSS) == pytest.approx({1: 2.5, 51: 2.3, 101: 2.1, 151: 1.9, 201: 1.7})
    assert series(run, EVAL_LOSS) == pytest.approx({1: 1.9, 101: 1.7, 201: 1.5})  # blank cells stay blank
    assert any("epoch" in n.lower() for n in names(run))  # the epoch is a column, not the step


_SPACY_HEAD = "E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE "
_SPACY_RULE = "---  ------  ------------  --------  ------  ------  ------  ------"


def _spacy(prefix: str, ner: bool = True) -> str:
    head, rule = _SPACY_HEAD, _SPACY_RULE
    if not ner:
        head = "E    #       LOSS TOK2VEC  LOSS TEXTCAT  LOSS NER  SCORE "
        rule = "---  ------  ------------  ------------  --------  ------"
    out = [prefix + head, rule]  # the rule: the message's second line, no prefix
    for k in range(5):
        if ner:
            out.append(f"{prefix}{k // 2:>3}  {200 * k:>6}  {10.0 + k:>12.2f}  {50.0 - 5 * k:>8.2f}  "
                       f"{60 + k:>6.2f}  {61 + k:>6.2f}  {59 + k:>6.2f}  {0.6 + k / 100:>6.2f}")
        else:
            out.append(f"{prefix}{k // 2:>3}  {200 * k:>6}  {10.0 + k:>12.2f}  {3.0 - k / 10:>12.2f}  "
                       f"{50.0 - 5 * k:>8.2f}  {0.6 + k / 100:>6.2f}")
    return "\n".join(["\u2139 Using CPU", "", *out, "\u2714 Saved pipeline to output directory"]) + "\n"


@pytest.mark.parametrize("prefix", ["", "2024-07-24 11:00:03,111 INFO:root:", "0: "])
def test_spacys_table_is_read_by_its_step_column_and_its_component_loss(write, prefix) -> None:
    """`#` is the step (`E` the epoch); `LOSS NER` is the train loss: a shared tok2vec's 'loss' is what its
    listeners send back, no objective of its own. It was refused ('#' and two-word names are no header)."""
    (run,) = read_any(write("train.log", _spacy(prefix)))
    assert run.format == "texttable"
    assert series(run, LOSS) == pytest.approx({0: 50.0, 200: 45.0, 400: 40.0, 600: 35.0, 800: 30.0})
    (epoch,) = [n for n in names(run) if n.endswith("epoch")]
    assert series(run, epoch) == {0: 0, 200: 0, 400: 1, 600: 1, 800: 2}
    assert series(run, "tok2vec_loss")[400] == pytest.approx(12.0)


def test_spacys_task_components_losses_sum_to_the_train_loss(write) -> None:
    (run,) = read_any(write("train.log", _spacy("", ner=False)))
    assert series(run, LOSS)[200] == pytest.approx(2.9 + 45.0)


@pytest.mark.parametrize("text", [
    "| Model     | Accuracy | Loss   |\n|-----------|----------|--------|\n| resnet18  | 0.91     | 0.31   |\n"
    "| resnet50  | 0.93     | 0.27   |\n| vit_b16   | 0.95     | 0.22   |\n",
    "Model      Params  LOSS TEST  ACC\n---------  ------  ---------  ----\nresnet18   11      0.31       0.91\n"
    "resnet50   25      0.27       0.93\nvit_b16    86      0.22       0.95\n",
])
def test_a_results_table_one_row_a_model_is_still_no_run(write, text) -> None:
    """No column names a step: the rows are models, not logging steps."""
    try:
        runs = read_any(write("results.md", text))
    except InputError:
        return
    assert all(r.format != "texttable" for r in runs)


def _parlai(reports: int) -> str:
    """ParlAI's train report: a `time:` line, then the report as a table (its header again every report)."""
    out = []
    for k in range(1, reports + 1):
        step = 50 * k
        cols = [("clip", "1"), ("exps", "201.0"), ("gnorm", f"{13 + k / 10:.4g}"), ("loss", f"{3 - k / 10:.4g}"),
                ("lr", "1e-05"), ("ppl", "8.117"), ("token_acc", ".3827"), ("total_train_updates", str(step)),
                ("ups", "12.99")]
        widths = [max(len(n), len(v)) for n, v in cols]
        out += [f"12:00:{k:02d} | time:{k * 20}s total_exs:{step * 32} total_steps:{step} epochs:{step / 700:.2f}",
                "    " + "  ".join(n.rjust(w) for (n, _), w in zip(cols, widths)),
                "    " + "  ".join(v.rjust(w) for (_, v), w in zip(cols, widths))]
    return "\n".join(out) + "\n"


def test_parlais_report_table_is_read_by_its_updates_done(write) -> None:
    """`total_train_updates` counts the optimiser's updates: the step (the table was no table: no step column)."""
    (run,) = read_any(write("train.log", _parlai(5)))
    assert run.format == "texttable"
    assert series(run, LOSS) == pytest.approx({50: 2.9, 100: 2.8, 150: 2.7, 200: 2.6, 250: 2.5})


def _allennlp(epochs: int, at: str = "2024-07-24 11:20:33,123 - INFO - allennlp.training.") -> str:
    """AllenNLP's `Epoch N/M`, then its console_logger's table: a metric a line, train and validation columns."""
    out = []
    for e in range(epochs):
        out += [f"{at}gradient_descent_trainer - Epoch {e}/{epochs - 1}",
                f"{at}callbacks.console_logger -                        Training |  Validation",
                f"{at}callbacks.console_logger - accuracy           |  {0.8 + e / 100:8.3f}  |  {0.79 + e / 100:8.3f}",
                f"{at}callbacks.console_logger - gpu_0_memory_MB    |  {1298.9:8.3f}  |       N/A",
                f"{at}callbacks.console_logger - loss               |  {3 - e / 10:8.3f}  |  {3.1 - e / 10:8.3f}"]
        out.append(f"{at}checkpointer - Best validation performance so far. Copying weights to 'out/best.th'.")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("prefix", ["", "(RayTrainWorker pid=23817, ip=10.0.0.12) "])
def test_allennlps_table_by_split_is_read_at_its_epochs(write, prefix) -> None:
    """A metric a line (`loss  |  2.345  |  2.567`) under `Training |  Validation`, after `Epoch 3/19`: the
    epoch's record, each column its split's. It was refused (or read 0 steps)."""
    text = "".join(prefix + line + "\n" for line in _allennlp(4).splitlines())
    (run,) = read_any(write("out.log", text))
    assert series(run, LOSS) == pytest.approx({0: 3.0, 1: 2.9, 2: 2.8, 3: 2.7})
    assert series(run, EVAL_LOSS) == pytest.approx({0: 3.1, 1: 3.0, 2: 2.9, 3: 2.8})
    assert all(not n.startswith("eval/gpu") for n in names(run))  # N/A: no value


def test_metric_lines_by_split_without_an_epochs_head_are_no_table(write) -> None:
    text = "".join(f"loss   |  {3 - k / 10:.3f}  |  {3.1 - k / 10:.3f}\n" for k in range(5))
    try:
        runs = read_any(write("out.log", text))
    except InputError:
        return
    assert all(r.format != "texttable" for r in runs)
