"""The memory estimator against real tiny HF models trained on CPU.

Exactly countable: weights, gradients and AdamW states are tensor storages after one optimizer step;
their bytes must equal the estimate (parameter count from the config, 4+4+8 bytes per parameter in
fp32). Activations: the storages autograd saves for backward (a saved-tensors hook), against the
Korthikanti-style count plus the fp32 log-probs cross-entropy keeps. Measured at these sizes: HF Llama
+18-20% (its RMSNorm and rotary embeddings keep extra copies), GPT-2 with exact GELU +5-17%; the tolerance
below is what docs/before-the-run.md states.
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from stethoscope.debug.estimate import Plan, estimate, from_numbers  # noqa: E402

L, H, A, V, S, B = 2, 128, 4, 500, 128, 2
ACTIVATION_TOLERANCE = (0.95, 1.25)  # measured / estimated, as stated in docs/before-the-run.md


def _llama(attn: str) -> tuple[object, object]:
    cfg = transformers.LlamaConfig(hidden_size=H, intermediate_size=344, num_attention_heads=A, num_key_value_heads=2,
                                   num_hidden_layers=L, vocab_size=V, max_position_embeddings=S,
                                   attn_implementation=attn)
    return (transformers.LlamaForCausalLM(cfg),
            from_numbers(layers=L, hidden=H, heads=A, kv_heads=2, intermediate=344, vocab=V))


def _gpt2(attn: str) -> tuple[object, object]:
    cfg = transformers.GPT2Config(n_embd=H, n_head=A, n_layer=L, vocab_size=V, n_positions=S, resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu",
                                  bos_token_id=0, eos_token_id=0, attn_implementation=attn)
    return (transformers.GPT2LMHeadModel(cfg),
            from_numbers(layers=L, hidden=H, heads=A, vocab=V, gated=False, biases=True, tied=True, positions=S,
                         intermediate=4 * H))


def _storage_bytes(tensors) -> int:
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


@pytest.mark.parametrize("build", [_llama, _gpt2], ids=["llama", "gpt2"])
def test_weights_gradients_optimizer_states_are_exact(build):
    torch.manual_seed(0)
    model, shape = build("eager")
    assert sum(p.numel() for p in model.parameters()) == shape.params
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, V, (B, S))
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    params = list(model.parameters())
    states = [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    parts = estimate(shape, Plan(batch=B, seq=S, precision="fp32", optimizer="adamw"))["parts"]
    assert _storage_bytes(params) == parts["weights"]
    assert _storage_bytes(p.grad for p in params) == parts["gradients"]
    assert _storage_bytes(states) == parts["optimizer_states"]
    assert parts["master_weights"] == 0


def _saved_for_backward(model, ids) -> int:
    """Bytes of the distinct storages autograd keeps for backward, parameters excluded."""
    seen: dict[int, int] = {}
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return sum(seen.values())


@pytest.mark.parametrize("build", [_llama, _gpt2], ids=["llama", "gpt2"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_activations_within_the_stated_tolerance(build, attn):
    torch.manual_seed(0)
    model, shape = build(attn)
    ids = torch.randint(0, V, (B, S))
    measured = _saved_for_backward(model, ids)
    plan = Plan(batch=B, seq=S, precision="fp32", attention="eager" if attn == "eager" else "flash")
    estimated = estimate(shape, plan)["parts"]["activations"] + 4 * S * B * V  # + the log-probs cross-entropy keeps
    lo, hi = ACTIVATION_TOLERANCE
    assert lo <= measured / estimated <= hi, (measured, estimated, measured / estimated)


def test_checkpointing_keeps_layer_inputs_only():
    torch.manual_seed(0)
    model, shape = _llama("sdpa")
    ids = torch.randint(0, V, (B, S))
    without = _saved_for_backward(model, ids)
    with warnings.catch_warnings():  # transformers 5 renames it activation_checkpointing_enable
        warnings.simplefilter("ignore", FutureWarning)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    measured = _saved_for_backward(model, ids)
    kept = estimate(shape, Plan(batch=B, seq=S, precision="fp32", checkpointing=True))["parts"]["activations"]
    log_probs = 4 * S * B * V
    # Forward keeps each layer's input (4·s·b·h per layer in fp32) and the loss's log-probs; the estimate
    # adds the one layer recomputed during backward, which forward never holds: an upper bound.
    assert L * 4 * S * B * H + log_probs <= measured <= kept + log_probs
    assert measured < 0.5 * without
