"""`estimate memory` against the real peak memory of one training step of tiny HF models on CPU.

Each case runs in a fresh process: build the model (fp32), note the RSS, run one step (forward,
backward, AdamW step: gradients, optimizer states and activations come and go), read the peak RSS
(ru_maxrss) and report peak − before against the estimate of everything but the weights (gradients +
optimizer states + activations + logits). The CPU allocator returns large blocks to the OS (glibc
mmap), so the peak RSS is the step's real high-water mark, plus allocator and framework overhead.

    python bench/estimate_memory.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

CASES = [  # (family, layers, hidden, heads, kv_heads, intermediate, vocab, seq, batch, attention, checkpointing)
    ("llama", 4, 512, 8, 4, 1376, 8000, 512, 4, "sdpa", False),
    ("llama", 4, 512, 8, 4, 1376, 8000, 512, 4, "eager", False),
    ("llama", 8, 512, 8, 8, 1376, 8000, 1024, 4, "sdpa", True),
    ("gpt2", 4, 512, 8, 8, 2048, 8000, 512, 4, "eager", False),
]

CHILD = r"""
import json, os, resource, sys
import psutil, torch, transformers
torch.set_num_threads(1)
fam, L, h, a, kv, i, V, s, b, attn, ckpt = json.loads(sys.argv[1])
if fam == "llama":
    cfg = transformers.LlamaConfig(hidden_size=h, intermediate_size=i, num_attention_heads=a, num_key_value_heads=kv,
        num_hidden_layers=L, vocab_size=V, max_position_embeddings=s, attn_implementation=attn)
else:
    cfg = transformers.GPT2Config(n_embd=h, n_head=a, n_layer=L, vocab_size=V, n_positions=s, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu", bos_token_id=0, eos_token_id=0,
        attn_implementation=attn)
model = transformers.AutoModelForCausalLM.from_config(cfg)
if ckpt:
    import warnings
    warnings.simplefilter("ignore")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, V, (b, s))
before = psutil.Process().memory_info().rss
assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 <= before * 1.05
loss = model(input_ids=ids, labels=ids).loss
loss.backward()
opt.step()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"delta": peak - before, "params": sum(p.numel() for p in model.parameters())}))
"""


def main() -> None:
    from stethoscope.debug.estimate import Plan, estimate, from_numbers

    print(f"{'case':<44} {'measured MiB':>12} {'estimated MiB':>13} {'error':>7}")
    for case in CASES:
        fam, L, h, a, kv, i, V, s, b, attn, ckpt = case
        res = subprocess.run([sys.executable, "-c", CHILD, json.dumps(case)], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        if res.returncode != 0:
            raise SystemExit(res.stderr[-2000:])
        got = json.loads(res.stdout.strip().splitlines()[-1])
        if fam == "llama":
            shape = from_numbers(layers=L, hidden=h, heads=a, kv_heads=kv, intermediate=i, vocab=V)
        else:
            shape = from_numbers(layers=L, hidden=h, heads=a, vocab=V, gated=False, biases=True, tied=True,
                                 positions=s, intermediate=i)
        assert shape.params == got["params"], (shape.params, got["params"])
        est = estimate(shape, Plan(batch=b, seq=s, precision="fp32", attention="flash" if attn == "sdpa" else "eager",
                                   checkpointing=ckpt))
        expected = est["total"] - est["parts"]["weights"]
        name = f"{fam} L{L} h{h} s{s} b{b} {attn}{' ckpt' if ckpt else ''}"
        print(f"{name:<44} {got['delta'] / 2**20:>12.1f} {expected / 2**20:>13.1f} "
              f"{100 * (got['delta'] - expected) / expected:>+6.0f}%")


if __name__ == "__main__":
    main()
