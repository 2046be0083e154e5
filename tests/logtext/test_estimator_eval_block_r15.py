"""TF Estimator's eval results block carries the eval's own step among its values (wild-logs-6 F6, readers-15):
`***** Eval results *****`, then `  eval_accuracy = ..`, `  eval_loss = ..`, `  global_step = 5468`, `  loss = ..`.
Before, the `global_step` line closed the eval block, so the `loss` after it (the eval's mean loss) was read as
the train loss at 5468, and a run whose train loss was 0.03 got an ERROR divergence (0.034 -> 0.72). Synthetic
excerpt in that shape."""

from __future__ import annotations

import pytest

from stethoscope.records import EVAL_LOSS, LOSS
from tests.importers.series import read_text, series


def _estimator() -> str:
    out = ["INFO:tensorflow:Running training\n"]
    for step in range(0, 5500, 100):
        out.append(f"INFO:tensorflow:loss = {1.0 / (1 + step / 300):.8f}, step = {step} (147.086 sec)\n")
        if step:
            out.append("INFO:tensorflow:global_step/sec: 0.680\n")
    out += ["INFO:tensorflow:Saving checkpoints for 5468 into /tmp/result/model.ckpt.\n",
            "INFO:tensorflow:Loss for final step: 0.0025343.\n",
            "INFO:tensorflow:Starting evaluation at 2019-02-18-08:07:59\n",
            "INFO:tensorflow:Finished evaluation at 2019-02-18-08:09:56\n",
            "INFO:tensorflow:Saving dict for global step 5468: eval_accuracy = 0.8500477, eval_auc = 0.68875444, "
            "eval_loss = 0.7216634, global_step = 5468, loss = 0.7218847\n",
            "INFO:tensorflow:***** Eval results *****\n",
            "INFO:tensorflow:  eval_accuracy = 0.8500477\n",
            "INFO:tensorflow:  eval_auc = 0.68875444\n",
            "INFO:tensorflow:  eval_loss = 0.7216634\n",
            "INFO:tensorflow:  global_step = 5468\n",
            "INFO:tensorflow:  loss = 0.7218847\n"]
    return "".join(out)


def test_the_loss_after_an_eval_blocks_global_step_is_the_evals() -> None:
    run = read_text(_estimator())
    loss = series(run, LOSS)
    assert 5468 not in loss and max(loss) == 5400
    assert series(run, EVAL_LOSS)[5468] == pytest.approx(0.7218847)
