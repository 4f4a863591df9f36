"""A small decoder written in plain PyTorch, for ``mxbi.torch.locate``
(docs/LOCATE.md): token embedding, per block an RMSNorm, causal attention
through ``F.scaled_dot_product_attention``, an RMSNorm and a SwiGLU MLP
through ``F.linear``; a final RMSNorm, the logits and ``log_softmax``.
Runs on the CPU and the GPU, in float32 and bfloat16.

Two planted defects, each a custom op (as a vendor or Triton kernel is
registered) whose reduction order depends on the batch size:

- ``plant="matmul"``: the MLP's up projection is ``mxbi_demo::splitk_linear``,
  which splits K in two halves once the batch exceeds 8;
- ``plant="rmsnorm"``: the MLP's norm is ``mxbi_demo::split_rms_norm``, whose
  sum of squares is split in two halves once the batch exceeds 8.

``PLANTED_KINDS`` tells ``locate`` what the custom ops compute.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

SPLIT_ABOVE = 8  # the planted ops split once the batch exceeds this

PLANTED_KINDS = {"mxbi_demo::splitk_linear": "linear", "mxbi_demo::split_rms_norm": "rms_norm"}


@torch.library.custom_op("mxbi_demo::splitk_linear", mutates_args=())
def splitk_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w.T``; K split in two halves (two GEMMs, then a sum) when the batch exceeds 8."""
    if x.shape[0] <= SPLIT_ABOVE:
        return F.linear(x, w)
    h = x.shape[-1] // 2
    return F.linear(x[..., :h].contiguous(), w[:, :h].contiguous()) + F.linear(x[..., h:].contiguous(), w[:, h:].contiguous())


@splitk_linear.register_fake
def _(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1] + (w.shape[0],))


def _serial_sum(sq: torch.Tensor) -> torch.Tensor:
    """Row sums over the last axis, term by term (as a one-thread-per-row kernel's loop)."""
    s = torch.zeros(sq.shape[:-1], dtype=sq.dtype, device=sq.device)
    for i in range(sq.shape[-1]):
        s = s + sq[..., i]
    return s


@torch.library.custom_op("mxbi_demo::split_rms_norm", mutates_args=())
def split_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in float32 with a serial sum of squares, split in two halves
    (two serial sums, then their sum) when the batch exceeds 8."""
    xf = x.float()
    k = x.shape[-1]
    sq = xf * xf
    if x.shape[0] <= SPLIT_ABOVE:
        s = _serial_sum(sq)
    else:
        h = k // 2
        s = _serial_sum(sq[..., :h]) + _serial_sum(sq[..., h:])
    r = torch.rsqrt(s[..., None] / k + eps)
    return (xf * r).to(x.dtype) * w


@split_rms_norm.register_fake
def _(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6, split: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps, self.split = eps, split

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.split:
            return split_rms_norm(x, self.weight, self.eps)
        xf = x.float()
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * r).to(x.dtype) * self.weight


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, h, d // h).transpose(1, 2)

        y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, s, d))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, split: bool = False):
        super().__init__()
        self.gate = nn.Parameter(torch.empty(hidden, dim))
        self.up = nn.Parameter(torch.empty(hidden, dim))
        self.down = nn.Parameter(torch.empty(dim, hidden))
        self.split = split

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        up = splitk_linear(x, self.up) if self.split else F.linear(x, self.up)
        return F.linear(F.silu(F.linear(x, self.gate)) * up, self.down)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, plant: Optional[str]):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp_norm = RMSNorm(dim, split=plant == "rmsnorm")
        self.mlp = MLP(dim, hidden, split=plant == "matmul")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    """``tokens [B, S] -> log-probabilities [B, S, vocab]`` (float32)."""

    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, hidden: int = 128, layers: int = 2,
                 plant: Optional[str] = None):
        super().__init__()
        if plant not in (None, "matmul", "rmsnorm"):
            raise ValueError(f"plant: expected None, 'matmul' or 'rmsnorm', got {plant!r}")
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            Block(dim, heads, hidden, plant if i == len(range(layers)) - 1 else None) for i in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        gen = torch.Generator().manual_seed(1234)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() > 1:
                    p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)
                else:
                    p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        return F.log_softmax(self.lm_head(self.norm(h)).float(), dim=-1)


def make_inputs(m: int, seq: int = 16, vocab: int = 256, target: int = 0, device: str = "cpu") -> torch.Tensor:
    """``[m, seq]`` token ids; sample ``target`` is the same at every ``m``
    (drawn from seed 0), the others from seed ``m``."""
    others = torch.randint(0, vocab, (m, seq), generator=torch.Generator().manual_seed(1000 + m))
    sample = torch.randint(0, vocab, (seq,), generator=torch.Generator().manual_seed(0))
    others[target] = sample
    return others.to(device)


def build(plant: Optional[str] = None, dtype: torch.dtype = torch.float32, device: str = "cpu",
          **sizes: int) -> Decoder:
    """The decoder in ``dtype`` on ``device``, eval mode (weights from seed 1234)."""
    return Decoder(plant=plant, **sizes).to(device=device, dtype=dtype).eval()
