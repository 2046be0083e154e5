"""The debug tools on a real Hugging Face model built from a config (no download): Llama, tiny."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from stethoscope.debug import locate_nonfinite, numerics  # noqa: E402
from tests.debug.models import Overflow, hooks_left  # noqa: E402

pytestmark = pytest.mark.slow  # importing transformers takes ~10 s on this machine


def _llama(eps=1e-6):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                   rms_norm_eps=eps)
    return transformers.LlamaForCausalLM(cfg)


def test_llama_under_bf16_autocast_an_overflowing_mlp_is_named():
    model = _llama()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids}
    clean = locate_nonfinite(model, batch)  # the loss is the ModelOutput's .loss
    assert not clean.found and clean.loss == pytest.approx(model(**batch).loss.item(), rel=1e-4)
    model.model.layers[1].mlp.act_fn = Overflow()
    model.model.layers[1].mlp.act_fn.armed = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rep = locate_nonfinite(model, batch)
    hit = rep.first_output
    assert hit.name == "model.layers.1.mlp.act_fn" and hit.inputs_finite and hit.dtype == "bfloat16"
    assert rep.first_grad is not None and hooks_left(model) == 0


def test_llama_rmsnorm_eps_for_float16():
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    rep = numerics(_llama(eps=1e-12).half(), {"input_ids": ids})
    norms = rep.of("norm")
    assert len(norms) == 5 and {i.kind for i in norms} == {"eps_too_small"}  # LlamaRMSNorm upcasts: a risk only
    assert numerics(_llama(eps=1e-6).half(), {"input_ids": ids}).of("norm") == []
