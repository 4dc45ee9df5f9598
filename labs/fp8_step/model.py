"""A compact GPT-style causal LM whose Linear layers are pluggable, and its synthetic data.

One definition serves every precision the fp8-step lab compares:
- BF16 reference: `torch_linear` under torch.autocast(bfloat16);
- emulated FP8 (any device): `fp8_linear_factory(recipe)` builds labs.numerics.fp8_linear.Fp8Linear;
- Transformer Engine (FP8 GPU): labs.fp8_step.te's `te_linear_factory()` builds te.Linear, run under
  te.autocast.
Only the four GEMMs per block (qkv, attention projection, MLP in/out) are swapped: embeddings,
norms, attention's softmax path and the output head stay in higher precision, as in TE recipes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# (in_features, out_features, bias, name) -> module mapping (..., in) to (..., out)
LinearFactory = Callable[[int, int, bool, str], nn.Module]


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 32  # token ids 0..vocab-1; the stride task counts modulo vocab
    seq: int = 32  # context length (learned positions, so generation crops to it)
    d_model: int = 64  # residual width; FP8 GEMMs on TE want multiples of 16
    n_layers: int = 2  # transformer blocks
    n_heads: int = 4  # attention heads; head size = d_model / n_heads
    ffn: int = 256  # MLP hidden width (4 x d_model is the GPT-2 habit)
    bias: bool = True  # biases on the swapped Linear layers

    def __post_init__(self):
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model({self.d_model}) % n_heads({self.n_heads}) != 0: heads must split the width evenly"
            )


def torch_linear(in_features: int, out_features: int, bias: bool, name: str) -> nn.Module:
    return nn.Linear(in_features, out_features, bias=bias)


def fp8_linear_factory(recipe, collect: bool = True, accumulator=None) -> LinearFactory:
    """Emulated FP8 Linear layers sharing one recipe (and accumulator model); each keeps its own quantizer state."""
    from labs.numerics.fp8_linear import Fp8Linear

    def make(in_features: int, out_features: int, bias: bool, name: str) -> nn.Module:
        return Fp8Linear(
            in_features, out_features, bias=bias, recipe=recipe, name=name, collect=collect, accumulator=accumulator
        )

    return make


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, make_linear: LinearFactory, prefix: str):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = make_linear(cfg.d_model, 3 * cfg.d_model, cfg.bias, f"{prefix}.qkv")
        self.proj = make_linear(cfg.d_model, cfg.d_model, cfg.bias, f"{prefix}.proj")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        hs = C // self.n_heads
        q = q.view(B, T, self.n_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        # Softmax attention stays in higher precision (TE's fp8_dpa is off by default too).
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig, make_linear: LinearFactory, prefix: str):
        super().__init__()
        self.fc_in = make_linear(cfg.d_model, cfg.ffn, cfg.bias, f"{prefix}.fc_in")
        self.fc_out = make_linear(cfg.ffn, cfg.d_model, cfg.bias, f"{prefix}.fc_out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))  # (B, T, ffn) inside, (B, T, C) out


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, make_linear: LinearFactory, prefix: str):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg, make_linear, f"{prefix}.attn")
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg, make_linear, f"{prefix}.mlp")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # (B, T, C), pre-norm residual
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, make_linear: LinearFactory = torch_linear):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, make_linear, f"blocks.{i}") for i in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)  # output head: never FP8
        self.apply(self._init_weights)
        # GPT-2's scaled init on the residual projections keeps the stream's variance flat.
        for name, p in self.named_parameters():
            if name.endswith(("attn.proj.weight", "mlp.fc_out.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        elif isinstance(weight := getattr(m, "weight", None), torch.Tensor) and weight.dim() == 2:
            nn.init.normal_(weight, mean=0.0, std=0.02)
            if isinstance(bias := getattr(m, "bias", None), torch.Tensor):
                nn.init.zeros_(bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)  # (T,)
        h = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, C)
        for blk in self.blocks:
            h = blk(h)  # (B, T, C)
        return self.head(self.ln_f(h))  # (B, T, vocab)

    def gemm_layers(self) -> list[tuple[str, nn.Module]]:
        """The swappable Linear layers in forward order (the ones FP8 applies to)."""
        names = ("attn.qkv", "attn.proj", "mlp.fc_in", "mlp.fc_out")
        return [(n, m) for n, m in self.named_modules() if n.endswith(names)]

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, pad_to: int = 1) -> torch.Tensor:
        """Greedy continuation of (B, T0) prompts; returns (B, T0 + n_new).

        pad_to > 1 right-pads each window to a multiple of it (TE's FP8 GEMMs need aligned
        shapes). Causal attention keeps the padding from changing the positions that are read.
        """
        idx = prompt
        for _ in range(n_new):
            window = idx[:, -self.cfg.seq :]  # (B, T)
            t = window.shape[1]
            padded = min(self.cfg.seq, -(-t // pad_to) * pad_to) if pad_to > 1 else t
            if padded > t:
                window = torch.cat([window, window[:, -1:].expand(-1, padded - t)], dim=1)  # (B, T')
            logits = self(window)  # (B, T', vocab)
            nxt = logits[:, t - 1].float().argmax(-1, keepdim=True)  # (B, 1), last real position
            idx = torch.cat([idx, nxt], dim=1)
        return idx


def stride_batch(gen: torch.Generator, batch: int, seq: int, vocab: int, max_stride: int = 6):
    """Arithmetic sequences (phase + stride * t) % vocab: the next token follows from the last two.

    Returns inputs and next-token targets, each (batch, seq) int64 on the CPU.
    """
    phase = torch.randint(0, vocab, (batch, 1), generator=gen)
    stride = torch.randint(1, max_stride + 1, (batch, 1), generator=gen)
    t = torch.arange(seq + 1).unsqueeze(0)  # (1, seq+1)
    tokens = (phase + stride * t) % vocab  # (batch, seq+1)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
