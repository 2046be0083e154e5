"""`stethoscope estimate memory|checkpoint|mfu`: known configs, the paper's formula, sharding, LoRA,
retention against the checkpoint manager's own policy, MFU against the Monitor's, JSON and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from stethoscope.capture.throughput import PEAK_FLOPS
from stethoscope.cli.main import cli
from stethoscope.debug.estimate import GPUS, Plan, estimate, fits, fixes, from_config, from_numbers, gpu, parse_count, to_fit
from stethoscope.debug.estimate import checkpoint as ck
from stethoscope.debug.estimate.memory import layer_activations

LLAMA_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000, "tie_word_embeddings": False,
            "hidden_act": "silu", "max_position_embeddings": 4096, "attention_dropout": 0.0}
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257,
        "activation_function": "gelu_new", "resid_pdrop": 0.1, "n_inner": None}


@pytest.fixture
def llama(tmp_path: Path) -> Path:
    path = tmp_path / "llama-7b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(LLAMA_7B))
    return path


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, ["estimate", *args])
    return res.exit_code, res.stdout, res.stderr


def test_llama_7b_weights_and_states(llama):
    shape = from_config(llama.parent)
    assert shape.params == 6_738_415_616  # Llama-2-7B's published count
    parts = estimate(shape, Plan(precision="bf16-mixed"))["parts"]
    assert parts["weights"] / 1e9 == pytest.approx(13.48, abs=0.01)  # 13.5 GB in 16 bits
    assert parts["gradients"] == 2 * shape.params
    assert parts["master_weights"] == 4 * shape.params and parts["optimizer_states"] == 8 * shape.params  # ZeRO's K=12
    fp32 = estimate(shape, Plan(precision="fp32"))["parts"]
    assert fp32["weights"] + fp32["gradients"] + fp32["optimizer_states"] == 16 * shape.params
    pure = estimate(shape, Plan(precision="bf16"))["parts"]
    assert pure["optimizer_states"] == 4 * shape.params and pure["master_weights"] == 0
    eight = estimate(shape, Plan(optimizer="adamw-8bit"))["parts"]
    assert eight["optimizer_states"] == pytest.approx(2.004 * shape.params, rel=1e-3)


def test_gpt2_count_and_the_papers_formula():
    shape = from_config_dict(GPT2)
    assert shape.params == 124_439_808  # GPT-2 small, tied embeddings, learned positions
    assert shape.dropout and not shape.gated_mlp
    s, b, h, a = 1024, 4, 768, 12
    plan = Plan(batch=b, seq=s, precision="bf16-mixed", attention="eager")
    assert layer_activations(shape, plan) == s * b * h * (34 + 5 * a * s / h)  # Korthikanti et al. 2022, eq. (2)
    ckpt = estimate(shape, Plan(batch=b, seq=s, attention="eager", checkpointing=True))["parts"]["activations"]
    assert ckpt == 12 * 2 * s * b * h + layer_activations(shape, plan)  # §4.2: 2sbh per layer + one recomputed


def from_config_dict(config: dict) -> object:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "config.json"
        path.write_text(json.dumps(config))
        return from_config(path)


def test_flash_attention_drops_the_quadratic_term():
    shape = from_numbers(layers=4, hidden=1024, heads=16, vocab=1000)
    short = [layer_activations(shape, Plan(seq=s, attention="flash")) for s in (1024, 2048, 4096)]
    eager = [layer_activations(shape, Plan(seq=s, attention="eager")) for s in (1024, 2048, 4096)]
    assert short[2] / short[1] == pytest.approx(2.0, rel=0.01)  # linear in s
    assert eager[2] / eager[1] > 2.5  # the s² scores


def test_zero_stages_and_fsdp_shard_per_gpu(llama):
    shape = from_config(llama)
    one = estimate(shape, Plan())["parts"]
    for stage, sharded in ((1, {"optimizer_states", "master_weights"}), (2, {"optimizer_states", "master_weights",
                                                                              "gradients"}),
                           (3, {"optimizer_states", "master_weights", "gradients", "weights"})):
        parts = estimate(shape, Plan(gpus=8, zero=stage))["parts"]
        for key in ("weights", "gradients", "master_weights", "optimizer_states"):
            assert parts[key] == (one[key] // 8 if key in sharded else one[key]), (stage, key)
        assert parts["activations"] == one["activations"]
    assert estimate(shape, Plan(gpus=8, zero=3))["parts"]["gathered_layers"] == 2 * 2 * shape.layer_params()


def test_lora_and_qlora(llama):
    shape = from_config(llama)
    plan = Plan(lora_rank=16, lora_targets="all")
    est = estimate(shape, plan)
    per_layer = 16 * (4 * (4096 + 4096) + 3 * (4096 + 11008))
    assert est["trainable_params"] == 32 * per_layer == 39_976_960  # PEFT's count for r=16, all linear, Llama-2-7B
    assert est["parts"]["weights"] == 2 * shape.params and est["parts"]["gradients"] == 4 * 39_976_960
    assert est["parts"]["optimizer_states"] == 8 * 39_976_960 and est["parts"]["master_weights"] == 0
    q = estimate(shape, Plan(lora_rank=16, qlora=True))["parts"]["weights"]
    assert q / 1e9 == pytest.approx((shape.linear_params() * 4.127 / 8 + (shape.params - shape.linear_params()) * 2) / 1e9)
    assert 3.8e9 < q < 4.0e9  # a 7B model in 4 bits is ~3.9 GB
    assert estimate(shape, Plan(lora_rank=16, lora_targets="qv"))["trainable_params"] == 32 * 16 * 2 * 8192


def test_fits_fixes_and_plan_to_fit(llama):
    shape = from_config(llama)
    plan = Plan(batch=4, seq=4096)
    rows = {r["gpu"]: r for r in fits(shape, plan)}
    assert not rows["A100-80GB"]["fits"] and not rows["T4"]["fits"]
    qlora = {r["gpu"]: r for r in fits(shape, Plan(lora_rank=16, qlora=True, checkpointing=True))}
    assert qlora["T4"]["fits"] and qlora["RTX 4090"]["max_batch"] >= 4
    found = fixes(shape, plan, gpu("A100-80GB"))
    saves = [f["saves"] for f in found]
    assert saves == sorted(saves, reverse=True) and len(found) >= 5
    assert any(f["fix"].startswith("gradient checkpointing") for f in found)
    fit = to_fit(shape, plan, gpu("A100-80GB"))
    assert fit["total"] <= gpu("A100-80GB").usable and fit["steps"][0].startswith("gradient checkpointing")
    assert not any("LoRA" in s or "sequence" in s for s in fit["steps"])  # math-preserving changes suffice
    assert to_fit(shape, Plan(), gpu("MI300X"))["steps"] == []


def test_retention_matches_the_checkpoint_managers_policy(tmp_path):
    """The closed-form count against checkpoint/retention.py applied save by save."""
    from stethoscope.checkpoint.disk import CheckpointInfo
    from stethoscope.checkpoint.retention import to_delete

    for steps, every, keep, milestones in ((20000, 500, 3, 5000), (1000, 100, 2, None), (1000, 300, 5, 600),
                                           (90, 10, 1, 20), (100, 10, 1, 20), (50, 10, 8, None), (700, 7, 3, 10)):
        on_disk: list = []
        peak = 0
        for k in range(1, steps // every + 1):  # save, then apply retention, as Checkpoints does
            step = k * every
            on_disk.append(CheckpointInfo(step, tmp_path / str(step), "ok",
                                          milestone=bool(milestones and step % milestones == 0)))
            peak = max(peak, len(on_disk))
            gone = {i.step for i in to_delete(on_disk, keep, None, "min")}
            on_disk = [i for i in on_disk if i.step not in gone]
        got = ck.retention(100, steps, every, keep, milestones)
        assert got["kept"] == len(on_disk) and got["peak_kept"] == peak, (steps, every, keep, milestones)
        assert got["disk_peak"] == 100 * peak


def test_checkpoint_bytes_per_save(llama):
    shape = from_config(llama)
    parts = ck.per_save(shape, Plan(precision="bf16-mixed"))
    assert parts["weights"] == 2 * shape.params and parts["optimizer"] == 12 * shape.params
    assert ck.per_save(shape, Plan(precision="bf16-mixed"), optimizer=False)["optimizer"] == 0
    lora = ck.per_save(shape, Plan(lora_rank=16))
    assert lora["weights"] == 4 * 39_976_960 and lora["optimizer"] == 8 * 39_976_960


def test_mfu_uses_the_monitors_formula_and_table(llama):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from stethoscope.capture.throughput import flops_per_token
    from stethoscope.debug.estimate.mfu import mfu

    cfg = {**LLAMA_7B, "hidden_size": 64, "intermediate_size": 172, "num_attention_heads": 4, "num_key_value_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 300}
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg))
    shape = from_config_dict(cfg)
    assert isinstance(model, torch.nn.Module)
    got = mfu(shape, 128, 1000.0, gpu("H100"))
    assert got["flops_per_token"] == flops_per_token(model, seq_len=128)  # what the Monitor logs as perf/mfu
    assert got["mfu"] == pytest.approx(1000.0 * got["flops_per_token"] / 989.4e12)
    seven = mfu(from_config(llama), 4096, 3200.0, gpu("h100"), gpus=1)
    # 6N over the parameters that multiply a matrix: less the looked-up input embedding and the norms
    assert seven["matmul_params"] == 6_738_415_616 - 32000 * 4096 - 65 * 4096 == 6_607_077_376
    assert seven["flops_per_token"] == 6 * 6_607_077_376 + 12 * 32 * 4096 * 4096
    assert 0.14 < seven["mfu"] < 0.16


def test_every_gpu_has_a_peak_in_the_monitors_table():
    names = {name for name, _ in PEAK_FLOPS}
    for g in GPUS:
        assert g.peak_flops > 0 and any(key in g.datasheet for key in names)
    assert gpu("a100-40gb").name == "A100-40GB" and gpu("NVIDIA H100").name == "H100-80GB"
    assert gpu("RTX 4090").memory == 24564 << 20 and gpu("h200").name == "H200-141GB"


@pytest.mark.parametrize("config, params", [
    ({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
      "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256, "tie_word_embeddings": False},
     8_030_261_248),  # Llama-3-8B
    ({"model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576, "num_attention_heads": 16,
      "num_key_value_heads": 16, "head_dim": 256, "num_hidden_layers": 28, "vocab_size": 256000}, 8_537_680_896),
    ({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
      "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000, "num_local_experts": 8,
      "num_experts_per_tok": 2, "tie_word_embeddings": False}, 46_702_792_704),  # Mixtral-8x7B
], ids=["llama-3-8b", "gemma-7b", "mixtral-8x7b"])
def test_published_parameter_counts(config, params):
    assert from_config_dict(config).params == params


def test_moe_computes_with_routed_experts_only():
    from stethoscope.debug.estimate.mfu import mfu

    moe = from_numbers(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336, experts=8, active_experts=2)
    assert moe.active_params == moe.params - 32 * 6 * 3 * 4096 * 14336 and round(moe.active_params / 1e9, 1) == 12.9
    lookups_and_norms = 32000 * 4096 + (2 * 32 + 1) * 4096
    assert mfu(moe, 4096, 1000.0, gpu("H100"))["dense_flops_per_token"] == 6 * (moe.active_params - lookups_and_norms)
    dense = from_numbers(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336)
    mlp = layer_activations(moe, Plan()) - layer_activations(dense, Plan())
    assert mlp == 2 * 2048 * 1 * (4096 + 4 * 14336)  # the MLP's 16-bit activations once more, for the second expert


def test_parse_count():
    assert parse_count("7B") == 7_000_000_000 and parse_count("125M") == 125_000_000 and parse_count("6.7e9") == 6_700_000_000


# -- the CLI -------------------------------------------------------------------------------------
def test_cli_memory_json(llama):
    code, out, _ = _cli("memory", str(llama), "--seq", "4096", "--batch", "4", "--gpu", "A100-80GB", "--json")
    res = json.loads(out)
    assert code == 0 and res["params"] == 6_738_415_616 and res["gpu"] == "A100-80GB"
    assert res["parts"]["weights"] == 2 * 6_738_415_616 and res["total"] == sum(res["parts"].values())
    assert res["to_fit"]["steps"] and {r["gpu"] for r in res["fits"]} >= {"T4", "L4", "H100-80GB", "MI300X"}


def test_cli_memory_from_flags_and_human_output():
    code, out, _ = _cli("memory", "--params", "7B", "--layers", "32", "--hidden", "4096", "--lora-rank", "16",
                        "--qlora", "--checkpointing", "--gpu", "RTX4090")
    assert code == 0 and "QLoRA r=16" in out and "RTX 4090: fits" in out and "Korthikanti" in out
    code, out, _ = _cli("memory", "--layers", "32", "--hidden", "4096", "--gpus", "8", "--fsdp", "full", "--json")
    assert json.loads(out)["plan"]["zero"] == 3


def test_cli_checkpoint_and_mfu(llama):
    code, out, _ = _cli("checkpoint", str(llama), "--every", "500", "--steps", "20000", "--milestone-every", "5000",
                        "--json")
    res = json.loads(out)
    assert code == 0 and res["retention"]["saves"] == 40 and res["retention"]["kept"] == 6
    assert res["per_save"]["weights"] == 2 * 6_738_415_616
    code, out, _ = _cli("mfu", str(llama), "--seq", "4096", "--step-time", "2.0", "--global-batch", "8",
                        "--gpu", "A100", "--gpus", "8", "--json")
    res = json.loads(out)
    assert code == 0 and res["tokens_per_s"] == 8 * 4096 / 2.0 and res["gpu"] == "A100-80GB"
    code, out, _ = _cli("mfu", str(llama), "--seq", "4096", "--tokens-per-s", "3200", "--gpu", "H100")
    assert code == 0 and "MFU" in out and "14.9%" in out, out  # 15.2% when the embedding lookup counted as a matmul


@pytest.mark.parametrize("args, expect", [
    (["mfu", "--layers", "2", "--hidden", "64", "--tokens-per-s", "10", "--gpu", "X100"],
     "unknown GPU 'X100'; known: T4, V100-16GB"),
    (["memory", "--layers", "-3", "--hidden", "64"], "--layers must be positive, got -3"),
    (["memory", "--params=-7B", "--layers", "3", "--hidden", "64"], "--params must be a positive number"),
    (["memory", "--params", "7B", "--lora-rank", "16"], "--lora-rank needs the model's shape"),
    (["checkpoint", "--params", "7B", "--lora-rank", "16"], "--params alone does not say what the LoRA adapters"),
    (["memory", "--layers", "2", "--hidden", "64", "--batch", "0"], "--batch must be a positive whole number"),
    (["memory", "--layers", "2", "--hidden", "64", "--precision", "fp8"], "unknown --precision 'fp8'; known: fp32"),
    (["memory", "--layers", "2", "--hidden", "64", "--qlora"], "--qlora needs --lora-rank"),
    (["memory", "--layers", "2", "--hidden", "64", "--zero", "4"], "--zero must be 0, 1, 2 or 3"),
    (["memory", "--layers", "2", "--hidden", "64", "--heads", "3", "--kv-heads", "2"], "must be a multiple"),
    (["checkpoint", "--layers", "2", "--hidden", "64", "--every", "0"], "--every must be a positive"),
    (["mfu", "--layers", "2", "--hidden", "64", "--tokens-per-s", "-5", "--gpu", "H100"], "must be positive"),
    (["mfu", "--layers", "2", "--hidden", "64", "--gpu", "H100"], "give --tokens-per-s, or --step-time"),
    (["memory", "missing/config.json"], "missing/config.json: no such file"),
])
def test_cli_errors_are_one_line_exit_2(args, expect):
    code, _, err = _cli(*args)
    assert code == 2 and expect in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_config_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = _cli("memory", str(bad))
    assert code == 2 and "not a readable JSON config" in err
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    code, _, err = _cli("memory", str(bad))
    assert code == 2 and "no layers in the config" in err


def test_memory_from_a_parameter_count_alone():
    """`estimate memory --params 7e9`: weights, gradients and optimizer states need only the count (the same
    bytes as from a full shape of that count); the activations are named as not estimated, with what they need."""
    from stethoscope.debug.estimate.memory import model_states

    code, out, err = _cli("memory", "--params", "7e9", "--json")
    res = json.loads(out)
    assert code == 0 and not err and res["params"] == 7_000_000_000
    assert res["parts"] == {"weights": 14e9, "gradients": 14e9, "master_weights": 28e9, "optimizer_states": 56e9}
    assert res["total"] == 112e9 and "activations" not in res["parts"]
    assert "--layers and --hidden" in res["not_estimated"][0] and "34·s·b·h" in res["not_estimated"][0]
    shape = from_numbers(layers=32, hidden=4096, heads=32, intermediate=11008)
    for plan in (Plan(), Plan(precision="fp32", optimizer="sgd"), Plan(gpus=8, zero=1), Plan(gpus=8, zero=3),
                 Plan(precision="bf16", optimizer="adamw-8bit", gpus=4, zero=2)):
        full, alone = estimate(shape, plan)["parts"], model_states(shape.params, plan)["parts"]
        assert {k: v for k, v in alone.items() if v} == {k: full[k] for k in alone if full[k]}, plan
    code, out, _ = _cli("memory", "--params", "7B", "--gpu", "H100", "--gpus", "8", "--zero", "3")
    assert code == 0 and "total before activations" in out and "not estimated: activations" in out
    assert "H100-80GB 61.68 GiB" in out and "gathered whole" in out


def test_checkpoint_and_mfu_from_a_parameter_count_alone():
    """`estimate checkpoint --params 7B` and `estimate mfu --params 7B` used to exit 2 asking for the shape. A full
    fine-tune's save needs the count only (the same bytes as from a full shape of that count); MFU from the count
    is 6·N with no attention term, and says so."""
    from stethoscope.debug.estimate import checkpoint as ck

    shape = from_numbers(layers=32, hidden=4096, heads=32, intermediate=11008)
    code, out, err = _cli("checkpoint", "--params", str(shape.params), "--json")
    assert code == 0 and not err, err
    assert json.loads(out)["per_save"] == ck.per_save(shape, Plan())
    code, out, _ = _cli("mfu", "--params", "7e9", "--tokens-per-s", "3000", "--gpu", "H100", "--json")
    res = json.loads(out)
    assert code == 0 and res["flops_per_token"] == 6 * 7e9 and res["attention_flops_per_token"] == 0
    assert "--layers and --hidden" in res["note"]
    code, out, _ = _cli("mfu", "--params", "7e9", "--tokens-per-s", "3000", "--gpu", "H100")
    assert code == 0 and "12.7%" in out and "note: 6·N from the parameter count alone" in out
