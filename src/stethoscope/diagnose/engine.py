"""Whole-run diagnosis: replay the streaming detectors over an imported log, classify its curves,
apply the field's knowledge, drop known non-problems, and find hangs and crashes in its text.

`diagnose_run(imported)` is what `stethoscope diagnose` calls; `diagnose_records(records, meta)`
is the same analysis for records already grouped by step (a live run's store).

The parts: `diagnose.table` (the columnar step x series table and which rows to replay),
`detect` (the streaming detectors, replayed here as they run live), `findings.pipeline` (merge, fold,
link, advise, rank: shared with `show`), `diagnose.verdicts` (run-level: underfitting, healthy) and,
below, the hangs and crashes in the log's text.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stethoscope.detect.config import DetectConfig
from stethoscope.detect.registry import DetectorSet, merge_findings
from stethoscope.diagnose import verdicts
from stethoscope.diagnose.components import exploded_terms
from stethoscope.diagnose.curves import UNDERFITTING_CURVE, classify_run
from stethoscope.diagnose.degenerate import stuck_evals, zero_terms
from stethoscope.diagnose.generalization import generalization_gap
from stethoscope.diagnose.recovered import learned_on
from stethoscope.diagnose.resumes import at_logged_resumes, logged_resumes, session_starts, weightless_resumes
from stethoscope.detect.sustained import graded_divergences
from stethoscope.diagnose.table import Table
from stethoscope.diagnose.units import unit_changes
from stethoscope.explain import explain_text
from stethoscope.findings.advice import advise, reconcile
from stethoscope.findings.catalogue import HANG, HEALTHY, PLATEAU, UNDERFITTING
from stethoscope.findings.incidents import with_rollbacks
from stethoscope.findings.pipeline import combine, finalise, settle
from stethoscope.importers.base import Columns, ImportedRun, LogLine
from stethoscope.importers.running_means import META_KEY as RUNNING_MEANS
from stethoscope.logtext.table import gc_paused
from stethoscope.records import (
    CUDA_ALLOCATED,
    CUDA_RESERVED,
    EVAL_LOSS,
    GRAD_NORM,
    LOSS,
    LOSS_SCALE,
    LR,
    STEP_TIME,
    Finding,
    Point,
    StepRecord,
    json_safe,
)

_HANG_MIN_S = 1800.0  # silence after the last step that counts as a hang, at least...
_HANG_STEP_FACTOR = 10.0  # ...and this many step times
_NEW_SESSION_S = 6 * 3600.0  # a first line after the last step this late, and this many times the run's own
_NEW_SESSION_FACTOR = 10.0  # length so far, starts a later session appended to the log (not a hang)
_FINDING_KEYS = ("type", "severity", "step", "end_step", "message", "evidence", "causes", "fixes", "symptoms")


@dataclass(slots=True)
class Diagnosis:
    """Everything `stethoscope diagnose` says about one log."""

    path: str
    format: str
    steps: int
    findings: list[Finding] = field(default_factory=list)
    classification: dict[str, Any] = field(default_factory=dict)
    last_step: int | None = None  # `steps` counts the logged steps; a run logging every 10th of 2,000 has 200

    def to_dict(self) -> dict[str, Any]:
        """The `--json` shape: path, format, steps (logged), last_step, label (`verdicts.run_label`), findings
        (type, severity, step, end_step, message, evidence, causes, fixes, symptoms) and classification."""
        findings = []
        for f in self.findings:
            d = f.to_dict()
            findings.append({k: d[k] for k in _FINDING_KEYS})
        return {"path": self.path, "format": self.format, "steps": self.steps, "last_step": self.last_step,
                "label": self.label, "findings": findings, "classification": json_safe(self.classification)}

    @property
    def label(self) -> str:
        """The run in a word or two, agreeing with its verdict (`verdicts.run_label`)."""
        return verdicts.run_label(self.findings, self.classification)


def diagnose_run(imported: ImportedRun, config: DetectConfig | None = None) -> Diagnosis:
    """Diagnose one imported log: findings ranked by severity then step, and the curve's class."""
    with gc_paused():  # millions of live objects make every cyclic-GC pass slow
        return _diagnose(imported, config)


def conclude_run(imported: ImportedRun, recorded: list[Finding], config: DetectConfig | None = None,
                 rollbacks: list[tuple[int | None, dict[str, Any]]] | None = None) -> Diagnosis:
    """`diagnose_run` for a stored run: what its live detectors recorded (`recorded`) combined with a replay of
    its kept metrics (`findings.pipeline.combine`), the incidents that made it roll back marked
    (`rollbacks`: the recovery's records), then the same verdicts, advice and ranking."""
    with gc_paused():
        return _diagnose(imported, config, recorded, rollbacks or [])


def _diagnose(imported: ImportedRun, config: DetectConfig | None, recorded: list[Finding] | None = None,
              rollbacks: list[tuple[int | None, dict[str, Any]]] | None = None) -> Diagnosis:
    table = Table.from_columns(imported.columns)
    cfg = _config(imported.meta, config)
    context = _context(table, imported.meta)
    findings = at_logged_resumes(_replay(table.records(table.replay_rows(cfg)), cfg), imported.lines,
                                 cfg.restart_grace_steps)
    if recorded:
        findings = combine(recorded, findings, cfg.lead_steps)
    if rollbacks:
        findings = with_rollbacks(findings, rollbacks)
    context["since"] = max((f.step for f in findings if f.evidence.get("reset") and f.step is not None), default=None)
    findings += _ga_artifact(table, context) + zero_terms(table) + exploded_terms(table)
    classification = _classification(table, cfg, context)
    findings = learned_on(settle(findings + _log_findings(imported.lines, table)), *table.series(LOSS))
    findings = unit_changes(stuck_evals(findings, table), table.series(LOSS), table.series(EVAL_LOSS),
                            logged_resumes(imported.lines))
    findings = weightless_resumes(findings, table.series(LOSS), _resumes(imported, table),
                                  cfg.restart_grace_steps)
    findings = graded_divergences(findings, table.series(LOSS))
    findings += generalization_gap(findings, table.series(LOSS), table.series(EVAL_LOSS), classification)
    if not context.get("ga_factor"):
        verdict = verdicts.underfitting(findings, *table.series(LOSS), classification)
        findings += verdict or _curve_findings(classification)
    findings = _finalise(findings, context)
    train = classification["train"]
    fine = verdicts.healthy(findings, {"loss": table.series(LOSS), "eval": table.series(EVAL_LOSS),
                                       "grad_norm": table.series(GRAD_NORM)},
                            str(train.get("detail")) if train.get("label") == "too_short" else None)
    last = int(table.steps.max()) if table.steps.size else None
    return Diagnosis(imported.path, imported.format, table.n_steps, findings + ([fine] if fine else []),
                     classification, last)


def diagnose_records(records: Iterable[StepRecord], meta: dict[str, Any] | None = None,
                     config: DetectConfig | None = None) -> list[Finding]:
    """Detector findings for records already grouped by step (e.g. a live run's store), with
    causes and fixes filled in and known non-problems folded away; ranked like `diagnose_run`."""
    recs = list(records)
    points = [Point(name, r.step, v) for r in recs for name, v in r.values.items()]
    table = Table.from_columns(Columns.of(points))
    cfg = _config(meta or {}, config)
    context = _context(table, meta or {})
    return _finalise(_replay(recs, cfg) + _ga_artifact(table, context), context)


# -- replay and knowledge -------------------------------------------------------------------------
def _config(meta: dict[str, Any], config: DetectConfig | None) -> DetectConfig:
    cfg = config or DetectConfig()
    if cfg.vocab_size is None:
        vocab = _meta_int(meta, ("vocab_size", "padded_vocab_size", "n_vocab"))
        if vocab is not None and vocab >= 2:
            cfg = dataclasses.replace(cfg, vocab_size=vocab)
    means = meta.get(RUNNING_MEANS)  # the importer read that the log prints running means (mmengine)
    window = means.get(EVAL_LOSS) if isinstance(means, dict) else None
    if cfg.eval_loss_window is None and isinstance(window, int) and window > 1:
        cfg = dataclasses.replace(cfg, eval_loss_window=window)
    window = means.get(STEP_TIME) if isinstance(means, dict) else None  # mmengine's `time`: the same window
    if cfg.step_time_window is None and isinstance(window, int) and window > 1:
        cfg = dataclasses.replace(cfg, step_time_window=window)
    return cfg


def _meta_int(meta: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((int(v) for k, v in _items(meta) if k in keys and isinstance(v, (int, float))
                 and not isinstance(v, bool)), None)


def _items(meta: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Every (key, value) of the metadata, nested dicts (configs inside configs) included, depth first."""
    stack: list[Any] = [meta]
    while stack:
        d = stack.pop()
        if not isinstance(d, dict):
            continue
        for k, v in d.items():
            yield k, v
            if isinstance(v, dict):
                stack.append(v)


def _context(table: Table, meta: dict[str, Any]) -> dict[str, Any]:
    """What the advice needs to know about the run: precision, device, LR (warm-up end), first steps."""
    precision = "fp16" if table.has(LOSS_SCALE) else _precision(meta)
    lr = table.series(LR) if table.has(LR) else None
    first = table.series(LOSS)[0][:3]
    return {"fp16": precision == "fp16", "precision": precision, "device": _device(table, meta), "meta": meta,
            "lr": lr, "warmup_end": _warmup_end(lr), "first_steps": tuple(int(x) for x in first)}


_PRECISION_KEYS = ("precision", "mixed_precision", "dtype", "torch_dtype", "fp16", "bf16", "amp_dtype")


def _precision(meta: dict[str, Any]) -> str | None:
    """fp16, bf16 or fp32 when the run's metadata/config says so (Lightning `precision`, HF `bf16: true`, …)."""
    for k, v in _items(meta):
        key = str(k).lower()
        if key in ("fp16", "bf16") and v is True:
            return key
        if key in _PRECISION_KEYS and isinstance(v, (str, int)) and not isinstance(v, bool):
            text = str(v).lower()
            if "bf16" in text or "bfloat16" in text:
                return "bf16"
            if text.startswith("16") or "fp16" in text or "float16" in text or text == "half":
                return "fp16"
            if text.startswith("32") or text in ("fp32", "float32", "float"):
                return "fp32"
    return None


def _device(table: Table, meta: dict[str, Any]) -> str | None:
    if table.has(CUDA_ALLOCATED) or table.has(CUDA_RESERVED) or meta.get("cuda_available") is True:
        return "gpu"
    return "cpu" if meta.get("cuda_available") is False else None


def _warmup_end(lr: tuple[np.ndarray, np.ndarray] | None) -> int | None:
    """The step where a rising LR first reaches its peak; None when the log shows no warm-up."""
    if lr is None or lr[1].size < 3:
        return None
    steps, values = lr
    finite = np.where(np.isfinite(values), values, -np.inf)
    peak = float(finite.max())
    if not peak > 0 or not values[0] < 0.5 * peak:
        return None
    return int(steps[int(np.argmax(finite >= 0.99 * peak))])


def _replay(records: Iterable[StepRecord], cfg: DetectConfig) -> list[Finding]:
    ds = DetectorSet(config=cfg)
    found: list[Finding] = []
    for r in records:
        found += ds.update(r)
    found += ds.finish()
    return merge_findings(found)


def _finalise(findings: list[Finding], context: dict[str, Any]) -> list[Finding]:
    ga = bool(context.get("ga_factor"))  # the train loss is inflated x grad-accumulation: no verdict on its level
    done = finalise(findings, advise=lambda f: advise(f, context),
                    keep=lambda f: not (ga and f.type in (UNDERFITTING, PLATEAU)))
    reconcile(done)
    return done


def _ga_artifact(table: Table, context: dict[str, Any]) -> list[Finding]:
    """Known non-problem: the HF Trainer logging train loss x gradient accumulation (transformers#35204)."""
    ts, tv = table.series(LOSS)
    es, evals = table.series(EVAL_LOSS)
    if ts.size < 3 or evals.size < 3:
        return []
    at = np.searchsorted(ts, es[-10:])
    ratios = [float(tv[i]) / float(e) for i, s, e in zip(at.tolist(), es[-10:].tolist(), evals[-10:].tolist())
              if i < ts.size and ts[i] == s and e > 0 and math.isfinite(e) and math.isfinite(tv[i])]
    if len(ratios) < 3:
        return []
    tail = ratios[-3:]
    mid = float(np.median(tail))
    if mid < 3 or max(abs(r / mid - 1) for r in tail) > 0.1:
        return []
    context["ga_factor"] = mid
    msg = (f"the train loss is ~{mid:.3g}x the eval loss on the last evals: the HF Trainer logged it summed over "
           "the gradient-accumulation micro-batches (transformers#35204; the factor is the accumulation steps), "
           "not underfitting and not an explosion")
    return [Finding(HEALTHY, "info", int(es[-1]), msg,
                    evidence={"train_to_eval_ratio": mid, "non_problem": "hf_grad_accum_loss"}, source="engine")]


# -- curves ---------------------------------------------------------------------------------------
def _classification(table: Table, cfg: DetectConfig, context: dict[str, Any]) -> dict[str, Any]:
    ts, tv = table.series(LOSS)
    es, ev = table.series(EVAL_LOSS)
    since = context.get("since")
    if since is not None and np.count_nonzero(ts >= since) >= 20:  # classify the last session of a resumed run
        tv, ts = tv[ts >= since], ts[ts >= since]
        ev, es = ev[es >= since], es[es >= since]
    k = context.get("ga_factor")
    if k:
        tv = tv / k
    return classify_run(ts, tv, es if ev.size else None, ev if ev.size else None, cfg.vocab_size)


def _resumes(imported: ImportedRun, table: Table) -> list[int]:
    """The first steps after the resumes the run shows with its step counter going on: a stored run's last session,
    a resume its log names. (Not a restarted LR schedule: that is a new session on new data as often, whose loss
    jumps back up as expected: a LoRA re-tuned on each new level of a game, one of the real runs.)"""
    steps = table.series(LOSS)[0]
    named = [int(steps[steps > r][0]) for r in logged_resumes(imported.lines) if np.any(steps > r)]
    return session_starts(imported.meta, steps) + named


def _curve_findings(classification: dict[str, Any]) -> list[Finding]:
    """The curve shape no streaming detector reports: still improving at the end (train longer)."""
    c = classification["train"]
    if c["label"] == UNDERFITTING_CURVE:
        return [Finding(UNDERFITTING, "info", None, c["detail"], evidence=c["evidence"], source="curves")]
    return []


# -- hangs and crashes in the text ---------------------------------------------------------------
def _log_findings(lines: list[LogLine], table: Table) -> list[Finding]:
    if not lines or table.steps.size == 0:
        return []
    last_step = int(table.steps.max())
    after = [ln for ln in lines if ln.step is not None and ln.step >= last_step]
    out = _explain(after, last_step)
    if not any(f.type == HANG for f in out):
        began = min((ln.time for ln in lines if ln.time is not None), default=None)
        hang = _silence(after, table, last_step, began, _restarted(lines, table, last_step))
        if hang is not None:
            out.append(hang)
    return out


def _explain(lines: list[LogLine], last_step: int) -> list[Finding]:
    if not lines:
        return []
    found = explain_text("\n".join(ln.text for ln in lines), "log")
    for f in found:
        if f.step is None:
            f.step = last_step
        f.evidence.setdefault("after_step", last_step)
    return found


def _alive(times: list[float], limit: float) -> float:
    """The last time of the lines' unbroken stretch: a hung process goes on printing at its pace (a watchdog, an
    hourly heartbeat, BLOOM's two PULSE lines an hour), while lines that stop for longer than `limit` and ten times
    their usual gap, and start again later, are a new process (a debug log of 245 sessions over 12 days), not the
    same one hanging. The first line may come late: that wait is the hang's own."""
    if not times:
        return -math.inf
    gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)  # lines of one print (the same second) are one
    brk = max(limit, 10.0 * gaps[len(gaps) // 2]) if gaps else math.inf
    end = times[0]
    for t in times[1:]:
        if t - end > brk:
            break
        end = t
    return end


def _restarted(lines: list[LogLine], table: Table, last_step: int) -> float | None:
    """When the step counter went back after the last step (a line after the last step's time counted from a
    lower step): a new process session started then. None when it never did or times are unknown."""
    if table.last_time is None:
        return None
    return min((ln.time for ln in lines if ln.step is not None and ln.step < last_step and ln.time is not None
                and ln.time > table.last_time), default=None)


def _silence(lines: list[LogLine], table: Table, last_step: int, began: float | None = None,
             restart: float | None = None) -> Finding | None:
    """The log's steps stop while timestamped lines go on for a long time: the run hung. A hang is measured
    inside one process session: lines that start again only after a gap of days, far longer than the run
    had lasted (`began` to its last step), belong to a later session appended to the file, not to a hang, and
    so do lines after the step counter restarted (`restart`: the session ended by then)."""
    times = [ln.time for ln in lines if ln.time is not None]
    if len(times) < 2:
        return None
    start = table.last_time if table.last_time is not None else min(times)
    _, st = table.series(STEP_TIME)
    st = st[np.isfinite(st)]
    step_time = float(np.median(st[-20:])) if st.size else None
    limit = max(_HANG_MIN_S, _HANG_STEP_FACTOR * step_time) if step_time else _HANG_MIN_S
    later = sorted(t for t in times if t >= start and (restart is None or t < restart))
    if later and began is not None and later[0] - start > max(_NEW_SESSION_S, _NEW_SESSION_FACTOR * (start - began)):
        return None
    silent = _alive(later, limit) - start
    if silent < limit:
        return None
    ev = {"silent_s": silent, "last_step": last_step, "lines_after": len(lines), "step_time_s": step_time}
    msg = (f"no training step after step {last_step} while the log went on for {silent / 3600:.1f} h: the run hung "
           "(an eval/data-loader deadlock or a stuck collective)")
    return Finding(HANG, "critical", last_step, msg, evidence=ev, source="engine")
