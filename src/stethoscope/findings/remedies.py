"""The field's causes and fixes per finding type, as data: `ADVICE` (generic (cause, fix) pairs),
`CONDITIONAL` (answers to causes the data named, and pairs a context makes likely; those a
detector names from its evidence are in `named_causes.py`), `NON_PROBLEMS` (what
looks wrong but is not), and the context flags a pair may be ruled out by. `findings.advice` applies
them to findings (for the diagnosis and the live alerts alike).
"""

from __future__ import annotations

from dataclasses import dataclass

from stethoscope.findings.catalogue import (
    CLIPPING, CRASH, DIVERGENCE, EVAL_SPARSE, FROZEN_LOSS, GPU_ECC_ERROR, GPU_THROTTLE, GPU_UNDERUSED, GPU_XID,
    GRAD_EXPLOSION, GRAD_SPIKE, GRAD_VANISHING, HANG, LABEL_MASKING, LOSS_SCALE_COLLAPSE, LOSS_SPIKE, LR_SCHEDULE,
    MEMORY_LEAK, MEMORY_PRESSURE, NAN, OVERFITTING, PERIODIC_STALL, PLATEAU, RANK_DIVERGENCE, STRAGGLER,
    THROUGHPUT_DROP, UNDERFITTING, UPDATE_RATIO,
)
from stethoscope.findings.named_causes import NAN_GREW, NAN_LR_ROSE, NAN_SUDDEN, STUCK_IN

# Flags a context sets (per finding) and a remedy may be ruled out by.
FP16, NOT_FP16, CPU, AFTER_WARMUP, IN_WARMUP = "fp16", "not_fp16", "cpu", "after_warmup", "in_warmup"
LR_TINY, AT_RESTART, FIRST_UPDATE, LR_HELD = "lr_tiny", "at_restart", "first_update", "lr_held"
FRESH_START = "fresh_start"  # a jump in the first updates with no sign that trained weights were loaded
PERF_RECORDED, PERF_UNRECORDED = "perf_recorded", "perf_unrecorded"  # a stall beside perf/gc_pause_s, data_wait_s
LR_JUMPED = "lr_jumped"  # the log names the cause: an LR jump just before (no guessing at fp16)
NOT_LEARNING = "not_learning"  # the underfitting verdict: the loss never came down (so it was not still falling)
# Stances two findings of one report must not take both.
KEEP_SCHEDULE, CHANGE_SCHEDULE = "schedule:keep", "schedule:change"


@dataclass(frozen=True, slots=True)
class Remedy:
    """One probable cause and the fix that answers it; `unless` names the context flags that rule it out."""

    cause: str
    fix: str
    unless: frozenset[str] = frozenset()
    stance: str = ""


def _r(cause: str, fix: str, *unless: str, stance: str = "") -> Remedy:
    return Remedy(cause, fix, frozenset(unless), stance)


@dataclass(frozen=True, slots=True)
class Advice:
    """Generic (cause, fix) pairs of one finding type, most likely first."""

    remedies: tuple[Remedy, ...]

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(r.cause for r in self.remedies)

    @property
    def fixes(self) -> tuple[str, ...]:
        return tuple(r.fix for r in self.remedies)


@dataclass(frozen=True, slots=True)
class Conditional:
    """A remedy for a cause the data named (`when` is in one of the finding's causes or its message), or,
    with `when="context:FLAG"`, a pair the context makes likely. `first`: listed before the data's causes."""

    type: str
    when: str
    remedy: Remedy
    first: bool = False


@dataclass(frozen=True, slots=True)
class NonProblem:
    """Something that looks like a problem in a log but is not one."""

    id: str
    looks_like: str
    why: str


_LR_HIGH = "LR too high"
ADVICE: dict[str, Advice] = {
    NAN: Advice((
        _r("LR too high: the update overshoots until activations overflow",
           "roll back to the last good checkpoint (before the first NaN) and resume with a lower LR", LR_TINY,
           LR_HELD),
        _r("fp16 overflow (the range ends at 65504); bf16 has fp32's range",
           "train in bf16 instead of fp16 where the GPU supports it (A100/H100); otherwise keep a dynamic loss scaler",
           NOT_FP16, CPU),
        _r("a bad batch (empty sequence, all labels masked -> 0/0, corrupt tokens)",
           "check the batch at the first NaN step: no empty sequences, at least one unmasked label"),
        _r("log/sqrt/division of zero in a custom loss or layer",
           "torch.autograd.set_detect_anomaly(True) for a few steps to find the first NaN-producing op"),
        _r("no or too short LR warm-up", "add or lengthen warm-up and clip gradients (max_norm=1.0)", AFTER_WARMUP,
           LR_HELD),
    )),
    LOSS_SPIKE: Advice((
        _r("a bad or unusual batch (duplicated, corrupt or out-of-distribution data)",
           "if it recovered within tens of steps it was a hiccup; if it repeats, restart ~100 steps before it and "
           "skip the batches around it (PaLM)"),
        _r("LR too high for this stage (often right after warm-up)",
           "if spikes repeat: lower the peak LR; clip gradients at 1.0", LR_TINY, stance=CHANGE_SCHEDULE),
        _r("Adam's second-moment estimate lagging a sudden gradient change (epsilon too small, beta2 too high)",
           "lower Adam beta2 (0.95) or raise epsilon; keep z-loss / QK-layernorm for large models"),
        _r("fp16 overflow or loss-scale trouble", "train in bf16, or check the loss scale around the spike",
           NOT_FP16, CPU, FIRST_UPDATE),  # a collapse takes many overflowing steps; one update cannot
    )),
    GRAD_SPIKE: Advice((
        _r("an unusual batch (long sequence, rare tokens)",
           "nothing if it recovered at once and the loss did not move (a harmless blip)"),
        _r("a transient optimizer instability",
           "clip gradients (max_norm=1.0) so single blips cannot move the weights much"),
    )),
    GRAD_EXPLOSION: Advice((
        _r("LR too high", "roll back before the explosion and lower the LR; clip gradients at 1.0",
           LR_TINY, stance=CHANGE_SCHEDULE),
        _r("warm-up too short for the peak LR", "roll back and lengthen warm-up", AFTER_WARMUP, LR_TINY,
           stance=CHANGE_SCHEDULE),
        _r("fp16 overflow feeding the loss scaler", "use bf16 (no loss scaling)", NOT_FP16, CPU),
        _r("a bad batch pushing the model into an unstable region",
           "skip the data around the explosion (PaLM: 200-500 batches)"),
        _r("attention logit growth in large transformers (no QK-norm / z-loss)",
           "add QK-layernorm or z-loss; lower Adam beta2 to 0.95 to react faster"),
    )),
    GRAD_VANISHING: Advice((
        _r("frozen parameters (requires_grad=False, a LoRA config that targets no module)",
           "count trainable parameters: sum(p.numel() for p in model.parameters() if p.requires_grad)"),
        _r("the optimizer was given no trainable parameters",
           "check that the optimizer's param groups hold the trainable parameters"),
        _r("dead ReLUs or saturated activations", "check activation statistics; lower the LR or use GELU/SiLU"),
        _r("LR at 0 or the loss detached from the graph",
           "check that loss.backward() reaches the weights (no .detach()/torch.no_grad() in forward)"),
    )),
    DIVERGENCE: Advice((
        _r("LR too high for this model/batch size",
           "roll back to a checkpoint before the divergence and lower the LR (halve it); clip gradients at 1.0",
           LR_TINY, stance=CHANGE_SCHEDULE),
        _r("no or too short warm-up", "roll back and lengthen warm-up", AFTER_WARMUP, LR_TINY, stance=CHANGE_SCHEDULE),
        _r("fp16 range trouble (loss scale collapsing)", "train in bf16", NOT_FP16, CPU, FIRST_UPDATE, LR_JUMPED),
        _r("a stretch of bad data", "roll back and skip the batches around the start of the divergence"),
        _r("a bug after a resume (optimizer state lost, wrong LR or scheduler state)",
           "on resume, restore the optimizer and scheduler state with the weights"),
    )),
    LOSS_SCALE_COLLAPSE: Advice((
        _r("fp16 gradients overflow on every step: activations or grads beyond 65504",
           "switch to bf16 (no loss scaling needed) where the hardware supports it"),
        _r("LR too high, driving the overflows",
           "restart from a checkpoint whose loss scale was still healthy and lower the LR (OPT-175B)", LR_TINY),
        _r("a diverging model", "set a minimum loss scale and clip gradients"),
    )),
    CLIPPING: Advice((
        _r("LR too high: the raw gradient norm keeps exceeding the clip threshold",
           "lower the LR until clipping engages only on occasional steps", LR_TINY),
        _r("the clip threshold is too low for this model", "raise max_grad_norm if it is far below the typical norm"),
    )),
    UPDATE_RATIO: Advice((
        _r("LR too high: each step changes the weights by ~1e-1 of their size (healthy ~1e-3)",
           "lower the LR by 10x and watch the ratio settle near 1e-3", LR_TINY),
        _r("warm-up too short for this LR", "lengthen warm-up", AFTER_WARMUP),
    )),
    OVERFITTING: Advice((
        _r("too many epochs over a small dataset",
           "keep the checkpoint of the best eval step (named in the finding); stop there (early stopping)"),
        _r("model too large for the data", "more or more varied data; fewer epochs"),
        _r("too little regularisation", "more dropout / weight decay; for LoRA a lower rank"),
    )),
    EVAL_SPARSE: Advice((
        _r("evaluation interval too long for the run length",
           "evaluate at least ~10 times per run (eval_steps <= max_steps / 10)"),
    )),
    UNDERFITTING: Advice((
        _r("the run is too short: the loss was still falling at the end", "train longer (more steps or epochs)",
           NOT_LEARNING),
        _r("LR too low", "raise the LR (try 3x) or use a schedule with a higher peak", stance=CHANGE_SCHEDULE),
        _r("model too small", "a bigger model or fewer regularisers"),
    )),
    PLATEAU: Advice((
        _r("LR too low (or 0)", "check the LR that the optimizer actually uses"),
        _r("labels masked wrongly: the loss only covers padding or the prompt",
           "print one batch: decoded inputs and the unmasked labels"),
        _r("frozen weights / no trainable parameters", "count trainable parameters"),
        _r("data/label mismatch (shuffled labels, wrong tokenizer)",
           "overfit a single batch first: if that fails, the pipeline is broken"),
    )),
    FROZEN_LOSS: Advice((
        _r("the weights are not updated (LR 0, optimizer without parameters, frozen model)",
           "check optimizer.param_groups and the LR"),
        _r("the same batch/loss value is logged every time (a logging bug)",
           "check that the logged value is recomputed each step"),
        _r("the model outputs a constant (e.g. uniform logits: the loss equals ln(vocab))",
           "overfit one batch: the loss must go down"),
    )),
    LABEL_MASKING: Advice((
        _r("every label is -100 (masked): the chat template / response template did not match",
           "decode one batch and print which tokens carry labels"),
        _r("sequences truncated before the response starts", "fix the response template or raise max_seq_length"),
    )),
    THROUGHPUT_DROP: Advice((
        _r("another process on the machine competing for CPU or I/O",
           "check what else runs there (top, iostat); pin the job to free cores"),
        _r("a data-loader or storage slowdown", "check data-loader wait time and storage throughput"),
        _r("a slow or faulty GPU (thermal throttling, ECC retries) slowing every rank",
           "find the slow rank (per-rank step times, nvidia-smi -q -d PERFORMANCE) and exclude the node (BLOOM)", CPU),
        _r("memory fragmentation", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", CPU),
    )),
    PERIODIC_STALL: Advice((  # GC is named only where perf/gc_pause_s shows it (the conditional below)
        _r("work the loop does every few steps: an eval, a checkpoint save, a garbage collection, a log flush",
           "line the slow steps up with your eval/checkpoint/log intervals; record perf/gc_pause_s and "
           "perf/data_wait_s (the Monitor does) so the next report can name the cause", PERF_RECORDED),
        _r("work the loop does every few steps: an eval, a checkpoint save, a garbage collection, a log flush",
           "line the slow steps up with your eval/checkpoint/log intervals", PERF_UNRECORDED),
        _r("periodic evals or checkpoint saves", "make checkpointing asynchronous; evaluate less often"),
        _r("logging or metric flushes that sync the GPU", "log less often; keep metrics on the device until a flush",
           CPU),
    )),
    MEMORY_LEAK: Advice((
        _r("tensors kept across steps (losses appended to a list without .item()/.detach())",
           "store loss.item() rather than loss; detach what you keep"),
        _r("a growing cache (KV cache, metrics history)", "bound the cache; clear it between evals"),
        _r("the CUDA caching allocator fragmenting", "torch.cuda.memory_snapshot() to find the growth", CPU),
    )),
    MEMORY_PRESSURE: Advice((
        _r("batch or sequence length near the device limit", "activation checkpointing or a smaller micro-batch"),
        _r("fragmentation (reserved >> allocated)", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", CPU),
    )),
    LR_SCHEDULE: Advice((
        _r("a schedule milestone (warm-up end, decay start) or a deliberate reset on resume",
           "nothing if the schedule is the one you configured", stance=KEEP_SCHEDULE),
    )),
    HANG: Advice((
        _r("a collective waiting for a rank that died or is stuck (NCCL timeout)",
           "dump every rank's stacks (py-spy dump) to find the rank that is not in the collective; set NCCL/"
           "torch.distributed timeouts so hangs fail fast", CPU),
        _r("a DataLoader deadlock", "py-spy dump the main process and its workers; try num_workers=0 to confirm"),
        _r("a storage stall during checkpoint/eval", "check the file system; restart from the last checkpoint"),
    )),
    STRAGGLER: Advice((
        _r("a slower device, host or network link on that rank (thermal throttling, a shared node, a bad NIC)",
           "check that rank's hardware (nvidia-smi -q, dmesg); exclude its node if it stays slow", CPU),
        _r("a slower or busier host on that rank (a shared node, CPU frequency scaling, a bad NIC)",
           "check what else runs on that rank's host (top, dmesg); exclude the node if it stays slow"),
        _r("unsynchronized garbage collection or data loading that is heavier on that rank",
           "collect garbage at the same step on every rank (stethoscope.probe.SyncedGC); give it more loader workers"),
    )),
    RANK_DIVERGENCE: Advice((
        _r("ranks running different steps (a rank skipped or repeated batches, or one is stuck)",
           "check the data sharding and the skip logic; `stethoscope probe --all RUN backtrace` to see each rank"),
        _r("one rank holding more memory (rank-0-only work: logging, eval, checkpoint gathering)",
           "move rank-0-only work off the training step, or free what it keeps"),
    )),
    GPU_THROTTLE: Advice((
        _r("the GPU runs hot (cooling, airflow, a failing fan) and the driver lowers its clocks",
           "check the node's cooling (nvidia-smi -q -d TEMPERATURE,PERFORMANCE); move the job off the node"),
        _r("the board sits at its power cap", "nothing at full load; raise a cap set below the board's default"),
    )),
    GPU_ECC_ERROR: Advice((
        _r("a failing GPU memory cell", "drain the node; resume from the last verified checkpoint elsewhere"),
    )),
    GPU_XID: Advice((
        _r("a GPU hardware, driver or kernel fault the driver logged", "dmesg | grep -i xid; drain the node for "
           "hardware XIDs (48, 63, 64, 74, 79, 94, 95), debug the kernel for 13/31/43"),
    )),
    GPU_UNDERUSED: Advice((
        _r("the input pipeline cannot keep the GPU fed", "more DataLoader workers, pin_memory, prefetching"),
        _r("Python overhead and small kernels between launches", "a bigger micro-batch, torch.compile, CUDA graphs"),
    )),
    CRASH: Advice((
        _r("see the error: out-of-memory, a hardware fault, a collective timeout, or a bug",
           "restart from the last verified checkpoint; exclude a machine that shows hardware errors"),
    )),
}

_WEIGHTS = _r("the first optimizer update wrecked already-trained weights: a checkpoint loaded or converted wrong "
              "(mismatched layer names or shapes, wrong dtype, tied embeddings not tied, optimizer state of "
              "other weights)",
              "evaluate the loaded model before any update (its loss must match the first logged one), then check "
              "the conversion: dtypes, tied weights, the optimizer state you load (try without it)")

_FRESH = _r("the first updates of a freshly initialised model: the LR at full height from step 0 (no warm-up) "
            "while the first gradients are the largest", "warm the LR up over the first steps (1-5% of the run) "
            "or lower it; a jump that comes back within a few steps is harmless", LR_TINY, IN_WARMUP,
            stance=CHANGE_SCHEDULE)

HANG_WHERE: dict[str, Remedy] = {where: _r(cause, fix) for where, (cause, fix) in STUCK_IN.items()}

CONDITIONAL: tuple[Conditional, ...] = (
    Conditional(DIVERGENCE, f"context:{FIRST_UPDATE}", _WEIGHTS, first=True),
    Conditional(LOSS_SPIKE, f"context:{FIRST_UPDATE}", _WEIGHTS, first=True),
    Conditional(DIVERGENCE, f"context:{FRESH_START}", _FRESH, first=True),
    Conditional(LOSS_SPIKE, f"context:{FRESH_START}", _FRESH, first=True),
    Conditional(LOSS_SPIKE, "grad norm rose", _r("", "the grad norm led the loss: clip gradients and lower the LR; "
                                                       "watch grad norm live to roll back early", LR_TINY)),
    Conditional(LOSS_SPIKE, "single bad batch",
                _r("", "look up the batch ids of that step in the data loader and inspect or drop them")),
    Conditional(LOSS_SPIKE, "bad batch at step",
                _r("", "log the grad norm to tell a bad batch from an instability; inspect that step's batch")),
    Conditional(LOSS_SPIKE, "warm-up and rising",
                _r("", "lengthen warm-up (e.g. 2-5% of the steps) or lower the peak LR", LR_TINY,
                   stance=CHANGE_SCHEDULE)),
    Conditional(DIVERGENCE, "warm-up and rising",
                _r("", "lengthen warm-up (e.g. 2-5% of the steps) or lower the peak LR", LR_TINY,
                   stance=CHANGE_SCHEDULE)),
    Conditional(LOSS_SPIKE, "after LR warm-up ended",
                _r("", "lower the peak LR (or reach it more slowly)", LR_TINY, stance=CHANGE_SCHEDULE)),
    Conditional(LOSS_SPIKE, "resume or schedule restart",
                _r("", "nothing: a loss jump after a resume on new data or a fresh schedule is expected",
                   stance=KEEP_SCHEDULE)),
    Conditional(GRAD_SPIKE, "resume or schedule restart",
                _r("", "nothing: a grad-norm jump after a resume on new data or a fresh schedule is expected",
                   stance=KEEP_SCHEDULE)),
    Conditional(GRAD_EXPLOSION, "resume or schedule restart",
                _r("", "nothing while the loss comes back: a jump right after a resume or a fresh schedule is "
                       "expected; if it does not, resume with the previous LR schedule", stance=KEEP_SCHEDULE)),
    Conditional(DIVERGENCE, "resume or schedule restart",
                _r("", "check the resumed state: the optimizer and scheduler state must be restored with the "
                       "weights")),
    Conditional(NAN, "context:fp16", _r("this run uses fp16 loss scaling: overflows are the usual source",
                                          "bf16 avoids the overflow entirely (A100/H100)", CPU)),
    Conditional(NAN, NAN_SUDDEN, _r("", "find what went non-finite first: Monitor(debug_nonfinite=True) reruns "
                                          "the step's batch through stethoscope.debug.locate_nonfinite (it names the "
                                          "first non-finite module); check weights and optimizer state with "
                                          "torch.isfinite; then roll back to the last good checkpoint")),
    Conditional(NAN, NAN_LR_ROSE, _r("", "roll back to the last good checkpoint (before the first NaN) and resume "
                                           "with a lower peak LR or a longer warm-up", LR_TINY,
                                       stance=CHANGE_SCHEDULE)),
    Conditional(NAN, NAN_GREW, _r("", "roll back to before the first NaN, clip gradients (max_norm=1.0) and lower "
                                        "the LR", LR_TINY)),
    *(Conditional(HANG, r.cause, _r("", r.fix)) for r in HANG_WHERE.values()),
    Conditional(GRAD_EXPLOSION, "context:fp16", _r("the run uses fp16 loss scaling: overflows feed the explosion",
                                                     "prefer bf16", CPU)),
    Conditional(NAN, "loss scaler", _r("fp16 overflow steps skipped by the loss scaler (harmless when rare)",
                                         "nothing if rare and the loss stays finite; many in a row mean the scale "
                                         "is collapsing", NOT_FP16)),
    Conditional(LOSS_SPIKE, "LR jumped", _r("", "undo the LR change (check the resumed config / scheduler "
                                                  "override)", stance=CHANGE_SCHEDULE)),
    Conditional(DIVERGENCE, "LR jumped", _r("", "undo the LR change (check the resumed config / scheduler "
                                                  "override)", stance=CHANGE_SCHEDULE)),
    Conditional(GRAD_EXPLOSION, "LR jumped", _r("", "undo the LR change (check the resumed config / scheduler "
                                                      "override)", stance=CHANGE_SCHEDULE)),
    Conditional(PLATEAU, "LR went to 0", _r("", "print optimizer.param_groups[0]['lr'] at a few steps; check the "
                                                  "scheduler's total steps and what a resume restored")),
    Conditional(LR_SCHEDULE, "exactly 0",
                _r("the LR is 0: a scheduler stepped past its end, warm-up from 0 never started, or lr=0 in the config",
                   "print optimizer.param_groups[0]['lr'] at a few steps; check the scheduler's total steps")),
    Conditional(LR_SCHEDULE, "jumped",
                _r("a resume that overrides the LR scheduler (Megatron --override-lr-scheduler) or a changed config",
                   "if unintended: resume with the saved scheduler state (drop the override)",
                   stance=CHANGE_SCHEDULE)),
    Conditional(PLATEAU, "uniform", _r("the model predicts uniformly: its outputs ignore the input",
                                         "check that the inputs reach the model (masking, embeddings) and the LR")),
    Conditional(FROZEN_LOSS, "uniform", _r("uniform predictions: the output layer is not learning (zeroed or "
                                             "frozen head)", "check the output layer's requires_grad and init")),
    Conditional(PERIODIC_STALL, "right after an eval", _r("", "evaluate less often, or asynchronously")),
    Conditional(PERIODIC_STALL, "garbage-collection",
                _r("", "gc.freeze() after setup and gc.disable() with a manual gc.collect() every N steps (nanochat)")),
    Conditional(PERIODIC_STALL, "waiting for data",
                _r("", "more DataLoader workers, pin_memory=True, prefetch; check storage throughput")),
)

NON_PROBLEMS: tuple[NonProblem, ...] = (
    NonProblem("resume_reset", "a loss spike / divergence right after a resume",
               "a deliberate LR or data reset on resume makes the loss jump and recover; expected"),
    NonProblem("hf_grad_accum_loss", "train loss many times the eval loss (underfitting, explosion)",
               "the HF Trainer logged the loss summed over gradient-accumulation micro-batches "
               "(transformers#35204, fixed by PR #35207): the train loss is inflated x grad_accum"),
    NonProblem("step_avg_nan", "a NaN in the first steps of a speedrun log",
               "`step_avg:nanms` is a timing average divided by zero before timing starts, not a NaN loss"),
    NonProblem("grad_blips", "grad-norm spikes", "one-step grad-norm blips that recover at once and leave the loss alone"),
    NonProblem("megatron_zero_grad_norm", "grad norm 0.000 on every line",
               "old Megatron-DeepSpeed printed 0.000 under pipeline parallelism; not a real zero"),
)
