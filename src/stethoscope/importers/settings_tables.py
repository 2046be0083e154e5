"""Tables of settings, not of a run: a CSV with no step, epoch or steps-done column whose columns name no outcome
of training (a loss, an accuracy, an error, a reward, a score) holds one configuration a row and what it cost
(char-rnn's `training_log.csv`: `hidden_size,n_layers,chunk_len,batch_size,learning_rate,total_time`, one row a
model tried). Read by its row index it became a 16-step "run" whose LR "jumped"; it is refused instead, as a
table of results one row a model is (`tabular.refuse_results_table`)."""

from __future__ import annotations

import re
from pathlib import Path

from stethoscope.errors import InputError

# The words a column of a training outcome carries (a metric a run is judged by); settings and costs carry none.
_OUTCOME = re.compile(r"(?i)loss|acc|err|reward|return|score|perplex|ppl|f1|bleu|rouge|wer|cer|map|iou|dice|auc|"
                      r"precision|recall|mse|mae|nll|likelihood|elbo|kl|entropy|xent|top[-_]?[15]|psnr|ssim|fid|"
                      r"metric|val|eval|test|objective|cost|fitness|value")


def refuse_settings_table(path: Path, header: list[str]) -> None:
    """Raises InputError for a table read by its row index whose columns name no training outcome."""
    if any(_OUTCOME.search(column) for column in header):
        return
    shown = ", ".join(c.strip() for c in header[:8]) + (", ..." if len(header) > 8 else "")
    raise InputError(path, f"a table of settings, one row a configuration ({shown}): no step, epoch or iteration "
                           "column and no training metric (a loss, an accuracy, a reward, a score): expected a "
                           "training log, one row a logging step")
