"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"), as published.

Chapter 1's GPT-1 with GPT-2 §2.3's changes; generation is in generate.py. Shapes: B batch, T positions,
S keys attended (T, plus any cached), C = n_embd, nh = n_head, hs = C // nh, V vocabulary size.
"""

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
from torch import Tensor
from torch.nn import functional as F

from common.errors import CourseError
from common.training import checkpoint as ckpt

IGNORE = -100


@dataclass
class GPTConfig:
    """The defaults are the paper's smallest model."""

    vocab_size: int = 50257  # PAPER: GPT-2 §2.2: 256 bytes + 50,000 merges + <|endoftext|>
    block_size: int = 1024  # PAPER: GPT-2 §2.3: context of 1,024 tokens
    n_layer: int = 12  # PAPER: GPT-2 Table 2
    n_head: int = 12  # openai/gpt-2 hparams.json (the paper lists no heads)
    n_embd: int = 768  # PAPER: GPT-2 Table 2: d_model
    dropout: float = 0.1  # transformers' gpt2 config.json; OpenAI's code has none
    fast_attention: bool = True  # False: the explicit masked softmax; same numbers, slower

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise CourseError(
                f"error: n_embd ({self.n_embd}) is not divisible by n_head ({self.n_head}); "
                "choose sizes where every head gets n_embd / n_head dimensions"
            )


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees only positions 0..t.

    The explicit path is the one to read, the fused kernel the one to run. While generating, a cache adds
    the earlier positions' keys and values.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.fast = config.fast_attention
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # q, k, v of all heads in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.cache = None  # a KVCache while generate.py runs
        if not self.fast:
            # Not persistent: a function of block_size, not a learned weight.
            ones = torch.ones(config.block_size, config.block_size, dtype=torch.bool)
            self.register_buffer("mask", torch.tril(ones), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if self.cache is not None:
            k, v = self.cache.append(k, v)  # (B, nh, S, hs)
        S = k.size(2)
        if self.fast:
            dropout_p = self.dropout if self.training else 0.0
            # S > T only for one new token after cached ones, which may see every key.
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p,
                                               is_causal=S == T)  # (B, nh, T, hs)
        else:
            # PAPER: Vaswani et al. 2017 §3.2.1, Eq. 1: softmax(QK^T / sqrt(d_k)) V, d_k = hs.
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, S)
            # The T queries are the last T of the S positions.
            att = att.masked_fill(~self.mask[S - T : S, :S], float("-inf"))  # (B, nh, T, S)
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """The position-wise feed-forward network, 4x wider inside."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        # PAPER: GPT-1 §4.1: GELU; tanh form, as the released weights expect.
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


class Block(nn.Module):
    """One decoder block: attention lets tokens read each other, then the MLP works on each token alone.

    LayerNorm's eps is PyTorch's default 1e-5, as in openai/gpt-2.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, C) -> (B, T, C)
        # PAPER: GPT-2 §2.3: LayerNorm at the input of each sub-block; the residual path stays a plain sum.
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """The language model: token ids (B, T) -> next-token logits (B, T, V)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # PAPER: GPT-1 §4.1: learned positions
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        # PAPER: GPT-2 §2.3: a final LayerNorm, since a pre-LN stack ends in a raw residual sum.
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-1 and the released weights
        self.init_weights()

    def init_weights(self) -> None:
        """GPT-2's initialisation of every weight; its own method, for `learn start 2.scaled_init`."""
        self.apply(self._init_weights)
        # PAPER: GPT-2 §2.3: residual layers start 1/sqrt(N) smaller; N = 2 * n_layer (attention and MLP each
        # add once). After the N(0, 0.02) pass, which would overwrite it.
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # PAPER: GPT-1 §4.1: N(0, 0.02). Biases start at zero; LayerNorms keep PyTorch's identity.
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def hidden_states(self, idx: Tensor, start: int = 0) -> Tensor:
        """Final states (B, T, C) before the head. `start` is idx's first position: after a cached prefix
        (generate.py) the number of positions the caches hold, otherwise 0."""
        B, T = idx.shape
        if start + T > self.config.block_size:
            raise ValueError(f"sequence of {start + T} tokens is longer than block_size "
                             f"{self.config.block_size}")
        pos = torch.arange(start, start + T, device=idx.device)  # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C) + (T, C) broadcast -> (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        return self.ln_f(x)  # (B, T, C)

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits (B, T, V) for the token after each position, and with targets (B, T) the mean cross-entropy.

        Targets equal to IGNORE are left out of the mean.
        """
        logits = self.lm_head(self.hidden_states(idx))  # (B, T, V)
        if targets is None:
            return logits, None
        # PAPER: GPT-2 §2, Eq. 1: p(x) = prod_n p(s_n | s_1, ..., s_{n-1}); the loss is the mean -log p.
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),  # (B*T, V), (B*T,)
                               ignore_index=IGNORE)
        return logits, loss

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Parameters, a tied head once; non_embedding=True: Kaplan et al.'s N, without wte, wpe, lm_head."""
        params = {id(p): p for p in self.parameters()}
        if non_embedding:
            for p in (self.wte.weight, self.wpe.weight, self.lm_head.weight):
                params.pop(id(p), None)
        return sum(p.numel() for p in params.values())

    def flops_per_token(self) -> float:
        """Training FLOPs per token as Kaplan et al. 2020 (Table 1) count them, plus the output head they
        leave out: negligible at their sizes, a big share of a small model's work."""
        c = self.config
        matmul_weights = self.num_parameters(non_embedding=True) + c.vocab_size * c.n_embd
        return 6 * matmul_weights + 6 * c.n_layer * c.block_size * c.n_embd

    @classmethod
    def from_checkpoint(cls, spec: str | Path, out_dir: str | Path = ".", device: str | torch.device = "cpu"
                        ) -> tuple["GPT", dict]:
        """The model of a train.py checkpoint, in eval mode on `device`, and the checkpoint itself.
        `spec` is a checkpoint's path, or "latest" in `out_dir`."""
        path, state = ckpt.open_checkpoint(str(spec), Path(out_dir), PREFIX, kind=KIND, map_location=device)
        model = cls(GPTConfig(**state["model_config"]))
        model.load_state_dict(ckpt.clean_state_dict(state["model"]))
        print(f"loaded {path} (step {state['step']})")
        return model.to(device).eval(), state


# Our own checkpoints: train.py writes them, from_checkpoint reads them.

KIND = "project2/gpt2"  # saved in every checkpoint, so another chapter's file is refused
PREFIX = "gpt2"  # checkpoints/project2/gpt2_iter{N}_loss{L}.pt
