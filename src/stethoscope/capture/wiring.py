"""The Monitor's optional parts: live detection, alerts, exporters, the automatic recovery policy, the probe,
the optimizer hooks. Each is checked before any of the Monitor's threads starts where it can be, and each
imports its package only when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stethoscope.config import env_alerts_file


def live_detection(detect: Any) -> Any:
    """The live detection observer for `Monitor(detect=...)`: True (defaults), False (none) or a DetectConfig."""
    if detect is False:
        return None
    try:
        from stethoscope.detect.live import LiveDetection
        from stethoscope.detect.registry import DetectConfig, DetectorSet
    except ImportError:  # detectors not installed in this build
        return None
    config = DetectConfig() if detect is True else detect
    if not isinstance(config, DetectConfig):  # MonitorConfig cannot import it: checked here
        raise ValueError(f"detect must be True, False or a DetectConfig, got {detect!r}")
    return LiveDetection(DetectorSet(config=config))


def recorded_detect(detection: Any) -> dict[str, Any]:
    """The run metadata that records the thresholds the live detectors run with (`detect.config.META_KEY`):
    `diagnose` and the views replay the stored run with them, not with the defaults. Empty without detectors."""
    if detection is None:
        return {}
    from stethoscope.detect.config import META_KEY

    return {META_KEY: detection.detectors.config.as_recorded()}


def exporters(export: Any, prometheus_port: int | None) -> list[Any] | None:
    """The live exporters `Monitor(export=..., prometheus_port=...)` asks for (a misspelt name or a missing
    package fails here, before any thread starts), or None."""
    if export is None and prometheus_port is None:
        return None
    from stethoscope.exporters.live import exporters as make

    return make(export, prometheus_port)


def recovery_policy(config: Any, detection: Any, checkpoints: Any) -> Any:
    """The recovery policy for `Monitor(recovery=Recovery(...))` (checked before any thread starts)."""
    if config is None or config is False:
        return None
    from stethoscope.act.recovery import Recovery, RecoveryPolicy

    if config is True:
        config = Recovery()
    if not isinstance(config, Recovery):
        raise ValueError(f"recovery must be a stethoscope.Recovery, got {config!r}")
    if checkpoints is None:
        raise ValueError("recovery rolls back to a checkpoint: pass checkpoints=stethoscope.Checkpoints(dir, every=N) too")
    if detection is None:
        raise ValueError("recovery needs the live detectors: with detect=False there is nothing to recover from")
    return RecoveryPolicy(config)


def grad_stats(settings: Any, model: Any, optimizer: Any) -> Any:
    """The optimizer pre-hook that computes fused grad norms (torch imported here), or None."""
    if optimizer is None or settings.grad_norms == "off":
        return None
    from stethoscope.capture.torch_hooks import GradStats

    names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
    return GradStats(optimizer, names, settings.grad_norms, settings.layers_every, settings.details_every,
                     int(settings.update_ratio_max_mib * (1 << 20)))


def lr_used(optimizer: Any) -> Any:
    """The optimizer pre-hook that notes the LR each update used, or None (no optimizer, or one without hooks)."""
    if optimizer is None or not hasattr(optimizer, "register_step_pre_hook"):
        return None
    from stethoscope.capture.torch_hooks import LrUsed

    return LrUsed(optimizer)


def alerts_config(spec: Any, detection: Any) -> Any:
    """The alerts configuration `Monitor(alerts=...)` or $STETHOSCOPE_ALERTS asks for, or None."""
    if spec is False or (spec is None and env_alerts_file() is None):
        return None  # no alerts: the channels (ssl, smtplib, http.client) are not even imported
    from stethoscope.act.config import resolve_alerts

    config = resolve_alerts(spec)
    if config is not None and detection is None:
        if spec is None:  # $STETHOSCOPE_ALERTS, for a Monitor that detects nothing
            return None
        raise ValueError("alerts need the live detectors: with detect=False there is nothing to alert on")
    return config


def nonfinite_locator(spec: Any, model: Any, scaler: Any, write_events: Any) -> Any:
    """`Monitor(debug_nonfinite=...)`: re-runs a non-finite step's batch through the locator (see
    stethoscope.debug.watch), its report written as an event; None when not asked for."""
    if not spec:
        return None
    from stethoscope.debug.watch import locator

    return locator(spec, model, scaler, write_events)


def start_exports(recorder: Any, export: list[Any] | None, run_dir: Any, rank: int, world_size: int,
                  config: Any) -> Any:
    """The live exporters (the last stage of the observer chain, capture/observers.py), or None. An exporter
    whose open raises closes the recorder: no writer thread is left behind."""
    if export is None:
        return None
    from stethoscope.exporters.live import attach_exports

    try:
        return attach_exports(recorder, export, run_dir, rank, world_size, config)
    except BaseException:
        recorder.close()
        raise


def live_alerts(config: Any, recorder: Any, rank: int, run_dir: Any, strict: bool) -> Any:
    """The alert rules as a stage of the observer chain (capture/observers.py), or None without alerts. What an
    alert says is the run's incident as `diagnose` computes it, once the recorder made the store durable."""
    if config is None:
        return None
    from stethoscope.act.live import LiveAlerts, knowledge_advice

    store = recorder.store
    return LiveAlerts(None, config, store.write_events, store.write_points, rank, str(Path(run_dir).resolve()),
                      knowledge_advice(), strict=strict, wait_durable=recorder.wait_durable)


def probe(settings: Any, owner: Any, run_dir: Any, rank: int, world_size: int, recorder: Any, model: Any) -> Any:
    """The probe server, hang watchdog and cross-rank health for `Monitor(serve=...)`, or None."""
    if settings.serve is False:
        return None
    from stethoscope.probe.live import for_monitor

    return for_monitor(settings.serve, owner, run_dir=run_dir, rank=rank, world_size=world_size, recorder=recorder,
                       model=model, strict=settings.strict)
