"""Training memory per GPU: weights, gradients, master weights, optimizer states, LoRA/QLoRA adapters,
activations (with and without gradient checkpointing) and the loss's logits, under ZeRO/FSDP
sharding; which GPUs it fits; and the changes that would make it fit, ranked by bytes saved.

Activations follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models" (arXiv:2205.05198, §4.1): one GPT layer with 16-bit activations and dropout keeps
s·b·h·(34 + 5·a·s/h) bytes for backward (s sequence, b micro-batch, h hidden, a heads). We count the
same terms tensor by tensor, so the formula also covers grouped-query attention, gated (SwiGLU) MLPs
of any width, no dropout, fp32 activations and fused (flash) attention, which keeps no s×s scores;
with a GPT-2 shape, 16-bit, dropout and eager attention it is exactly the paper's. Full activation
checkpointing keeps each layer's input (2·s·b·h per layer, the paper's §4.2) plus one layer's
activations while that layer is recomputed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from stethoscope.errors import UsageError
from stethoscope.debug.estimate.gpus import GPUS, Gpu
from stethoscope.debug.estimate.shape import ModelShape

# precision: (weight, gradient, fp32 master, optimizer-state, activation) bytes per element
PRECISIONS: dict[str, tuple[int, int, int, int, int]] = {
    "fp32": (4, 4, 0, 4, 4),
    "amp": (4, 4, 0, 4, 2),          # torch.autocast over fp32 parameters (HF Trainer bf16=True on an fp32 model)
    "bf16-mixed": (2, 2, 4, 4, 2),   # 16-bit weights and grads, fp32 master + states (DeepSpeed, Megatron, FSDP)
    "fp16-mixed": (2, 2, 4, 4, 2),
    "bf16": (2, 2, 0, 2, 2),         # everything bf16, optimizer states too (a bf16 model with plain AdamW)
}
# optimizer: states per trainable parameter, in units of the state dtype; 8-bit ones in bytes (with the
# blockwise absmax of bitsandbytes, one fp32 per 2048 values per state).
OPTIMIZERS: dict[str, float] = {"adamw": 2, "sgd": 1, "lion": 1, "sgd-nomomentum": 0}
OPTIMIZERS_8BIT: dict[str, float] = {"adamw-8bit": 2 * (1 + 4 / 2048), "paged-adamw-8bit": 2 * (1 + 4 / 2048)}
LORA_TARGETS = {"all": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                "attn": ("q_proj", "k_proj", "v_proj", "o_proj"), "qv": ("q_proj", "v_proj")}
NF4_BYTES = 4.127 / 8  # QLoRA's 4-bit NormalFloat with double-quantized constants (Dettmers et al. 2023)


@dataclass(frozen=True)
class Plan:
    """How the model is trained; defaults are a common LLM fine-tune."""

    batch: int = 1
    """Micro-batch per GPU (sequences in one forward)."""
    seq: int = 2048
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    checkpointing: bool = False
    attention: str = "flash"
    """flash (fused: PyTorch SDPA, FlashAttention; no s×s scores kept) or eager."""
    gpus: int = 1
    zero: int = 0
    """ZeRO stage: 1 shards optimizer states (and master weights), 2 also gradients, 3 also weights
    (FSDP FULL_SHARD = 3, SHARD_GRAD_OP = 2)."""
    lora_rank: int = 0
    lora_targets: str = "all"
    qlora: bool = False
    grad_accum: int = 1

    def __post_init__(self) -> None:
        for key in ("batch", "seq", "gpus", "grad_accum"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise UsageError(f"--{key.replace('_', '-')} must be a positive whole number, got {getattr(self, key)}")
        _choice("--precision", self.precision, PRECISIONS)
        _choice("--optimizer", self.optimizer, {**OPTIMIZERS, **OPTIMIZERS_8BIT})
        _choice("--attention", self.attention, ("flash", "eager"))
        _choice("--lora-targets", self.lora_targets, LORA_TARGETS)
        if self.zero not in (0, 1, 2, 3):
            raise UsageError(f"--zero must be 0, 1, 2 or 3, got {self.zero}")
        if self.lora_rank < 0:
            raise UsageError(f"--lora-rank must be 0 (full fine-tune) or positive, got {self.lora_rank}")
        if self.qlora and not self.lora_rank:
            raise UsageError("--qlora needs --lora-rank (QLoRA trains LoRA adapters on a 4-bit base)")

    @property
    def lora(self) -> bool:
        return self.lora_rank > 0


def _choice(flag: str, value: str, known: Any) -> None:
    if value not in known:
        raise UsageError(f"unknown {flag} {value!r}; known: {', '.join(known)}")


def lora_params(shape: ModelShape, plan: Plan) -> int:
    """Adapter parameters: r·(in + out) per targeted linear layer (per expert for MLP layers)."""
    linear = shape.linear_shapes()
    per_layer = sum(plan.lora_rank * (i + o) * (shape.experts if n in ("gate_proj", "up_proj", "down_proj") else 1)
                    for n, (i, o) in linear.items() if n in LORA_TARGETS[plan.lora_targets])
    return per_layer * shape.layers


def layer_activations(shape: ModelShape, plan: Plan) -> int:
    """Bytes one transformer layer keeps for backward, for one micro-batch (Korthikanti et al. §4.1)."""
    s, b, h, a = plan.seq, plan.batch, shape.hidden, shape.heads
    p = PRECISIONS[plan.precision][4]
    q, kv = a * shape.dim_head, shape.kv_heads * shape.dim_head
    mask = 1 if shape.dropout else 0  # dropout masks: one byte per element
    attention = p * s * b * (h + q + 2 * kv + q)  # QKV input, Q, K, V, the output projection's input
    if plan.attention == "eager":
        attention += p * a * s * s * b + mask * (1 + p) * a * s * s * b  # softmax output (+ dropout mask and output)
    else:
        attention += 4 * a * s * b  # flash attention keeps only the fp32 log-sum-exp per row
    attention += mask * s * b * h
    i = shape.intermediate
    if shape.gated_mlp:
        mlp = p * s * b * (h + 4 * i)  # input; gate and up outputs; SiLU output; their product (down's input)
    else:
        mlp = p * s * b * (h + 2 * i) + mask * s * b * h  # input; GeLU input; second linear's input; dropout mask
    if shape.experts > 1:  # each token's MLP activations, once per expert it is routed to
        mlp *= min(shape.active_experts, shape.experts)
    norms = 2 * p * s * b * h
    return attention + mlp + norms


def logits_bytes(shape: ModelShape, plan: Plan) -> int:
    """The loss over the vocabulary: logits in the compute dtype, fp32 log-probabilities that cross
    entropy keeps, and their fp32 gradient (HF upcasts logits to fp32 for the loss)."""
    p = PRECISIONS[plan.precision][4]
    return plan.seq * plan.batch * shape.vocab * (p + 4 + 4)


def estimate(shape: ModelShape, plan: Plan) -> dict[str, Any]:
    """Bytes per GPU, by part, and the total."""
    w, g, m, st, p = PRECISIONS[plan.precision]
    n, d = shape.params, plan.gpus
    parts: dict[str, float] = {}
    if plan.lora:
        adapters = lora_params(shape, plan)
        base = 4 if plan.precision == "fp32" else 2
        linear = min(shape.linear_params(), n)
        parts["weights"] = (linear * NF4_BYTES + (n - linear) * base) if plan.qlora else n * base
        parts["lora_adapters"] = adapters * 4  # PEFT keeps adapters in fp32
        trainable, grad_bytes, master, state_bytes = adapters, 4, 0, 4
    else:
        parts["weights"] = n * w
        trainable, grad_bytes, master, state_bytes = n, g, m, st
    _add_states(parts, trainable, grad_bytes, master, state_bytes, plan)
    if plan.zero >= 3:
        if d > 1:  # the layer being computed and the next (prefetched), gathered whole
            parts["gathered_layers"] = 2 * shape.layer_params() * (2 if plan.lora else w)
    if plan.precision == "amp" and not plan.lora:
        parts["autocast_copies"] = shape.linear_params() * 2  # 16-bit copies of the weights, cached per forward
    layer = layer_activations(shape, plan)
    if plan.checkpointing:
        parts["activations"] = shape.layers * p * plan.seq * plan.batch * shape.hidden + layer
    else:
        parts["activations"] = shape.layers * layer
    parts["logits"] = logits_bytes(shape, plan)
    out = {k: int(round(v)) for k, v in parts.items()}
    return {"parts": out, "total": sum(out.values()), "params": n, "trainable_params": trainable,
            "per_sample": out["activations"] // plan.batch + out["logits"] // plan.batch}


def _add_states(parts: dict[str, float], trainable: int, grad_bytes: int, master: int, state_bytes: int,
                plan: Plan) -> None:
    """Gradients, fp32 master weights and optimizer states of the trainable parameters, then ZeRO's sharding
    of them and of the weights, into `parts` (bytes per GPU)."""
    d, opt = plan.gpus, plan.optimizer
    parts["gradients"] = trainable * grad_bytes
    parts["master_weights"] = trainable * master
    parts["optimizer_states"] = trainable * (OPTIMIZERS_8BIT[opt] if opt in OPTIMIZERS_8BIT else OPTIMIZERS[opt] * state_bytes)
    if plan.zero >= 1:
        parts["optimizer_states"] /= d
        parts["master_weights"] /= d
    if plan.zero >= 2:
        parts["gradients"] /= d
    if plan.zero >= 3:
        parts["weights"] /= d
        parts["lora_adapters"] = parts.get("lora_adapters", 0) / d


ACTIVATIONS_NEED = ("activations and logits: they grow with layers x hidden size x sequence x "
                    "micro-batch (about 34·s·b·h bytes a layer in 16-bit, Korthikanti et al. 2022) and with the "
                    "vocabulary (about 10·s·b·vocab bytes for the loss); add --layers and --hidden (and --vocab), "
                    "or give the model's config.json")


def model_states(n: int, plan: Plan) -> dict[str, Any]:
    """What a full training of `n` parameters keeps per GPU whatever the model's shape: weights, gradients,
    fp32 master weights and optimizer states (ZeRO-sharded). The activations, the logits, ZeRO-3's gathered
    layers and autocast's weight copies depend on the shape and are named in `not_estimated`."""
    if plan.lora:
        raise UsageError("--lora-rank needs the model's shape (which linear layers carry the adapters): add "
                         "--layers and --hidden, or give a config.json")
    w, g, m, st, _ = PRECISIONS[plan.precision]
    parts: dict[str, float] = {"weights": n * w}
    _add_states(parts, n, g, m, st, plan)
    out = {k: int(round(v)) for k, v in parts.items()}
    missing = [ACTIVATIONS_NEED]
    if plan.zero >= 3 and plan.gpus > 1:
        missing.append("ZeRO-3's two layers gathered whole (the size of a layer needs the shape)")
    if plan.precision == "amp":
        missing.append("autocast's 16-bit copies of the linear weights (up to 2 bytes a parameter)")
    return {"parts": out, "total": sum(out.values()), "params": n, "trainable_params": n, "not_estimated": missing}


def fits(shape: ModelShape, plan: Plan, gpus: tuple[Gpu, ...] = GPUS) -> list[dict[str, Any]]:
    """For each GPU: whether the plan fits, the headroom, and the largest micro-batch that fits."""
    est = estimate(shape, plan)
    fixed = est["total"] - est["parts"]["activations"] - est["parts"]["logits"]
    rows = []
    for gpu in gpus:
        max_batch = max(0, (gpu.usable - fixed) // est["per_sample"]) if est["per_sample"] else 0
        rows.append({"gpu": gpu.name, "memory": gpu.memory, "usable": gpu.usable, "fits": est["total"] <= gpu.usable,
                     "headroom": gpu.usable - est["total"], "max_batch": int(max_batch)})
    return rows


def fixes(shape: ModelShape, plan: Plan, gpu: Gpu | None = None) -> list[dict[str, Any]]:
    """Changes that lower the per-GPU total, largest saving first, each with its new total (and, given
    a GPU, whether it then fits). Effective batch is kept by gradient accumulation where batch shrinks."""
    base = estimate(shape, plan)["total"]
    out = []
    for label, changed in _candidates(shape, plan):
        total = estimate(shape, changed)["total"]
        if total < base:
            row = {"fix": label, "saves": base - total, "total": total}
            if gpu is not None:
                row["fits"] = total <= gpu.usable
            out.append(row)
    return sorted(out, key=lambda r: -r["saves"])


def to_fit(shape: ModelShape, plan: Plan, gpu: Gpu) -> dict[str, Any] | None:
    """The changes that make the plan fit `gpu`, chosen greedily (largest saving first) among those that
    leave the training's math alone (checkpointing, fused attention, smaller micro-batch with
    accumulation, more sharding, 8-bit states), then LoRA/QLoRA, then a shorter sequence; None when
    even all of them do not fit. Empty `steps` when it fits already."""
    steps: list[str] = []
    for tier in range(3):
        while estimate(shape, plan)["total"] > gpu.usable:
            options = [(estimate(shape, p)["total"], label, p) for label, p in _candidates(shape, plan)
                       if _tier(label) == tier]
            options = [o for o in options if o[0] < estimate(shape, plan)["total"]]
            if not options:
                break
            _, label, plan = min(options, key=lambda o: o[0])
            steps.append(label)
        if estimate(shape, plan)["total"] <= gpu.usable:
            return {"gpu": gpu.name, "steps": steps, "total": estimate(shape, plan)["total"],
                    "plan": dataclasses.asdict(plan)}
    return None


def _tier(label: str) -> int:
    return 2 if label.startswith("sequence") else 1 if "LoRA" in label else 0


def _candidates(shape: ModelShape, plan: Plan) -> list[tuple[str, Plan]]:
    change = dataclasses.replace
    out = []
    if not plan.checkpointing:
        out.append(("gradient checkpointing (recompute each layer in backward; ~30% more compute)",
                     change(plan, checkpointing=True)))
    if plan.attention == "eager":
        out.append(("fused attention (attn_implementation='sdpa' or 'flash_attention_2')", change(plan, attention="flash")))
    if plan.batch > 1:
        half = plan.batch // 2
        out.append((f"micro-batch {plan.batch} -> {half} with gradient accumulation x{plan.grad_accum * 2} "
                    "(same effective batch)", change(plan, batch=half, grad_accum=plan.grad_accum * 2)))
        if half > 1:
            out.append((f"micro-batch {plan.batch} -> 1 with gradient accumulation x{plan.grad_accum * plan.batch}",
                        change(plan, batch=1, grad_accum=plan.grad_accum * plan.batch)))
    if plan.seq > 256:
        out.append((f"sequence length {plan.seq} -> {plan.seq // 2} (changes what the model sees: pack or split "
                    "examples)", change(plan, seq=plan.seq // 2)))
    if plan.gpus > 1 and plan.zero < 3:
        names = {1: "ZeRO-1", 2: "ZeRO-2 (FSDP SHARD_GRAD_OP)", 3: "ZeRO-3 (FSDP FULL_SHARD)"}
        for stage in range(plan.zero + 1, 4):
            out.append((f"{names[stage]} over {plan.gpus} GPUs", change(plan, zero=stage)))
    if plan.optimizer == "adamw":
        out.append(("8-bit AdamW (bitsandbytes)", change(plan, optimizer="adamw-8bit")))
    if not plan.lora:
        out.append(("LoRA r=16 on all linear layers (PEFT)", change(plan, lora_rank=16, lora_targets="all")))
    if not plan.qlora:
        out.append(("QLoRA r=16 (4-bit NF4 base, bitsandbytes)",
                    change(plan, lora_rank=plan.lora_rank or 16, lora_targets=plan.lora_targets if plan.lora else "all",
                           qlora=True)))
    return out
