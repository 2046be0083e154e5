"""MLflow: one MLflow run per stethoscope run (and rank), metrics sent with `log_batch` (1,000 a call),
the run's config as params, findings as a `stethoscope/findings.json` artifact at the end.

The tracking URI is MLflow's own (`MLFLOW_TRACKING_URI`, or `tracking_uri=`: `sqlite:///mlflow.db`, a
server, or `file:///…` which MLflow 3 accepts only with `MLFLOW_ALLOW_FILE_STORE=true`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from stethoscope.exporters.base import ExportContext, Point, safe_key
from stethoscope.extras import require
from stethoscope.records import Finding

BATCH = 1000  # MLflow's limit of metrics per log_batch call
MAX_PARAMS = 100  # ... and of params


class MLflow:
    """`tracking_uri` (None: MLflow's default), `experiment` (default "stethoscope"), `run_name`
    (default: the run's name)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "stethoscope",
                 run_name: str | None = None) -> None:
        require("mlflow", "mlflow", "the MLflow exporter")  # fails early: before a Monitor starts
        self.tracking_uri, self.experiment, self.run_name = tracking_uri, experiment, run_name
        self.run_id: str | None = None
        self._client: Any = None
        self._metric: Any = None
        self._findings: list[dict[str, Any]] = []

    def open(self, context: ExportContext) -> None:
        require("mlflow", "mlflow", "the MLflow exporter")
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self._client = client = MlflowClient(tracking_uri=self.tracking_uri)
        self._metric = Metric
        found = client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(self.experiment)
        tags = {"stethoscope.run_dir": str(context.run_dir.resolve()), "stethoscope.rank": str(context.rank)}
        run = client.create_run(experiment_id, run_name=self.run_name or context.label, tags=tags)
        self.run_id = run.info.run_id
        params = [Param(safe_key(k)[:250], str(v)[:6000]) for k, v in _flat(context.config)][:MAX_PARAMS]
        if params:
            client.log_batch(self.run_id, params=params)

    def write(self, points: Sequence[Point], findings: Sequence[Finding]) -> None:
        now = int(time.time() * 1000)
        Metric = self._metric
        metrics = [Metric(safe_key(name), value, now if t is None else int(t * 1000), step)
                   for name, step, value, t in points]
        for start in range(0, len(metrics), BATCH):
            self._client.log_batch(self.run_id, metrics=metrics[start:start + BATCH])
        self._findings += [f.to_dict() for f in findings]

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None or self.run_id is None:
            return
        try:
            if self._findings:
                client.log_text(self.run_id, json.dumps(self._findings, indent=1), "stethoscope/findings.json")
        finally:
            client.set_terminated(self.run_id)


def _flat(config: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested config dicts as (dotted key, value) pairs."""
    if not isinstance(config, dict):
        return [(prefix or "config", config)] if config is not None else []
    out: list[tuple[str, Any]] = []
    for k, v in config.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out += _flat(v, key) if isinstance(v, dict) else [(key, v)]
    return out
