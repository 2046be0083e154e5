"""A table whose rows are configurations, not logging steps, is refused (wild-logs-4's M3: char-rnn's
`training_log.csv`, settings and a total time one row a model, read as a 16-step run whose LR "jumped")."""

from __future__ import annotations

import pytest

from stethoscope.errors import InputError
from stethoscope.importers import read_any
from stethoscope.records import LOSS
from tests.conftest import run_cli
from tests.importers.series import series

_SETTINGS = "hidden_size,n_layers,chunk_len,batch_size,learning_rate,total_time\n" + "".join(
    f"{h},{n},200,100,{lr},{10 + h / 10 + n * 4:.6f}\n" for lr in (0.01, 0.005) for h in (50, 100, 150, 200)
    for n in (1, 2))


def test_a_table_of_settings_and_times_is_refused_naming_its_columns(write, cli_env) -> None:
    path = write("training_log.csv", _SETTINGS)
    with pytest.raises(InputError, match="a table of settings, one row a configuration .hidden_size, n_layers"):
        read_any(path)
    out = run_cli("diagnose", str(path), env=cli_env)
    assert out.returncode == 2, out.stdout
    assert "training_log.csv" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("outcome", ["loss", "val_acc", "episode_reward", "bleu"])
def test_a_table_by_row_index_with_a_training_metric_is_still_read(write, outcome: str) -> None:
    text = f"learning_rate,{outcome},total_time\n" + "".join(f"0.01,{2 - i / 10:.2f},{i * 3.5:.1f}\n" for i in range(8))
    (run,) = read_any(write("log.csv", text))
    assert run.steps == 8
    if outcome == "loss":
        assert series(run, LOSS)[3] == pytest.approx(1.7)
