"""Which column of a CSV is its axis: an RL log's count of the steps done; a table of results has none."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stethoscope.cli.main import cli
from stethoscope.errors import InputError
from stethoscope.importers.tabular import CSVImporter
from stethoscope.records import LOSS
from tests.importers.series import series

# SB3's CSV logger (progress.csv), hand-written in its shape: no step column, the steps done under `time/`
SB3_PROGRESS = """train/value_loss,time/fps,rollout/ep_rew_mean,time/total_timesteps,time/iterations,train/n_updates,train/loss
9244.7,3,-77.6,10,5,40,4601.0
8641.3,6,-89.4,20,10,90,4302.7
7001.0,6,-80.0,30,15,140,3500.5
"""


def test_sb3_total_timesteps_is_the_step(write) -> None:
    """Read by row index, the run's steps were 0, 1, 2: a finding at 'step 90' meant timestep 910."""
    run = CSVImporter().read(write("progress.csv", SB3_PROGRESS))
    assert series(run, LOSS) == {10: 4601.0, 20: 4302.7, 30: 3500.5}
    assert "time/total_timesteps" in run.meta["notes"]["step"]
    assert "time/total_timesteps" not in {p.name for p in run.points}


def test_steps_done_with_a_blank_in_its_name(write) -> None:
    text = "Progress,total timesteps,ep_rew_mean,total_loss\n0.0%,8192,12.6,\n0.82%,16384,16.4,2.06\n1.64%,24576,33.5,0.98\n"
    run = CSVImporter().read(write("run.csv", text))
    assert series(run, LOSS) == {16384: 2.06, 24576: 0.98}


def test_a_total_that_stays_put_is_no_axis(write) -> None:
    text = "total_steps,loss\n500,2.0\n500,1.5\n500,1.2\n"
    run = CSVImporter().read(write("log.csv", text))
    assert series(run, LOSS) == {0: 2.0, 1: 1.5, 2: 1.2}


RESULTS = """model_name,mode,accuracy,f1_score,training_time_sec,best_val_loss
lenet,scratch,0.98,0.97,2.03,0.051
resnet50,scratch,0.415,0.32,40.6,4.77
zfnet,scratch,0.25,0.1,10.5,1.60
"""


def test_a_table_of_results_is_refused(write) -> None:
    """One row a model, no step column: it was read as a 3-step run."""
    with pytest.raises(InputError, match=r"summary\.csv: a table of results, one row a 'model_name' \(lenet, resnet50"):
        CSVImporter().read(write("summary.csv", RESULTS))


def test_refusal_is_one_line_and_exit_2(write) -> None:
    path = write("summary.csv", RESULTS)
    done = CliRunner().invoke(cli, ["diagnose", str(path)])
    assert done.exit_code == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "expected a training log" in done.stderr


@pytest.mark.parametrize("first", [("epoch 1", "epoch 2", "epoch 3"),
                                   ("2024-05-01 10:00:00", "2024-05-01 10:05:00", "2024-05-01 10:10:00")])
def test_counted_or_timed_first_columns_are_a_series(write, first: tuple[str, str, str]) -> None:
    text = "when,loss\n" + "".join(f"{name},{loss}\n" for name, loss in zip(first, (2.0, 1.5, 1.2)))
    run = CSVImporter().read(write("log.csv", text))
    assert sorted(series(run, LOSS).values()) == [1.2, 1.5, 2.0]
