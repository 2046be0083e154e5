"""`stethoscope estimate memory|checkpoint|mfu`: what a training job will need, before it runs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click
from rich.text import Text

from stethoscope.cli import render
from stethoscope.errors import UsageError

GIB = 1 << 30
_NOTES = {
    "weights": "parameters ({dtype})",
    "lora_adapters": "LoRA adapters, fp32",
    "gradients": "one per trainable parameter",
    "master_weights": "fp32 copy the optimizer updates",
    "optimizer_states": "{optimizer}",
    "gathered_layers": "ZeRO-3/FSDP: two layers gathered whole",
    "autocast_copies": "16-bit weight copies autocast caches",
    "activations": "kept for backward (Korthikanti et al. 2022){ckpt}",
    "logits": "loss over the vocabulary (fp32 log-probs + grad)",
}


@click.group("estimate")
def estimate() -> None:
    """Estimate training memory per GPU, checkpoint sizes and MFU, from a config.json or numbers.

    \b
    Examples:
      stethoscope estimate memory ./Llama-2-7b-hf/config.json --seq 4096 --batch 4 --gpu A100-80GB
      stethoscope estimate checkpoint config.json --every 500 --steps 20000 --keep-last 3
      stethoscope estimate mfu config.json --seq 4096 --tokens-per-s 3200 --gpu H100
    """


def _model_options(f: Callable) -> Callable:
    options = [
        click.argument("config", required=False, type=click.Path()),
        click.option("--params", default=None, help="Parameter count (7B, 125M, 6.7e9); default: from the shape."),
        click.option("--layers", type=int, default=None, help="Transformer layers (without a config.json)."),
        click.option("--hidden", type=int, default=None, help="Hidden size (without a config.json)."),
        click.option("--heads", type=int, default=None, help="Attention heads [hidden/128]."),
        click.option("--kv-heads", type=int, default=None, help="Key/value heads (grouped-query attention) [heads]."),
        click.option("--intermediate", type=int, default=None, help="MLP width [8/3 hidden, gated]."),
        click.option("--vocab", type=int, default=None, help="Vocabulary size [32000]."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _plan_options(f: Callable) -> Callable:
    from stethoscope.debug.estimate.memory import LORA_TARGETS, OPTIMIZERS, OPTIMIZERS_8BIT, PRECISIONS

    options = [
        click.option("--seq", type=int, default=2048, show_default=True, help="Sequence length."),
        click.option("--batch", type=int, default=1, show_default=True, help="Micro-batch per GPU."),
        click.option("--grad-accum", type=int, default=1, show_default=True, help="Gradient accumulation steps."),
        click.option("--gpus", type=int, default=1, show_default=True, help="Data-parallel GPUs (for sharding)."),
        click.option("--zero", type=int, default=0, show_default=True, help="ZeRO stage 0-3."),
        click.option("--fsdp", type=click.Choice(["full", "grad-op"]), default=None,
                     help="FSDP sharding: full (= ZeRO-3) or grad-op (= ZeRO-2)."),
        click.option("--precision", default="bf16-mixed", show_default=True,
                     help=f"One of {', '.join(PRECISIONS)}: bf16-mixed = 16-bit weights/grads with fp32 master "
                          "weights and states; amp = autocast over fp32 weights; bf16 = all bf16."),
        click.option("--optimizer", default="adamw", show_default=True,
                     help=f"One of {', '.join([*OPTIMIZERS, *OPTIMIZERS_8BIT])}."),
        click.option("--checkpointing/--no-checkpointing", default=False, show_default=True,
                     help="Gradient (activation) checkpointing."),
        click.option("--attention", type=click.Choice(["flash", "eager"]), default="flash", show_default=True,
                     help="flash: fused kernels (SDPA, FlashAttention) keep no s x s scores."),
        click.option("--lora-rank", type=int, default=0, show_default=True, help="LoRA rank (0: full fine-tune)."),
        click.option("--lora-targets", default="all", show_default=True, help=f"One of {', '.join(LORA_TARGETS)}."),
        click.option("--qlora", is_flag=True, help="4-bit NF4 base weights (with --lora-rank)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _shape(config: str | None, params: str | None, **dims: Any) -> Any:
    from stethoscope.debug.estimate import from_config, from_numbers, parse_count

    for key, value in dims.items():
        if value is not None and value < 1:
            raise UsageError(f"--{key.replace('_', '-')} must be positive, got {value}")
    count = parse_count(params)
    if config:
        return from_config(config, params=count, **dims)
    if count is not None and (dims.get("layers") is None or dims.get("hidden") is None):
        return count  # a parameter count alone: what depends on the count only (estimate memory)
    return from_numbers(params=count, **dims)


def _plan(seq: int, batch: int, grad_accum: int, gpus: int, zero: int, fsdp: str | None, precision: str,
          optimizer: str, checkpointing: bool, attention: str, lora_rank: int, lora_targets: str, qlora: bool) -> Any:
    from stethoscope.debug.estimate import Plan

    if fsdp is not None:
        zero = {"full": 3, "grad-op": 2}[fsdp]
    return Plan(batch=batch, seq=seq, grad_accum=grad_accum, gpus=gpus, zero=zero, precision=precision,
                optimizer=optimizer, checkpointing=checkpointing, attention=attention, lora_rank=lora_rank,
                lora_targets=lora_targets, qlora=qlora)


def _split(kwargs: dict[str, Any]) -> tuple[Any, Any]:
    model_keys = ("config", "params", "layers", "hidden", "heads", "kv_heads", "intermediate", "vocab")
    model = {k: kwargs.pop(k) for k in model_keys}
    shape = _shape(model.pop("config"), model.pop("params"), **model)
    plan_keys = ("seq", "batch", "grad_accum", "gpus", "zero", "fsdp", "precision", "optimizer", "checkpointing",
                 "attention", "lora_rank", "lora_targets", "qlora")
    return shape, _plan(**{k: kwargs.pop(k) for k in plan_keys})


def _with_model_and_plan(f: Callable) -> Callable:
    @functools.wraps(f)
    def wrapper(**kwargs: Any) -> Any:
        shape, plan = _split(kwargs)
        return f(shape, plan, **kwargs)

    return _model_options(_plan_options(wrapper))


def gib(n: float) -> str:
    return f"{n / GIB:,.2f}"


def gb(n: float) -> str:
    return f"{n / 1e9:,.2f}"


@estimate.command()
@_with_model_and_plan
@click.option("--gpu", "gpu_name", default=None, help="The GPU to plan for: fixes say whether they make it fit.")
@click.option("--json", "as_json", is_flag=True, help="Print the estimate as JSON.")
def memory(shape: Any, plan: Any, gpu_name: str | None, as_json: bool) -> None:
    """Training memory per GPU by part, which GPUs it fits, and fixes ranked by memory saved.

    \b
    Examples:
      stethoscope estimate memory ./Llama-2-7b-hf/config.json --seq 4096 --batch 4 --gpu A100-80GB
      stethoscope estimate memory --layers 32 --hidden 4096 --vocab 32000 --gpus 8 --zero 3
      stethoscope estimate memory config.json --lora-rank 16 --qlora --gpu RTX4090 --json
    """
    from stethoscope.debug.estimate import estimate as run_estimate
    from stethoscope.debug.estimate import fits, fixes, gpu, to_fit

    target = gpu(gpu_name) if gpu_name else None
    if isinstance(shape, int):  # --params alone
        _memory_of_count(shape, plan, target, as_json)
        return
    est = run_estimate(shape, plan)
    result = {"model": _model_dict(shape), "plan": _plan_dict(plan), **est, "fits": fits(shape, plan),
              "fixes": fixes(shape, plan, target), "gpu": target.name if target else None,
              "to_fit": to_fit(shape, plan, target) if target else None}
    if as_json:
        click.echo(render.to_json(result))
        return
    _print_memory(result, shape, plan, target)


def _memory_of_count(n: int, plan: Any, target: Any, as_json: bool) -> None:
    """Weights, gradients and optimizer states from a parameter count; what the activations need, said."""
    from stethoscope.debug.estimate import GPUS
    from stethoscope.debug.estimate.memory import model_states

    est = model_states(n, plan)
    room = [{"gpu": g.name, "usable": g.usable, "left_for_activations": g.usable - est["total"]}
            for g in ((target,) if target else GPUS)]
    if as_json:
        click.echo(render.to_json({"model": {"params": n}, "plan": _plan_dict(plan), **est, "room": room}))
        return
    out = render.console()
    shard = f", ZeRO-{plan.zero} over {plan.gpus} GPUs" if plan.zero else ""
    out.print(Text(f"{n / 1e9:,.3f}B parameters, full fine-tune, {plan.precision}, {plan.optimizer}{shard} "
                   "(from the parameter count alone)"))
    dtype = "fp32" if plan.precision == "fp32" else "16-bit"
    rows = [(part, gib(v), gb(v), _NOTES.get(part, "").format(dtype=dtype, optimizer=plan.optimizer, ckpt=""))
            for part, v in est["parts"].items() if v]
    rows.append(("total before activations", gib(est["total"]), gb(est["total"]), "per GPU"))
    out.print(render.rows_table(["part", "GiB", "GB", "what"], rows))
    for line in est["not_estimated"]:
        out.print(Text(f"not estimated: {line}"))
    left = [f"{r['gpu']} {gib(r['left_for_activations'])} GiB" for r in room if r["left_for_activations"] > 0]
    short = [r["gpu"] for r in room if r["left_for_activations"] <= 0]
    out.print(Text("left for activations (after 1 GiB runtime reserve and 5% fragmentation margin): "
                   + (", ".join(left) or "none") + (f"; the states alone do not fit {', '.join(short)}" if short else "")))


def _model_dict(shape: Any) -> dict[str, Any]:
    import dataclasses

    if isinstance(shape, int):  # --params alone
        return {"params": shape}
    out = dataclasses.asdict(shape)
    out["params"] = shape.params
    return out


def _plan_dict(plan: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(plan)


def _print_memory(result: dict[str, Any], shape: Any, plan: Any, target: Any) -> None:
    out = render.console()
    mode = (f"QLoRA r={plan.lora_rank}" if plan.qlora else f"LoRA r={plan.lora_rank}" if plan.lora else "full fine-tune")
    shard = f", ZeRO-{plan.zero} over {plan.gpus} GPUs" if plan.zero else (f", {plan.gpus} GPUs" if plan.gpus > 1 else "")
    out.print(Text(f"{shape.name}: {result['params'] / 1e9:,.3f}B parameters ({result['trainable_params']:,} trained), "
                   f"{mode}, {plan.precision}, {plan.optimizer}, micro-batch {plan.batch} x {plan.seq} tokens"
                   f"{shard}, checkpointing {'on' if plan.checkpointing else 'off'}, {plan.attention} attention"))
    dtype = {"fp32": "fp32"}.get(plan.precision, "16-bit") if not plan.qlora else "4-bit NF4 linear layers"
    ckpt = ", checkpointed" if plan.checkpointing else ""
    rows = [(part, gib(v), gb(v), _NOTES.get(part, "").format(dtype=dtype, optimizer=plan.optimizer, ckpt=ckpt))
            for part, v in result["parts"].items() if v]
    rows.append(("total per GPU", gib(result["total"]), gb(result["total"]), ""))
    out.print(render.rows_table(["part", "GiB", "GB", "what"], rows))
    fitting = [r for r in result["fits"] if r["fits"]]
    out.print(Text("fits (after 1 GiB runtime reserve and 5% fragmentation margin): "
                   + (", ".join(f"{r['gpu']} (micro-batch up to {r['max_batch']})" for r in fitting) or "none of "
                      + ", ".join(r["gpu"] for r in result["fits"]))))
    if target is not None:
        row = next(r for r in result["fits"] if r["gpu"] == target.name)
        verdict = "fits" if row["fits"] else "does NOT fit"
        out.print(Text(f"{target.name}: {verdict} ({gib(result['total'])} of {gib(row['usable'])} GiB usable)"))
    if result["fixes"]:
        rows = [(f["fix"], gib(f["saves"]), gib(f["total"]), *(("yes" if f["fits"] else "no",) if target else ()))
                for f in result["fixes"]]
        cols = ["fix, largest saving first", "saves GiB", "then GiB"] + ([f"fits {target.name}"] if target else [])
        out.print(render.rows_table(cols, rows))
    plan_fit = result["to_fit"]
    if target is not None and not row["fits"]:
        out.print(Text(f"to fit {target.name}: " + (" + ".join(plan_fit["steps"]) + f" -> {gib(plan_fit['total'])} GiB"
                                                   if plan_fit else "no combination of these fixes is enough; "
                                                   "shard over more GPUs (--gpus N --zero 3) or offload")))


@estimate.command()
@_with_model_and_plan
@click.option("--every", type=int, default=1000, show_default=True, help="Steps between saves.")
@click.option("--steps", type=int, default=None, help="Steps in the run [10 saves].")
@click.option("--keep-last", type=int, default=3, show_default=True, help="Newest checkpoints kept (0: keep all).")
@click.option("--milestone-every", type=int, default=None, help="Steps whose multiples are kept for good.")
@click.option("--keep-best", is_flag=True, help="Also keep the best by a metric (one more when it is older).")
@click.option("--no-optimizer", is_flag=True, help="Saves hold weights only (no optimizer state).")
@click.option("--json", "as_json", is_flag=True, help="Print the estimate as JSON.")
def checkpoint(shape: Any, plan: Any, every: int, steps: int | None, keep_last: int, milestone_every: int | None,
               keep_best: bool, no_optimizer: bool, as_json: bool) -> None:
    """Bytes per checkpoint save (weights, optimizer, RNG, scheduler) and on disk under retention.

    \b
    Examples:
      stethoscope estimate checkpoint config.json --every 500 --steps 20000 --keep-last 3
      stethoscope estimate checkpoint --params 70B --layers 80 --hidden 8192 --milestone-every 5000 --json
    """
    from stethoscope.debug.estimate import checkpoint as ck

    if keep_last < 0:
        raise UsageError(f"--keep-last must be 0 (keep all) or positive, got {keep_last}")
    parts = ck.per_save(shape, plan, optimizer=not no_optimizer)
    total = sum(parts.values())
    ret = ck.retention(total, steps if steps is not None else 10 * every, every, keep_last or None, milestone_every,
                       keep_best)
    result = {"model": _model_dict(shape), "plan": _plan_dict(plan), "per_save": parts, "per_save_total": total,
              "retention": {"every": every, "keep_last": keep_last or None, "milestone_every": milestone_every,
                            "keep_best": keep_best, **ret}}
    if as_json:
        click.echo(render.to_json(result))
        return
    out = render.console()
    rows = [(k, gib(v), gb(v)) for k, v in parts.items()] + [("per save", gib(total), gb(total))]
    out.print(render.rows_table(["part", "GiB", "GB"], rows))
    out.print(Text(f"{ret['saves']} saves over the run write {gib(ret['written_total'])} GiB; {ret['kept']} kept at the "
                   f"end = {gib(ret['disk_at_end'])} GiB; peak on disk {ret['peak_kept']} saves = "
                   f"{gib(ret['disk_peak'])} GiB (a new save is complete before the oldest goes)"))


@estimate.command()
@_model_options
@click.option("--seq", type=int, default=2048, show_default=True, help="Sequence length.")
@click.option("--tokens-per-s", type=float, default=None, help="Tokens per second, all GPUs together.")
@click.option("--step-time", type=float, default=None, help="Seconds per optimizer step (with --global-batch).")
@click.option("--global-batch", type=int, default=None, help="Sequences per optimizer step, all GPUs together.")
@click.option("--gpu", "gpu_name", required=True, help="The GPU (H100, A100-80GB, RTX 4090, ...).")
@click.option("--gpus", type=int, default=1, show_default=True, help="GPUs sharing the throughput.")
@click.option("--json", "as_json", is_flag=True, help="Print the estimate as JSON.")
def mfu(config: str | None, params: str | None, seq: int, tokens_per_s: float | None, step_time: float | None,
        global_batch: int | None, gpu_name: str, gpus: int, as_json: bool, **dims: Any) -> None:
    """Model FLOPs utilization: FLOPs per token (6N + 12·L·d·T) x tokens/s over the GPUs' peak.

    \b
    Examples:
      stethoscope estimate mfu config.json --seq 4096 --tokens-per-s 3200 --gpu H100
      stethoscope estimate mfu --params 7B --layers 32 --hidden 4096 --step-time 2.5 --global-batch 64 --gpu A100 --gpus 8
    """
    from stethoscope.debug.estimate import gpu
    from stethoscope.debug.estimate.mfu import mfu as compute

    target = gpu(gpu_name)
    shape = _shape(config, params, **dims)
    if tokens_per_s is None:
        if step_time is None or global_batch is None:
            raise UsageError("give --tokens-per-s, or --step-time with --global-batch")
        if step_time <= 0 or global_batch < 1:
            raise UsageError(f"--step-time and --global-batch must be positive, got {step_time} and {global_batch}")
        tokens_per_s = global_batch * seq / step_time
    result = compute(shape, seq, tokens_per_s, target, gpus)
    if as_json:
        click.echo(render.to_json(result))
        return
    out = render.console()
    out.print(render.kv_table([
        ("FLOPs per token", f"{result['flops_per_token']:.4g} (6N = {result['dense_flops_per_token']:.4g}, "
                            f"attention {result['attention_flops_per_token']:.4g})"),
        ("throughput", f"{tokens_per_s:,.0f} tokens/s on {gpus} x {target.name}"),
        ("achieved", f"{result['achieved_flops_per_gpu'] / 1e12:,.1f} TFLOP/s per GPU of "
                     f"{target.peak_flops / 1e12:,.0f} peak (dense 16-bit)"),
        ("MFU", f"{100 * result['mfu']:.1f}%"),
        ("tokens/s at 30/40/50% MFU", " / ".join(f"{v:,.0f}" for v in result["tokens_per_s_at"].values())),
    ]))
    if result["note"]:
        out.print(Text(f"note: {result['note']}"))


COMMANDS = [estimate]
