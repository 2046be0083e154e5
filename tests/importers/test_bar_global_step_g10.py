"""NeMo's Lightning bar: `global_step` counts from 0, the bar from 1; where tqdm prints the step rounded (`1e+3`),
the bar's count gives it, less the offset an exact `global_step` beside it showed."""

from __future__ import annotations

from stethoscope.importers.textlog import TextLogImporter
from stethoscope.records import LOSS
from tests.importers.series import series

_BAR = ("[NeMo I 2024-07-24 11:20:33 nemo_logging:349] Epoch 0:  {p:>2d}%|█         | {n}/6027 [07:27<37:27, 2.24it/s, "
        "loss=1.51, v_num=, reduced_train_loss={v:.3f}, global_step={g}, consumed_samples=2.56e+5]\n")


def test_a_rounded_global_step_takes_the_offset_an_exact_one_showed(write) -> None:
    rows = [(1, "0.000", 2.38), (501, "500.0", 2.1), (1001, "1e+3", 1.48), (2001, "2e+3", 1.98)]
    text = "".join(_BAR.format(p=100 * n // 6027, n=n, g=g, v=v) for n, g, v in rows)
    path = write("train.log", text)
    importer = TextLogImporter()
    assert importer.sniff(path, text)
    assert series(importer.read(path), LOSS) == {0: 2.38, 500: 2.1, 1000: 1.48, 2000: 1.98}
