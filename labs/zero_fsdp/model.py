"""The model every strategy trains: a small pre-norm GPT. No collectives here; wrap.py applies parallelism."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape  # (B, T, d)
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)  # 3 x (B, T, d)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))  # (B, h, T, d/h)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, h, T, d/h)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))  # (B, T, d)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, *, layers: int, hidden: int, heads: int, vocab: int, seq: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))  # (B, T, d)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab)


def build(params, seed: int) -> TinyGPT:
    """The same weights on every rank and for every strategy: built on the CPU from the seed."""
    torch.manual_seed(seed)
    return TinyGPT(layers=params.layers, hidden=params.hidden, heads=params.heads, vocab=params.vocab, seq=params.seq)


def batch_for(params, rank: int) -> torch.Tensor:
    """Rank `rank`'s tokens: its own slice of one global batch, the same for every strategy and every step, so
    the loss falls within a few steps (the model memorises it) and any strategy that trains differently shows."""
    g = torch.Generator().manual_seed(params.seed + 1)
    tokens = torch.randint(0, params.vocab, (params.ranks * params.batch, params.seq + 1), generator=g)
    return tokens[rank * params.batch : (rank + 1) * params.batch]  # (batch, seq + 1)
