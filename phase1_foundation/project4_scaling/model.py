"""The scaling sweep's model: chapter 2's pre-LN GPT, small, and the counters of its N and C.

A scaling law relates loss to N, D and C, so N and C are counted the papers' ways: non_embedding_parameters is
Kaplan's N, flops_per_token the training FLOPs three ways (6N, Kaplan's Table 1, Chinchilla's App. F). No
dropout, KV cache or sampling controls: README, "The architecture".

Shapes: B batch, T sequence length, C = n_embd, nh = n_head, hs = C // nh head size, V vocabulary size.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch import Tensor
from torch.nn import functional as F

from common.errors import CourseError


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int = 128
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    fast_attention: bool = True  # False: the explicit masked softmax you can read; same numbers, slower

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise CourseError(f"error: n_embd ({self.n_embd}) is not divisible by n_head ({self.n_head}); "
                              "choose sizes where every head gets n_embd / n_head dimensions")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees only positions 0..t (chapter 2, without a cache)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.fast = config.fast_attention
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # queries, keys, values: all heads at once
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)  # mixes the heads' outputs

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if self.fast:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        else:
            # PAPER: Vaswani et al. 2017, Eq. 1: softmax(QKᵀ / √d_k) V, masked to the past
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, T)
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(diagonal=1)
            att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)  # rows sum to 1 over the past
            y = att @ v  # (B, nh, T, hs)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))  # (B, T, C)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's GELU
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


class Block(nn.Module):
    """Pre-LN, as GPT-2 §2.3 and the models of Kaplan et al. and Hoffmann et al."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, C) -> (B, T, C)
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, V); with targets, the mean cross-entropy too."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token embedding
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # learned positions
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied head, as GPT-2
        self.apply(self._init_weights)
        for name, param in self.named_parameters():  # GPT-2 §2.3: residual projections scaled by 1/sqrt(N)
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than block_size {self.config.block_size}")
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # (B*T, V), (B*T,)

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Counted from the tensors (a tied matrix once); the tests hold it equal to the formula below."""
        params = {id(p): p for p in self.parameters()}
        if non_embedding:
            for p in (self.wte.weight, self.wpe.weight, self.lm_head.weight):
                params.pop(id(p), None)  # the head too when it is untied: it is a table, not a layer
        return sum(p.numel() for p in params.values())

    @torch.inference_mode()
    def greedy(self, idx: Tensor, max_new_tokens: int) -> Tensor:
        """The likeliest next token, max_new_tokens times: (B, T) -> (B, max_new_tokens), the new tokens only.

        Every row of idx must be a real prompt of the same length; the caller cuts each at its stop token.
        """
        out = idx
        for _ in range(max_new_tokens):
            logits, _ = self(out[:, -self.config.block_size :])  # (B, T, V)
            out = torch.cat((out, logits[:, -1].argmax(-1, keepdim=True)), dim=1)  # (B, T + 1)
        return out[:, idx.size(1) :]


# --- counting N and C --------------------------------------------------------------------------------------

def non_embedding_parameters(n_layer: int, n_embd: int) -> int:
    """Kaplan's N, exact, from the shape alone (sweep.py plans by N without building a model): every weight,
    bias and LayerNorm parameter of the blocks and the final LayerNorm.

    PAPER: Kaplan et al. 2020, Eq. 2.1: N ≈ 12·n_layer·d_model², the weights alone. N leaves out the tables a
    token only looks up: token and position tables and the head, tied or untied (then a V x d table).
    """
    return n_layer * (12 * n_embd**2 + 13 * n_embd) + 2 * n_embd


def total_parameters(config: GPTConfig) -> int:
    """Every parameter of the model: N plus the tables a token looks up (the tied head is the token table)."""
    tables = (config.vocab_size + config.block_size) * config.n_embd
    return non_embedding_parameters(config.n_layer, config.n_embd) + tables


def flops_per_token(config: GPTConfig, method: str = "6N") -> float:
    """Training FLOPs (forward + backward) per token; the backward pass costs twice the forward.

    6N          C = 6ND: a multiply and an add per weight per token forward, twice that backward.
    kaplan      PAPER: Kaplan et al. 2020, Table 1: forward 2N + 2·n_layer·n_ctx·d_model (attention over a
                full context), times 3.
    chinchilla  PAPER: Hoffmann et al. 2022, App. F: every matmul, the embedding lookup and output head
                included, plus the softmax; biases, LayerNorms and nonlinearities left out; times 3.
    """
    n, d, L, V, T = (non_embedding_parameters(config.n_layer, config.n_embd), config.n_embd, config.n_layer,
                     config.vocab_size, config.block_size)
    if method == "6N":
        return 6.0 * n
    if method == "kaplan":
        return 3.0 * (2 * n + 2 * L * T * d)
    if method == "chinchilla":
        heads_width = d  # App. F's key_size x num_heads: all heads side by side
        attention = (2 * 3 * T * d * heads_width  # queries, keys, values
                     + 2 * T * T * heads_width  # query-key logits
                     + 3 * config.n_head * T * T  # softmax
                     + 2 * T * T * heads_width  # the weighted sum of values
                     + 2 * T * heads_width * d)  # output projection
        dense = 2 * T * (d * 4 * d + 4 * d * d)  # the MLP, ffw_size = 4·d_model
        forward = 2 * T * V * d + L * (attention + dense) + 2 * T * d * V  # embeddings, blocks, logits
        return 3.0 * forward / T
    raise ValueError(f"method must be '6N', 'kaplan' or 'chinchilla', not {method!r}")
