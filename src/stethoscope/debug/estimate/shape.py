"""A transformer's shape, from a local HF config.json or from numbers a person gives, and its
parameter count layer by layer (exact for the Llama/Mistral/Qwen and GPT-2 families)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stethoscope.errors import InputError, UsageError

# Families with a gated MLP (gate, up, down: 3 matrices of hidden x intermediate) and RMSNorm.
_GATED = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text",
          "phi3", "olmo", "olmo2", "cohere", "granite", "deepseek_v2", "deepseek_v3", "internlm2", "starcoder2_gated"}
# Families whose linear layers and LayerNorms carry biases, and which learn absolute position embeddings.
_BIASED = {"gpt2", "gpt_neox", "gptj", "opt", "bert", "roberta", "gpt_bigcode", "bloom", "falcon", "phi"}
_LEARNED_POSITIONS = {"gpt2", "opt", "gpt_bigcode", "bert", "roberta"}
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "kv_heads": ("num_key_value_heads", "n_kv_heads", "num_kv_heads"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "positions": ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "active_experts": ("num_experts_per_tok", "moe_topk", "num_selected_experts"),
    "head_dim": ("head_dim",),
}
_DROPOUT_KEYS = ("attention_dropout", "attn_pdrop", "hidden_dropout", "resid_pdrop", "dropout", "hidden_dropout_prob")


@dataclass(frozen=True)
class ModelShape:
    """What the estimators need to know about a decoder-only transformer."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    intermediate: int
    kv_heads: int
    gated_mlp: bool = True
    biases: bool = False
    tied_embeddings: bool = False
    learned_positions: int = 0  # rows of a learned position-embedding table (GPT-2); 0 for RoPE
    experts: int = 1
    active_experts: int = 1  # experts each token passes through (MoE top-k)
    dropout: bool = False
    head_dim: int = 0  # 0: hidden / heads
    params_override: int | None = field(default=None, compare=False)  # --params when given
    name: str = "model"

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "vocab", "intermediate", "kv_heads", "experts"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise UsageError(f"{key} must be a positive whole number, got {value}")
        if self.heads % self.kv_heads:
            raise UsageError(f"attention heads ({self.heads}) must be a multiple of key/value heads ({self.kv_heads})")
        if self.params_override is not None and self.params_override < 1:
            raise UsageError(f"--params must be positive, got {self.params_override}")

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer in one transformer block, per expert for the MLP ones."""
        q, kv = self.heads * self.dim_head, self.kv_heads * self.dim_head
        out = {"q_proj": (self.hidden, q), "k_proj": (self.hidden, kv), "v_proj": (self.hidden, kv),
               "o_proj": (q, self.hidden)}
        if self.gated_mlp:
            out.update(gate_proj=(self.hidden, self.intermediate), up_proj=(self.hidden, self.intermediate),
                       down_proj=(self.intermediate, self.hidden))
        else:
            out.update(up_proj=(self.hidden, self.intermediate), down_proj=(self.intermediate, self.hidden))
        return out

    def layer_params(self) -> int:
        """Parameters of one block: attention, MLP (times experts, plus router), norms, biases."""
        total = 0
        for name, (i, o) in self.linear_shapes().items():
            n = i * o + (o if self.biases else 0)
            total += n * (self.experts if name in ("gate_proj", "up_proj", "down_proj") else 1)
        if self.experts > 1:
            total += self.hidden * self.experts
        return total + 2 * self.norm_params()

    def norm_params(self) -> int:
        return 2 * self.hidden if self.biases else self.hidden  # LayerNorm has a bias, RMSNorm has none

    def embedding_params(self) -> int:
        """Token embeddings, learned positions, the final norm and the output head (when not tied)."""
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + self.learned_positions * self.hidden + self.norm_params() + head

    def linear_params(self) -> int:
        """Parameters inside the blocks' linear layers (what LoRA targets and 4-bit quantization packs)."""
        per = sum(i * o * (self.experts if n in ("gate_proj", "up_proj", "down_proj") else 1)
                  for n, (i, o) in self.linear_shapes().items())
        return per * self.layers

    @property
    def params(self) -> int:
        if self.params_override is not None:
            return self.params_override
        return self.layers * self.layer_params() + self.embedding_params()

    @property
    def active_params(self) -> int:
        """Parameters one token passes through: all of them, less the experts it is not routed to."""
        if self.experts <= 1:
            return self.params
        mlp = sum(i * o for n, (i, o) in self.linear_shapes().items() if n in ("gate_proj", "up_proj", "down_proj"))
        return self.params - self.layers * mlp * (self.experts - min(self.active_experts, self.experts))


    @property
    def matmul_params(self) -> int:
        """Parameters one token multiplies a matrix with (what 6·N counts): the blocks' linear weights (the
        experts it is routed to, the router) and the output head; not the looked-up input embedding (unless
        tied to the head), learned positions, biases nor norms."""
        lookups = (0 if self.tied_embeddings else self.vocab * self.hidden) + self.learned_positions * self.hidden
        if self.params_override is not None:
            return max(1, self.active_params - lookups)
        active = min(self.active_experts, self.experts)
        per = sum(i * o * (active if n in ("gate_proj", "up_proj", "down_proj") else 1)
                  for n, (i, o) in self.linear_shapes().items())
        router = self.hidden * self.experts if self.experts > 1 else 0
        return self.layers * (per + router) + self.vocab * self.hidden


def from_config(path: str | Path, **overrides: Any) -> ModelShape:
    """The shape in a HF config.json (or a folder holding one); `overrides` win over its values."""
    p = Path(path)
    file = p / "config.json" if p.is_dir() else p
    try:
        config = json.loads(file.read_text())
    except FileNotFoundError:
        raise InputError(file, "no such file (expected a HF config.json or a folder holding one)") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(file, f"not a readable JSON config ({exc})") from None
    if not isinstance(config, dict):
        raise InputError(file, "expected a JSON object (a HF config.json)")
    config = config.get("text_config", config) if isinstance(config.get("text_config"), dict) else config
    values = {key: _value(config, keys) for key, keys in _KEYS.items()}
    model_type = str(config.get("model_type", ""))
    for key in ("layers", "hidden", "heads", "vocab"):
        if values[key] is None and overrides.get(key) is None:
            raise InputError(file, f"no {key} in the config (looked for {', '.join(_KEYS[key])})")
    return from_numbers(name=model_type or file.parent.name,
                        gated=model_type in _GATED or (model_type not in _BIASED and config.get("hidden_act") == "silu"),
                        biases=model_type in _BIASED,
                        tied=bool(config.get("tie_word_embeddings", model_type in ("gpt2", "gemma", "gemma2"))),
                        positions=values["positions"] if model_type in _LEARNED_POSITIONS else 0,
                        dropout=any(isinstance(config.get(k), (int, float)) and config[k] > 0 for k in _DROPOUT_KEYS),
                        **{k: v for k, v in values.items() if k != "positions"} | {k: v for k, v in overrides.items()
                                                                                    if v is not None})


def _value(config: dict, keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def from_numbers(layers: int | None, hidden: int | None, vocab: int | None = 32000, heads: int | None = None,
                 kv_heads: int | None = None, intermediate: int | None = None, params: int | None = None,
                 gated: bool = True, biases: bool = False, tied: bool = False, positions: int = 0,
                 experts: int | None = None, active_experts: int | None = None, dropout: bool = False, head_dim: int | None = None,
                 name: str = "model") -> ModelShape:
    """A shape from flags: heads default to hidden/128, the MLP to Llama's 8/3·hidden (4·hidden ungated)."""
    if layers is None or hidden is None:
        raise UsageError("give a config.json, or --layers and --hidden (with --vocab, --heads, ... as known)")
    if hidden < 1 or layers < 1:
        raise UsageError(f"--layers and --hidden must be positive, got {layers} and {hidden}")
    heads = heads or max(1, hidden // 128)
    if intermediate is None:
        intermediate = (256 * math.ceil(8 * hidden / 3 / 256)) if gated else 4 * hidden
    return ModelShape(layers=layers, hidden=hidden, heads=heads, vocab=vocab or 32000, intermediate=intermediate,
                      kv_heads=kv_heads or heads, gated_mlp=gated, biases=biases, tied_embeddings=tied,
                      learned_positions=positions, experts=experts or 1,
                      active_experts=(active_experts or 2) if (experts or 1) > 1 else 1, dropout=dropout, head_dim=head_dim or 0,
                      params_override=params, name=name)


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)


def parse_count(text: str | int | None, what: str = "--params") -> int | None:
    """'7B', '125M', '6.7e9', '1.5k' as a whole number; None stays None."""
    if text is None or isinstance(text, int):
        if isinstance(text, int) and text < 1:
            raise UsageError(f"{what} must be positive, got {text}")
        return text
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"{what} must be a positive number like 7B, 125M or 6.7e9, got {text!r}")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[m.group(2).lower()]
    if value < 1:
        raise UsageError(f"{what} must be at least 1, got {text!r}")
    return int(round(value))
