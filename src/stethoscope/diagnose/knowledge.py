"""What the field knows about each finding: probable causes (most likely first) and fixes, as data.

`ADVICE` holds the generic causes and fixes per finding type; `CONDITIONAL` adds fixes that only
apply when the data named a specific cause (a grad-norm lead, a bad batch, warm-up, fp16); and
`NON_PROBLEMS` lists what looks wrong but is not (a deliberate LR/data reset on resume, the HF
Trainer's x grad-accumulation train loss, `step_avg:nanms`, one-step grad-norm blips). `advise`
applies the knowledge to a finding: data-specific causes stay first, generic ones follow.
Sources: BLOOM-176B / OPT-175B / PaLM chronicles and papers, OLMo's stability monitor, HF and
PyTorch issue threads, Karpathy's "recipe for training neural networks".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stethoscope.records import Finding


@dataclass(frozen=True, slots=True)
class Advice:
    """Generic probable causes (ranked) and fixes of one finding type."""

    causes: tuple[str, ...]
    fixes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conditional:
    """Fixes that apply when a data-specific cause containing `when` was named (or a context flag is set)."""

    type: str
    when: str
    fixes: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NonProblem:
    """Something that looks like a problem in a log but is not one."""

    id: str
    looks_like: str
    why: str


ADVICE: dict[str, Advice] = {
    "nan": Advice(
        causes=("LR too high: the update overshoots until activations overflow",
                "fp16 overflow (the range ends at 65504); bf16 has fp32's range",
                "a bad batch (empty sequence, all labels masked -> 0/0, corrupt tokens)",
                "log/sqrt/division of zero in a custom loss or layer",
                "no or too short LR warm-up"),
        fixes=("roll back to the last good checkpoint (before the first NaN) and resume with a lower LR",
               "train in bf16 instead of fp16 where the GPU supports it (A100/H100); otherwise keep a dynamic loss scaler",
               "clip gradients (max_norm=1.0) and add or lengthen warm-up",
               "check the batch at the first NaN step: no empty sequences, at least one unmasked label",
               "torch.autograd.set_detect_anomaly(True) for a few steps to find the first NaN-producing op"),
    ),
    "loss_spike": Advice(
        causes=("a bad or unusual batch (duplicated, corrupt or out-of-distribution data)",
                "LR too high for this stage (often right after warm-up)",
                "Adam's second-moment estimate lagging a sudden gradient change (epsilon too small, beta2 too high)",
                "fp16 overflow or loss-scale trouble"),
        fixes=("if it recovered within tens of steps it was a hiccup: no action needed",
               "if spikes repeat: lower the peak LR or lengthen warm-up; clip gradients at 1.0",
               "restart from a checkpoint ~100 steps before the spike and skip the batches around it (PaLM)",
               "lower Adam beta2 (0.95) or raise epsilon; keep z-loss / QK-layernorm for large models"),
    ),
    "grad_spike": Advice(
        causes=("an unusual batch (long sequence, rare tokens)", "a transient optimizer instability"),
        fixes=("nothing if it recovered at once and the loss did not move (a harmless blip)",
               "clip gradients (max_norm=1.0) so single blips cannot move the weights much"),
    ),
    "grad_explosion": Advice(
        causes=("LR too high (or warm-up too short)", "fp16 overflow feeding the loss scaler",
                "a bad batch pushing the model into an unstable region",
                "attention logit growth in large transformers (no QK-norm / z-loss)"),
        fixes=("roll back before the explosion and lower the LR; clip gradients at 1.0",
               "skip the data around the explosion (PaLM: 200-500 batches)",
               "use bf16; add QK-layernorm or z-loss for large models",
               "lower Adam beta2 to 0.95 to react faster"),
    ),
    "grad_vanishing": Advice(
        causes=("frozen parameters (requires_grad=False, a LoRA config that targets no module)",
                "the optimizer was given no trainable parameters",
                "dead ReLUs or saturated activations", "LR at 0 or the loss detached from the graph"),
        fixes=("count trainable parameters: sum(p.numel() for p in model.parameters() if p.requires_grad)",
               "check that the optimizer's param groups hold the trainable parameters",
               "check that loss.backward() reaches the weights (no .detach()/torch.no_grad() in forward)"),
    ),
    "divergence": Advice(
        causes=("LR too high for this model/batch size", "no or too short warm-up",
                "fp16 range trouble (loss scale collapsing)", "a stretch of bad data",
                "a bug after a resume (optimizer state lost, wrong LR or scheduler state)"),
        fixes=("roll back to a checkpoint before the start of the divergence",
               "lower the LR (halve it) and/or lengthen warm-up; clip gradients at 1.0",
               "train in bf16; restore the optimizer state on resume",
               "skip the batches around the start of the divergence"),
    ),
    "loss_scale_collapse": Advice(
        causes=("fp16 gradients overflow on every step: activations or grads beyond 65504",
                "LR too high, driving the overflows", "a diverging model"),
        fixes=("switch to bf16 (no loss scaling needed) if the GPU supports it",
               "restart from a checkpoint whose loss scale was still healthy and lower the LR (OPT-175B)",
               "set a minimum loss scale and clip gradients"),
    ),
    "clipping": Advice(
        causes=("LR too high: the raw gradient norm keeps exceeding the clip threshold",
                "the clip threshold is too low for this model"),
        fixes=("lower the LR until clipping engages only on occasional steps", "raise max_grad_norm if it is far below the typical norm"),
    ),
    "update_ratio": Advice(
        causes=("LR too high: each step changes the weights by ~1e-1 of their size (healthy ~1e-3)",),
        fixes=("lower the LR by 10x and watch the ratio settle near 1e-3", "lengthen warm-up"),
    ),
    "overfitting": Advice(
        causes=("too many epochs over a small dataset", "model too large for the data", "too little regularisation"),
        fixes=("keep the checkpoint of the best eval step (named in the finding); stop there (early stopping)",
               "more or more varied data; fewer epochs", "more dropout / weight decay; for LoRA a lower rank"),
    ),
    "eval_sparse": Advice(
        causes=("evaluation interval too long for the run length",),
        fixes=("evaluate at least ~10 times per run (eval_steps <= max_steps / 10)",),
    ),
    "underfitting": Advice(
        causes=("the run is too short: the loss was still falling at the end", "LR too low", "model too small"),
        fixes=("train longer (more steps or epochs)", "raise the LR (try 3x) or use a schedule with a higher peak",
               "a bigger model or fewer regularisers"),
    ),
    "plateau": Advice(
        causes=("LR too low (or 0)", "labels masked wrongly: the loss only covers padding or the prompt",
                "frozen weights / no trainable parameters", "data/label mismatch (shuffled labels, wrong tokenizer)"),
        fixes=("check the LR that the optimizer actually uses", "print one batch: decoded inputs and the unmasked labels",
               "count trainable parameters", "overfit a single batch first: if that fails, the pipeline is broken"),
    ),
    "frozen_loss": Advice(
        causes=("the weights are not updated (LR 0, optimizer without parameters, frozen model)",
                "the same batch/loss value is logged every time (a logging bug)",
                "the model outputs a constant (e.g. uniform logits: the loss equals ln(vocab))"),
        fixes=("check optimizer.param_groups and the LR", "check that the logged value is recomputed each step",
               "overfit one batch: the loss must go down"),
    ),
    "label_masking": Advice(
        causes=("every label is -100 (masked): the chat template / response template did not match",
                "sequences truncated before the response starts"),
        fixes=("decode one batch and print which tokens carry labels", "fix the response template or raise max_seq_length"),
    ),
    "throughput_drop": Advice(
        causes=("a slow or faulty GPU (thermal throttling, ECC retries) slowing every rank", "another job on the node",
                "a data-loader or storage slowdown", "memory fragmentation"),
        fixes=("find the slow rank (per-rank step times, nvidia-smi -q -d PERFORMANCE) and exclude the node (BLOOM)",
               "check data-loader wait time and storage throughput"),
    ),
    "periodic_stall": Advice(
        causes=("Python garbage-collection pauses (gen2) on every rank", "periodic evals or checkpoint saves",
                "logging or metric flushes that sync the GPU"),
        fixes=("gc.freeze() after setup and gc.disable() with a manual gc.collect() every N steps (nanochat)",
               "make checkpointing asynchronous; evaluate less often"),
    ),
    "memory_leak": Advice(
        causes=("tensors kept across steps (losses appended to a list without .item()/.detach())",
                "a growing cache (KV cache, metrics history)", "the CUDA caching allocator fragmenting"),
        fixes=("store loss.item() rather than loss; detach what you keep", "torch.cuda.memory_snapshot() to find the growth"),
    ),
    "memory_pressure": Advice(
        causes=("batch or sequence length near the device limit", "fragmentation (reserved >> allocated)"),
        fixes=("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "activation checkpointing or a smaller micro-batch"),
    ),
    "lr_schedule": Advice(
        causes=("a schedule milestone (warm-up end, decay start) or a deliberate reset on resume",),
        fixes=("nothing if the schedule is the one you configured",),
    ),
    "hang": Advice(
        causes=("a collective waiting for a rank that died or is stuck (NCCL timeout)", "a DataLoader deadlock",
                "a storage stall during checkpoint/eval"),
        fixes=("dump every rank's stacks (py-spy dump) to find the rank that is not in the collective",
               "set NCCL/torch.distributed timeouts so hangs fail fast; restart from the last checkpoint"),
    ),
    "crash": Advice(
        causes=("see the error: hardware (ECC/Xid), out-of-memory, NCCL, or a bug",),
        fixes=("restart from the last verified checkpoint; exclude a node that shows hardware errors",),
    ),
}

CONDITIONAL: tuple[Conditional, ...] = (
    Conditional("loss_spike", "grad norm rose",
                fixes=("the grad norm led the loss: clip gradients and lower the LR; watch grad norm live to roll back early",)),
    Conditional("loss_spike", "single bad batch",
                fixes=("look up the batch ids of that step in the data loader and inspect or drop them",)),
    Conditional("loss_spike", "warm-up",
                fixes=("lengthen warm-up (e.g. 2-5% of the steps) or lower the peak LR",)),
    Conditional("loss_spike", "resume or schedule restart",
                fixes=("nothing: a loss jump after a resume on new data or a fresh schedule is expected",)),
    Conditional("nan", "context:fp16", fixes=("this run uses fp16 loss scaling: bf16 avoids the overflow entirely",)),
    Conditional("grad_explosion", "context:fp16",
                fixes=("the run uses fp16 loss scaling: overflows feed the explosion; prefer bf16",)),
    Conditional("nan", "loss scaler", causes=("fp16 overflow steps skipped by the loss scaler (harmless when rare)",),
                fixes=("nothing if rare and the loss stays finite; many in a row mean the scale is collapsing",)),
    Conditional("loss_spike", "LR jumped", fixes=("undo the LR change (check the resumed config / scheduler override)",)),
    Conditional("divergence", "LR jumped", fixes=("undo the LR change (check the resumed config / scheduler override)",)),
    Conditional("lr_schedule", "exactly 0",
                causes=("the LR is 0: a scheduler stepped past its end, warm-up from 0 never started, or lr=0 in "
                        "the config",),
                fixes=("print optimizer.param_groups[0]['lr'] at a few steps; check the scheduler's total steps",)),
    Conditional("lr_schedule", "jumped",
                causes=("a resume that overrides the LR scheduler (Megatron --override-lr-scheduler) or a changed "
                        "config",)),
    Conditional("plateau", "uniform", causes=("the model predicts uniformly: its outputs ignore the input",)),
    Conditional("frozen_loss", "uniform", causes=("uniform predictions: the output layer is not learning (zeroed or frozen head)",)),
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


def advise(finding: Finding, context: dict[str, Any] | None = None) -> Finding:
    """Fill `finding.causes` (data-specific first, then generic) and `finding.fixes`, in place."""
    ctx = context or {}
    advice = ADVICE.get(finding.type)
    named = " ".join(finding.causes + [finding.message])
    causes = list(finding.causes)
    fixes = list(finding.fixes)
    for cond in CONDITIONAL:
        if cond.type == finding.type and _applies(cond.when, named, ctx):
            causes.extend(cond.causes)
            fixes.extend(cond.fixes)
    if advice is not None:
        causes.extend(advice.causes)
        fixes.extend(advice.fixes)
    finding.causes = _unique(causes)
    finding.fixes = _unique(fixes)
    return finding


def _applies(when: str, named: str, ctx: dict[str, Any]) -> bool:
    if when.startswith("context:"):
        return bool(ctx.get(when.removeprefix("context:")))
    return when in named


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out
