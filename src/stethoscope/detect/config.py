"""Thresholds of every streaming detector, in one typed, validated dataclass.

Defaults come from the field (OLMo's 6 sigma over the previous 128 values, PaLM/BLOOM spike
recoveries of tens of steps, Karpathy's update/weight ratio of ~1e-3) and hold across dense logs
(every step) and sparse ones (every 10-50 steps, excerpts of a few lines). Windows are counted in
records (bounded memory); durations are counted in steps (sparse logs stay comparable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

META_KEY = "detect"
"""The `run` table key under which a Monitor records the thresholds it ran with (`DetectConfig.as_recorded`);
`diagnose` and every view replay a stored run with them (`DetectConfig.from_recorded`)."""


@dataclass(frozen=True, slots=True)
class DetectConfig:
    """Thresholds for the detectors of `stethoscope.detect`. Every field is validated on creation."""

    # -- spikes (loss and grad norm) ------------------------------------------------------------
    spike_sigma: float = 6.0
    """A spike lies more than this many noise sigmas above the recent level (OLMo uses 6)."""
    spike_window: int = 128
    """Values kept per series for the noise estimate (OLMo: the previous 128)."""
    level_window: int = 8
    """Newest values whose median is the 'recent level' a spike is measured against."""
    prior_weight: float = 8.0
    """How many values the prior noise is worth; short excerpts lean on it, long runs on data."""
    loss_prior_rel_noise: float = 0.05
    """Prior step-to-step noise of the train loss, relative to its level."""
    loss_spike_min_rel: float = 0.1
    """A loss spike rises at least this fraction above the recent level, however quiet the run."""
    loss_spike_warn_rel: float = 0.25
    """Loss spikes rising at least this fraction above the recent level are warnings, others info."""
    recover_rel: float = 0.05
    """A spike has recovered when the loss is back within this fraction (or 2 sigma) of its level."""
    grad_prior_rel_noise: float = 0.25
    """Prior step-to-step noise of the grad norm, relative to its level (grad norms are jumpy)."""
    grad_spike_min_ratio: float = 2.0
    """A grad-norm spike is at least this many times the recent level."""
    grad_recover_ratio: float = 1.5
    """A grad-norm incident ends when the norm is back under this many times its level."""
    grad_explosion_ratio: float = 10.0
    """A grad-norm incident that reaches this many times its level and stays up is an explosion."""
    explosion_rising_records: int = 3
    """...or that keeps rising for this many records (BLOOM-176B: 5 records, 0.24 -> 960)."""
    lead_steps: int = 50
    """How far back (steps) a grad-norm rise counts as leading a loss spike."""
    divergence_min_steps: int = 100
    """A spike whose loss has not come back after this many steps is a divergence."""
    restart_grace_steps: int = 50
    """Loss jumps this soon after a resume or LR-schedule restart are expected, not spikes."""
    post_warmup_steps: int = 500
    """A spike within this many steps after warm-up ends is blamed on the peak LR."""
    gap_reset_steps: int = 1000
    """Records further apart than this are not compared (an excerpt with a gap): baselines restart."""
    warmup_steps: int | None = None
    """Known warm-up length; None infers it from a rising LR (grad spikes in warm-up are info)."""

    # -- non-finite values ----------------------------------------------------------------------
    nan_quiet_steps: int | None = None
    """A non-finite incident closes after this many steps without non-finite values (a later one is a new
    incident); none: the `nan` row's `resolve_steps` in findings/catalogue.py (20)."""

    # -- trend: divergence, plateau, frozen loss, label masking ---------------------------------
    trend_halflife_steps: float = 50.0
    """Half-life (steps) of the smoothed loss that divergence and plateau look at."""
    divergence_rise_rel: float = 0.2
    """A sustained rise of the smoothed loss this far above its best is a divergence..."""
    divergence_min_records: int = 8
    """...when it spans at least this many records (and divergence_min_steps steps): the whole
    median-of-8 window, so a wiggle inside an epoch is not a divergence."""
    runaway_rise_rel: float = 0.5
    """A loss rising on 3 records in a row by this fraction in all is a runaway divergence at once."""
    divergence_learned_share: float = 0.1
    """...and either rise undoes at least this share of what the run had learned (its first loss less its
    best): a loss that memorised its data to near 0 and wobbles off that floor lost little."""
    plateau_min_records: int = 20
    """A plateau needs at least this many records..."""
    plateau_min_steps: int = 200
    """...spanning at least this many steps."""
    plateau_max_progress: float = 0.1
    """A plateau has improved less than this fraction of its starting loss since the start."""
    frozen_min_records: int = 3
    """Exactly identical losses on this many records in a row mean the loss is frozen..."""
    frozen_min_steps: int = 50
    """...or, when they are the whole log, on two records this many steps apart (>= 4 significant digits)."""
    vocab_size: int | None = None
    """Vocabulary size when known: a flat loss near ln(vocab) means uniform predictions."""

    # -- overfitting ----------------------------------------------------------------------------
    overfit_patience: int = 3
    """Evals after the best eval loss, all worse than it, before overfitting is raised."""
    overfit_min_rel: float = 0.01
    """The eval loss must have risen at least this fraction above its best."""
    eval_prior_rel_noise: float = 0.01
    """Prior eval-to-eval noise of the eval loss, relative to its level."""
    overfit_sigma: float = 2.0
    """A rise beyond this many eval-noise sigmas makes overfitting a warning, below it info."""
    eval_min_count: int = 3
    """Fewer evals than this over a run of eval_sparse_min_steps steps is 'eval too sparse'."""
    eval_sparse_min_steps: int = 1000
    """Runs shorter than this are not told their evals are too sparse."""
    eval_loss_window: int | None = None
    """The log prints the eval loss as the mean of the last this many evals: overfitting and frozen weights are
    judged on the evals recovered from the means. None: as the importer read it (mmengine: its LogProcessor
    window_size, 10 by default), else 1 (no running mean; set 1 to turn the recovery off)."""
    step_time_window: int | None = None
    """The log prints the step time as the mean of the last this many steps (mmengine's `time`): a slowdown's
    onset is fitted to the means as the averages of their windows (`detect.slowdown.window_onset`). None: as
    the importer read it, else 1 (each record its own step time)."""

    # -- gradients ------------------------------------------------------------------------------
    grad_norm_ceiling: float | None = None
    """Absolute grad-norm ceiling. None: relative checks only (fp16 runs log norms of 1e5 fine)."""
    grad_growth_ratio: float = 10.0
    """Smoothed grad norm this many times its post-warm-up baseline is a slow explosion."""
    vanishing_ratio: float = 1e-3
    """Grad norm below this fraction of its baseline (or exactly 0 after being > 0) is vanishing."""
    vanishing_records: int = 5
    """...on this many records in a row."""
    clip_fraction: float = 0.5
    """Clipping engaged (clip coef < 1) on more than this fraction of recent records: LR too high?"""
    clip_window: int = 100
    """Records over which the clipping fraction is measured (needs at least half of them)."""
    update_ratio_high: float = 0.03
    """An update/weight ratio above this (healthy ~1e-3) warns that the LR is too high."""
    update_ratio_records: int = 3
    """...on this many records in a row."""
    update_ratio_jump: float = 10.0
    """...or at once, when it is this many times its recent median (a sudden LR blow-up)..."""
    update_ratio_jump_min: float = 0.01
    """...and above this."""

    # -- mixed precision ------------------------------------------------------------------------
    min_loss_scale: float = 1.0
    """A dynamic loss scale at or below this has collapsed (fp16 overflows on every step)."""
    loss_scale_storm_halvings: int = 4
    """This many halvings of the loss scale within loss_scale_storm_steps is an overflow storm."""
    loss_scale_storm_steps: int = 20
    """Window (steps) of the overflow-storm count."""

    # -- throughput -----------------------------------------------------------------------------
    step_time_prior_rel_noise: float = 0.05
    """Prior noise of the step time, relative to its level."""
    dip_min_rel: float = 0.3
    """A slow step takes at least this fraction longer than the recent level."""
    drop_min_rel: float = 0.03
    """A persistent slowdown is at least this fraction (BLOOM's slow GPU: 5%)."""
    drop_sigma: float = 4.0
    """...and this many sigmas (of the data, floored at 1%) above the level, on consecutive records."""
    drop_records: int = 2
    """Consecutive slow records that make a slowdown persistent rather than a dip."""
    periodic_min_dips: int = 2
    """Transient dips that make a periodic stall (GC pauses, eval, checkpoint)."""
    periodic_warn_cost: float = 0.05
    """Periodic stalls costing at least this fraction of run time are warnings, below it info."""

    # -- memory ---------------------------------------------------------------------------------
    leak_min_steps: int = 200
    """Memory growth is a leak when it lasts at least this many steps..."""
    leak_min_records: int = 10
    """...over at least this many records..."""
    leak_min_rel: float = 0.1
    """...and grows at least this fraction (and 0.25 GiB) without ever falling back."""
    memory_near_limit: float = 0.95
    """Memory above this fraction of the device total is 'near the limit'."""

    # -- learning rate --------------------------------------------------------------------------
    lr_jump_rel: float = 0.01
    """An LR change of at least this fraction of the peak LR, far beyond the schedule's slope, is a jump."""
    lr_zero_records: int = 20
    """LR exactly 0 on this many records (and 10% of the run) is stuck at 0."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"DetectConfig.{f.name} must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"DetectConfig.{f.name} must be >= 0, got {value!r}")
        self._check_positive(
            "spike_sigma", "spike_window", "level_window", "grad_spike_min_ratio", "grad_explosion_ratio",
            "trend_halflife_steps", "overfit_patience", "clip_window", "lr_zero_records",
            "loss_scale_storm_halvings", "drop_records", "periodic_min_dips",
        )
        self._check_ratio("clip_fraction", "memory_near_limit")
        if self.grad_recover_ratio >= self.grad_spike_min_ratio:
            raise ValueError("DetectConfig.grad_recover_ratio must be below grad_spike_min_ratio")
        if self.loss_spike_warn_rel < self.loss_spike_min_rel:
            raise ValueError("DetectConfig.loss_spike_warn_rel must be >= loss_spike_min_rel")
        if self.level_window > self.spike_window:
            raise ValueError("DetectConfig.level_window must be <= spike_window")
        if self.vocab_size is not None and self.vocab_size < 2:
            raise ValueError(f"DetectConfig.vocab_size must be >= 2, got {self.vocab_size}")
        if self.eval_loss_window is not None and self.eval_loss_window < 1:
            raise ValueError(f"DetectConfig.eval_loss_window must be >= 1, got {self.eval_loss_window}")
        if self.step_time_window is not None and self.step_time_window < 1:
            raise ValueError(f"DetectConfig.step_time_window must be >= 1, got {self.step_time_window}")

    def _check_positive(self, *names: str) -> None:
        for name in names:
            if getattr(self, name) <= 0:
                raise ValueError(f"DetectConfig.{name} must be > 0, got {getattr(self, name)!r}")

    def _check_ratio(self, *names: str) -> None:
        for name in names:
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"DetectConfig.{name} must be in (0, 1], got {getattr(self, name)!r}")

    # -- from a TOML table or the command line ----------------------------------------------------
    @classmethod
    def from_mapping(cls, values: dict[str, object]) -> DetectConfig:
        """The defaults with `values` applied ({field: value}, e.g. a TOML `[detect]` table); numbers are
        taken as they are, strings parsed as in `with_overrides`. ValueError names a bad key or value."""
        return cls().updated(values)

    def with_overrides(self, items: list[str] | tuple[str, ...]) -> DetectConfig:
        """This config with `key=value` strings applied (the CLI's `--set`), each value parsed to its
        field's type (`none` for an optional field). ValueError names a bad key or value."""
        values: dict[str, object] = {}
        for item in items:
            key, sep, text = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"expected key=value, got {item!r} (e.g. spike_sigma=8)")
            values[key.strip()] = text.strip()
        return self.updated(values)

    def as_recorded(self) -> dict[str, Any]:
        """Every field, for the run's metadata (`META_KEY`)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_recorded(cls, values: object) -> DetectConfig | None:
        """The config a run recorded (`as_recorded`), fields a later version dropped left out and fields it
        lacks at their defaults; None when there is none or it is not valid (the replay then uses the defaults)."""
        if not isinstance(values, dict):
            return None
        names = {f.name for f in fields(cls)}
        try:
            return cls().updated({k: v for k, v in values.items() if k in names})
        except (TypeError, ValueError):
            return None

    def updated(self, values: dict[str, object]) -> DetectConfig:
        """A copy with `values` ({field: number, or a string to parse}) applied and validated."""
        import dataclasses

        types = {f.name: str(f.type) for f in fields(self)}
        for key in values:
            if key not in types:
                raise ValueError(f"unknown detector setting {key!r}{_did_you_mean(key, types)}; "
                                 f"valid keys: {', '.join(types)}")
        return dataclasses.replace(self, **{k: _coerce(k, types[k], v) for k, v in values.items()})


def _did_you_mean(key: str, names: dict[str, str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _coerce(name: str, type_text: str, value: object) -> object:
    """`value` as the field's type: int, float or None (optional fields); strings are parsed."""
    kinds = {part.strip() for part in type_text.split("|")}
    want = "an integer" if "int" in kinds else "a number"
    if "None" in kinds:
        want += " or none"
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("none", "null") and "None" in kinds:
            return None
        try:
            value = float(text)  # "1e3" is an integer too; the check below keeps 2.5 out of int fields
        except ValueError:
            raise ValueError(f"DetectConfig.{name} expects {want}, got {value!r}") from None
    if value is None and "None" in kinds:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"DetectConfig.{name} expects {want}, got {value!r}")
    if "int" in kinds:
        if not float(value).is_integer():
            raise ValueError(f"DetectConfig.{name} expects {want}, got {value!r}")
        return int(value)
    return float(value)
