"""An eval line's metric under a scope of its own (mmengine's `coco/bbox_mAP`, an `mmlu/acc`) is the eval's metric.
The console reader kept only the `eval/`-named values of an eval line without a step, so mmengine's COCO mAP line
(`Epoch(val) [5][11/11]  coco/bbox_mAP: 0.0800 ...`) lost every metric but its `time`, and an RTMDet run whose
loss rises while its mAP climbs (the objective's rise) read as an ERROR divergence."""

from __future__ import annotations

from stethoscope.detect.overfit_quality import HeldOutQuality
from tests.importers.series import names, read_text, series

PREFIX = "2023/06/03 19:24:10 - mmengine - INFO - "


def _log(epochs: int = 4, iters: int = 21) -> str:
    lines = []
    for e in range(1, epochs + 1):
        for i in (10, 20):
            lines.append(f"{PREFIX}Epoch(train)   [{e}][{i}/{iters}]  lr: 4.1245e-04  eta: 2:14:43  time: 1.8798  "
                         f"data_time: 1.5406  memory: 2588  loss: {2 - e * 0.1 - i * 0.001:.4f}  loss_cls: 0.6914")
        lines.append(f"{PREFIX}Epoch(val) [{e}][11/11]    coco/bbox_mAP: {0.1 * e:.4f}  coco/bbox_mAP_50: "
                     f"{0.1 * e + 0.05:.4f}  data_time: 0.5765  time: 0.6373")
    return "\n".join(lines) + "\n"


def test_an_mmengine_coco_map_line_gives_the_evals_map() -> None:
    run = read_text(_log())
    maps = [n for n in names(run) if n.startswith("eval/coco/")]
    assert len(maps) == 2, names(run)
    first = min(maps, key=len)
    got = series(run, first)
    assert sorted(got.values()) == [0.1, 0.2, 0.3, 0.4]
    assert sorted(got) == [20, 41, 62, 83]  # each at its epoch's last logged train step
    quality = HeldOutQuality()  # ... and it is a quality metric the detectors weigh (overconfidence, a rise)
    quality.push(1, {first: 0.5})
    assert first in quality.series
