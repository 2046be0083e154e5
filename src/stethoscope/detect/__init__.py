"""Pure streaming detectors: `update(record) -> findings`, `state_dict()`, `load_state_dict()`.

No torch, no numpy, no I/O, no clock: they run live off the training thread on every step and
replay a foreign log after the fact. `DetectorSet` fans a record out to `default_detectors()`;
`DetectConfig` holds every threshold.
"""

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.registry import DetectorSet, default_detectors, merge_findings

__all__ = ["DetectConfig", "DetectorSet", "default_detectors", "merge_findings"]
