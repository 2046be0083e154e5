"""The HF Trainer's console: one python dict a logged step (`{'loss': 3.26, 'grad_norm': 1.15, 'learning_rate':
4.95e-05, 'epoch': 0.03}`), no step field. `_maybe_log_save_evaluate` logs the step's train dict first, then,
on an eval step, the eval's dict (`{'eval_loss': 1.15, 'eval_runtime': 12.3, ..., 'epoch': 0.75}`); the run ends
with a summary dict (`{'train_runtime': ..., 'train_loss': ...}`). Numbered 1, 2, 3 … in file order, each eval
dict took a step of its own before: 104 steps for 100 train records and 4 evals, each eval one step after the
train record it belongs to (user-trial, bug 1)."""

from __future__ import annotations

from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.importers.series import series

_EVAL = "{{'eval_loss': {loss:.4f}, 'eval_runtime': 12.3, 'eval_samples_per_second': 81.2, " \
        "'eval_steps_per_second': 10.1, 'epoch': {epoch:.2f}}}\n"


def _console(records: int, eval_every: int, eval_first: bool = False) -> str:
    """`records` train dicts (logging_steps apart), an eval dict after every `eval_every`-th, the summary."""
    out = [_EVAL.format(loss=3.5, epoch=0.0)] if eval_first else []
    for k in range(1, records + 1):
        epoch = 3 * k / records
        out.append(f"{{'loss': {3.3 - 2.2 * k / records:.4f}, 'grad_norm': 1.1, 'learning_rate': "
                   f"{5e-05 * (1 - k / records):.3e}, 'epoch': {epoch:.2f}}}\n")
        if k % eval_every == 0:
            out.append(_EVAL.format(loss=1.2 + k / 1000, epoch=epoch))
    out.append("{'train_runtime': 1234.5, 'train_samples_per_second': 25.9, 'train_steps_per_second': 0.81, "
               "'train_loss': 1.234, 'epoch': 3.0}\n")
    return "".join(out)


def test_an_eval_dict_shares_the_step_of_the_train_record_before_it(write) -> None:
    """The long log (read in blocks of interleaved shapes): 100 steps, the evals at 25, 50, 75, 100."""
    (run,) = read_any(write("hf_console.log", _console(100, 25)))
    loss, evals = series(run, LOSS), series(run, "eval/loss")
    assert sorted(loss) == list(range(1, 101))
    assert sorted(evals) == [25, 50, 75, 100]
    assert evals[100] == 1.3 and loss[100] == 1.1
    assert max(p.step for p in run.points) == 100
    assert any("100 metric records carry no step counter" in w for w in run.warnings)


def test_a_short_console_read_line_by_line_numbers_the_same_way(write) -> None:
    """A few lines (read line by line): 4 train records, an eval after the 2nd and the 4th."""
    (run,) = read_any(write("hf_console.log", _console(4, 2)))
    assert sorted(series(run, LOSS)) == [1, 2, 3, 4]
    assert sorted(series(run, "eval/loss")) == [2, 4]
    assert max(p.step for p in run.points) == 4


def test_an_eval_before_training_is_the_first_record_and_train_dicts_still_count_one_each(write) -> None:
    """`eval_on_start`: the eval comes first (step 1), each train record one step after it; and a log of train
    dicts alone is numbered as before."""
    (run,) = read_any(write("hf_console.log", _console(60, 20, eval_first=True)))
    evals = series(run, "eval/loss")
    assert sorted(evals) == [1, 21, 41, 61] and evals[1] == 3.5
    assert sorted(series(run, LOSS)) == list(range(2, 62))
    (plain,) = read_any(write("plain.log", _console(60, 1000)))
    assert sorted(series(plain, LOSS)) == list(range(1, 61))
