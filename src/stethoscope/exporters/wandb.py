"""Weights & Biases: one W&B run per stethoscope run (and rank), one `log` per step.

W&B's own step may never go back, but a run's steps do (a rollback, a resume from an older checkpoint).
So the training step is logged as a metric, `stethoscope/step`, and every other metric is plotted against
it (`define_metric`, W&B's custom x-axis): a step below the last one is logged like any other, W&B's
internal `_step` just counts the rows, and nothing is dropped. Findings are counted in the run summary and
listed in a `stethoscope/findings` table. Mode, entity and login come from W&B's own settings (`WANDB_MODE=offline`
writes the run under `dir` for a later `wandb sync`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stethoscope.config import env_secret
from stethoscope.exporters.base import ExportContext, Point, safe_key
from stethoscope.extras import require
from stethoscope.records import Finding

STEP_KEY = "stethoscope/step"  # the training step, the x-axis of every other metric


class WandB:
    """`project` (default "stethoscope"), `dir` (default: $WANDB_DIR when set, else the run directory), `mode`
    (None: W&B decides;
    "offline", "online", "disabled"), `name` (default: the run's name), further `wandb.init` keywords."""

    def __init__(self, project: str | None = None, dir: str | Path | None = None, mode: str | None = None,
                 name: str | None = None, **init: Any) -> None:
        require("wandb", "wandb", "the W&B exporter")  # fails early: before a Monitor starts
        self.project, self.dir, self.mode, self.name, self.init = project, dir, mode, name, init
        self.run: Any = None
        self.local_dir: str | None = None
        """Where W&B keeps this run's files (an offline run: what `wandb sync` uploads)."""
        self._last: int | None = None
        self._row: dict[str, float] = {}
        self._findings: list[list[Any]] = []

    def open(self, context: ExportContext) -> None:
        wandb = require("wandb", "wandb", "the W&B exporter")
        chosen = self.dir if self.dir is not None else env_secret("WANDB_DIR")  # W&B's own setting wins over ours
        target = Path(chosen) if chosen is not None else context.run_dir
        target.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=self.project or "stethoscope", name=self.name or context.label,
                              dir=str(target), mode=self.mode, config=context.config or None,
                              reinit="create_new", **self.init)
        self.local_dir = getattr(self.run.settings, "sync_dir", None)
        self.run.define_metric(STEP_KEY)
        self.run.define_metric("*", step_metric=STEP_KEY)

    def write(self, points: Sequence[Point], findings: Sequence[Finding]) -> None:
        for name, step, value, _t in points:
            if step != self._last:
                self._commit()
                self._last = step
            self._row[safe_key(name)] = value
        for f in findings:
            self._findings.append([f.step, f.type, f.severity, f.message])

    def _commit(self) -> None:
        if self._row and self._last is not None:
            self.run.log({STEP_KEY: self._last, **self._row})
        self._row = {}

    def close(self) -> None:
        if self.run is None:
            return
        try:
            self._commit()
            self._log_findings()
        finally:
            run, self.run = self.run, None
            run.finish()

    def _log_findings(self) -> None:
        if not self._findings:
            return
        import wandb

        table = wandb.Table(columns=["step", "type", "severity", "message"], data=self._findings)
        self.run.log({"stethoscope/findings": table})
        for severity in sorted({row[2] for row in self._findings}):
            self.run.summary[f"stethoscope/findings/{severity}"] = sum(r[2] == severity for r in self._findings)
