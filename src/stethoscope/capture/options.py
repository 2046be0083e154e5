"""The Monitor's less common constructor options, grouped by what they are for.

`Monitor(run_dir, model, optimizer, tokens_per_step=..., config=..., resume=..., settings=...)` covers the
common case. The rest lives in three typed objects, `step=StepFacts(...)`, `parts=Parts(...)` and
`placement=Placement(...)`; each of their fields is also accepted as a plain keyword
(`Monitor(..., checkpoints=ck, max_grad_norm=1.0)`), which `split_options` maps onto them. Any other
keyword is a field of `stethoscope.config.MonitorConfig` (`settings`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any


@dataclass
class StepFacts:
    """What the Monitor cannot see by itself about a training step."""

    samples_per_step: int | None = None
    """This rank's samples per optimizer step: `perf/samples_per_s` (a `step(samples=)` wins)."""

    seq_len: int | None = None
    """Tokens per sequence, for the attention term of the FLOPs per token (`perf/mfu`)."""

    peak_flops: float | None = None
    """The accelerator's peak FLOP/s for `perf/mfu` (default: looked up from the device's name)."""

    max_grad_norm: float | None = None
    """The clipping threshold: `grad/clip_coef` is recorded beside `grad/norm`."""

    scaler: Any = None
    """A `torch.amp.GradScaler`: its scale is recorded (`amp/loss_scale`) and checkpointed."""


@dataclass
class Parts:
    """What the Monitor does besides recording: checkpoints, recovery, debugging, live export."""

    checkpoints: Any = None
    """A `stethoscope.Checkpoints`: saved after steps when due, restored by `Monitor.resume()`."""

    recovery: Any = None
    """A `stethoscope.Recovery` (or True): roll back past an incident the live detectors found."""

    debug_nonfinite: Any = False
    """True or a `stethoscope.debug.NonfiniteWatch`: re-run the first non-finite step's batch to locate it."""

    export: Any = None
    """Forward the run live: "tensorboard", "wandb", "mlflow", "prometheus" or exporter objects."""

    prometheus_port: int | None = None
    """Serve `/metrics` on 127.0.0.1 at this port (0: a free one)."""


@dataclass
class Placement:
    """Where the Monitor records: which rank, into which store, reading which device memory."""

    rank: int | None = None
    """This process's rank (default: from the launcher's environment)."""

    world_size: int | None = None
    """The number of ranks (default: from the launcher's environment)."""

    store: Any = None
    """Replaces the rank's SQLite store (a fake from `stethoscope.testing`)."""

    device_memory: Any = None
    """Replaces the device memory reader (a fake from `stethoscope.testing`)."""


def split_options(options: dict[str, Any], step: StepFacts | None, parts: Parts | None,
                  placement: Placement | None) -> tuple[StepFacts, Parts, Placement, dict[str, Any]]:
    """The typed objects with the plain keywords among `options` set on them (a keyword wins over the
    object's field), and the keywords left for `MonitorConfig`."""
    rest = dict(options)
    out = []
    for kind, given in ((StepFacts, step), (Parts, parts), (Placement, placement)):
        mine = {f.name: rest.pop(f.name) for f in fields(kind) if f.name in rest}
        out.append(dataclasses.replace(given, **mine) if given is not None else kind(**mine))
    return out[0], out[1], out[2], rest
