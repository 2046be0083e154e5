"""Tiny torch models with a fault at a known place, for the debug tools' tests."""

from __future__ import annotations

import torch


class Overflow(torch.nn.Module):
    """Identity, until `armed`: then its output is multiplied by inf (an overflow at a known module)."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * float("inf") if self.armed else x


class Block(torch.nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(d, d)
        self.act = Overflow()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(torch.relu(self.fc(x))) + x


class Net(torch.nn.Module):
    """inp -> blocks.0 -> blocks.1 -> head; every block has an `act` Overflow (all unarmed)."""

    def __init__(self, d_in: int = 8, d: int = 16, n: int = 2) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(d_in, d)
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))
        self.head = torch.nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


class LM(torch.nn.Module):
    """A Hugging Face-shaped model: model(input_ids=, labels=) -> {"loss", "logits"} (labels -100 ignored)."""

    def __init__(self, vocab: int = 10, d: int = 8) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.out = torch.nn.Linear(d, vocab)

    def forward(self, input_ids, labels):
        logits = self.out(self.emb(input_ids))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        return {"loss": loss, "logits": logits}


def net(seed: int = 0) -> Net:
    torch.manual_seed(seed)
    return Net()


def batch(i: int, n: int = 16, d_in: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(i)
    x = torch.randn(n, d_in, generator=g)
    return x, x.sum(1, keepdim=True)


def mse(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(out, y)


def hooks_left(model: torch.nn.Module) -> int:
    """Forward hooks on any module plus gradient hooks on any parameter."""
    n = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    return n + sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in model.parameters())
