"""FLOPs per token (the Monitor's perf/tflops and MFU, `estimate mfu`) against torch.utils.flop_counter,
which counts every matrix multiply of a real forward and backward: on the demo GPT and on a Llama-shaped
model (grouped-query attention, gated MLP, untied head) the formula must agree, the input embedding
being a lookup, not a matrix multiply."""

from __future__ import annotations

import pytest

from stethoscope.capture.throughput import flops_per_token

torch = pytest.importorskip("torch")


def _counted(model, x, targets=None) -> float:
    """Training FLOPs per token that torch counts (attention through the math kernel, which it sees)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        out = model(x, targets) if targets is not None else model(x)
        loss = out[1] if isinstance(out, tuple) else out.logits.float().pow(2).mean()
        loss.backward()
    return counter.get_total_flops() / x.numel()


def test_demo_gpt_flops_match_torchs_counter():
    from stethoscope.demo.gpt import GPTConfig, TinyGPT

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig(n_layer=2, n_embd=64, n_head=4, block_size=32, vocab_size=128))
    x = torch.randint(0, 128, (2, 32))
    counted = _counted(model, x, x)
    assert flops_per_token(model) == pytest.approx(counted, rel=1e-9)
    every = sum(p.numel() for p in model.parameters())  # the old 6N: the embedding lookups counted as matmuls
    assert 6 * every + 12 * 2 * 64 * 32 > 1.10 * counted  # 10% high


def test_llama_shaped_flops_match_torchs_counter_in_the_monitor_and_the_estimate():
    transformers = pytest.importorskip("transformers")
    from stethoscope.debug.estimate.gpus import gpu
    from stethoscope.debug.estimate.mfu import mfu
    from stethoscope.debug.estimate.shape import from_numbers

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config)
    counted = _counted(model, torch.randint(0, 1000, (2, 64)))
    assert flops_per_token(model, seq_len=64) == pytest.approx(counted, rel=1e-9)
    shape = from_numbers(layers=2, hidden=128, heads=4, kv_heads=2, intermediate=344, vocab=1000)
    assert shape.params == sum(p.numel() for p in model.parameters())
    assert mfu(shape, 64, 1000.0, gpu("H100"))["flops_per_token"] == pytest.approx(counted, rel=1e-9)
