"""The exporter contract, the names users pass, and the null exporter."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from stethoscope.records import Finding

# A point as the writer carries it: (name, step, value, unix time or None).
Point = tuple[str, int, float, "float | None"]


@dataclass
class ExportContext:
    """Which run and rank an exporter writes for."""

    run: str
    """The run's name (its directory's name): the `run` label, the W&B/MLflow run name."""
    run_dir: Path
    rank: int = 0
    world_size: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    """The training config stored with the run (W&B config, MLflow params)."""

    @property
    def label(self) -> str:
        """The run's name, with the rank when the run has several."""
        return self.run if self.world_size <= 1 else f"{self.run}/rank-{self.rank}"


class Exporter(Protocol):
    """Receives every durable batch of points and the findings raised on it."""

    def open(self, context: ExportContext) -> None: ...

    def write(self, points: Sequence[Point], findings: Sequence[Finding]) -> None: ...

    def close(self) -> None: ...


class NullExporter:
    """Exports nothing (a placeholder, and the base of tests' fakes)."""

    def open(self, context: ExportContext) -> None:
        pass

    def write(self, points: Sequence[Point], findings: Sequence[Finding]) -> None:
        pass

    def close(self) -> None:
        pass


NAMES = ("prometheus", "tensorboard", "wandb", "mlflow")


def make(spec: Any) -> Any:
    """An exporter from a name in NAMES (default options) or an exporter object (returned as is)."""
    if not isinstance(spec, str):
        if not all(hasattr(spec, m) for m in ("open", "write", "close")):
            raise ValueError(f"export: expected one of {', '.join(NAMES)} or an exporter object, got {spec!r}")
        return spec
    name = spec.strip().lower()
    if name == "prometheus":
        from stethoscope.exporters.prometheus import Prometheus
        return Prometheus()
    if name == "tensorboard":
        from stethoscope.exporters.tensorboard import TensorBoard
        return TensorBoard()
    if name in ("wandb", "w&b"):
        from stethoscope.exporters.wandb import WandB
        return WandB()
    if name == "mlflow":
        from stethoscope.exporters.mlflow import MLflow
        return MLflow()
    raise ValueError(f"export: unknown exporter {spec!r}; expected one of {', '.join(NAMES)} or an exporter object")


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/ :]")


def safe_key(name: str) -> str:
    """A metric name MLflow and W&B accept (letters, digits, _ - . / space colon)."""
    return _UNSAFE.sub("_", name)
