"""GPT-1 (Radford et al. 2018, "Improving Language Understanding by Generative Pre-Training"), as published.

Decoder blocks over learned token and position embeddings, the head tied to the token embedding. Each
block normalises after its residual additions (post-LN), so there is no final LayerNorm; `GPTConfig.pre_ln`
switches to GPT-2's pre-LN (exercise 1).
Shapes: B batch, T sequence length, C = n_embd, nh = n_head, hs = C // nh head size, V vocabulary size.
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

IGNORE = -100  # F.cross_entropy's ignore_index


@dataclass
class GPTConfig:
    """The defaults are the paper's model; the vocabulary comes from your tokenizer."""

    vocab_size: int  # PAPER: GPT-1 §4.1: 40,000 BPE merges (40,478 tokens released)
    block_size: int = 512  # PAPER: GPT-1 §4.1
    n_layer: int = 12  # PAPER: GPT-1 §4.1
    n_head: int = 12  # PAPER: GPT-1 §4.1
    n_embd: int = 768  # PAPER: GPT-1 §4.1 (MLP inner size 3072)
    dropout: float = 0.1  # PAPER: GPT-1 §4.1
    pre_ln: bool = False  # True: GPT-2's pre-LN and final LayerNorm (exercise 1)
    fast_attention: bool = True  # False: the explicit masked softmax; same numbers, slower
    causal: bool = True  # False only in exercise 2: every position also sees the future

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise CourseError(
                f"error: n_embd ({self.n_embd}) is not divisible by n_head ({self.n_head}); "
                "choose sizes where every head gets n_embd / n_head dimensions"
            )


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees only positions 0..t.

    The causal mask alone stops a decoder from reading the token it must predict. The explicit path is the
    one to read, the fused kernel (is_causal=True) the one to run.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.fast = config.fast_attention
        self.causal = config.causal
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # q, k, v of all heads in one matmul
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        if self.causal and not self.fast:
            # Not persistent: a function of block_size, not a learned weight.
            ones = torch.ones(config.block_size, config.block_size, dtype=torch.bool)
            self.register_buffer("mask", torch.tril(ones), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if self.fast:
            dropout_p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p,
                                               is_causal=self.causal)  # (B, nh, T, hs)
        else:
            # PAPER: Vaswani et al. 2017 §3.2.1, Eq. 1: softmax(QK^T / sqrt(d_k)) V, d_k = hs.
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, T)
            if self.causal:
                att = att.masked_fill(~self.mask[:T, :T], float("-inf"))  # the future: weight exp(-inf) = 0
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

    Post-LN puts 2 * n_layer LayerNorms in every gradient's path; pre-LN keeps a plain residual sum.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.pre_ln = config.pre_ln
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, C) -> (B, T, C)
        if self.pre_ln:  # GPT-2
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
        else:  # GPT-1 (openai/finetune-transformer-lm): n = LN(x + attn(x)); h = LN(n + mlp(n))
            x = self.ln_1(x + self.attn(x))
            x = self.ln_2(x + self.mlp(x))
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
        # Post-LN blocks end in a LayerNorm already; a pre-LN stack ends in a raw sum and needs one.
        self.ln_f = nn.LayerNorm(config.n_embd) if config.pre_ln else nn.Identity()
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one V x C matrix, as in the released weights
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # PAPER: GPT-1 §4.1: N(0, 0.02). Biases zero; LayerNorms keep PyTorch's identity init.
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def hidden_states(self, idx: Tensor) -> Tensor:
        """Final states (B, T, C) before the head, which fine-tuning reads at <|extract|>."""
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)  # (T,)
        # PAPER: GPT-1 §3.1, Eq. 2: h_0 = U W_e + W_p; h_l = transformer_block(h_{l-1}).
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C) + (T, C) broadcast -> (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        return self.ln_f(x)  # (B, T, C); the identity unless pre_ln

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Logits (B, T, V) for the token after each position, and with targets (B, T) the mean cross-entropy.

        Targets equal to IGNORE are left out of the mean.
        """
        # PAPER: GPT-1 §3.1, Eq. 2: P(u) = softmax(h_n W_e^T).
        logits = self.lm_head(self.hidden_states(idx))  # (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),  # (B*T, V), (B*T,)
                               ignore_index=IGNORE)
        return logits, loss

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Parameter count, a tied head once; non_embedding=True gives Kaplan et al.'s N, without the
        embedding tables or an untied head's matrix."""
        params = {id(p): p for p in self.parameters()}
        if non_embedding:
            for p in (self.wte.weight, self.wpe.weight, self.lm_head.weight):
                params.pop(id(p), None)
        return sum(p.numel() for p in params.values())

    def flops_per_token(self) -> float:
        """Training FLOPs per token, as Kaplan et al. 2020 (Table 1) count them, plus the output head.

        Kaplan leave out the head's V x C matmul, negligible at their sizes but a big share of a small
        model's work, which MFU should count.
        """
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


# --- our own checkpoints: train.py writes them, from_checkpoint reads them

KIND = "project1/gpt"  # saved in every checkpoint, so another chapter's file is refused
PREFIX = "gpt"  # checkpoints/project1/gpt_iter{N}_loss{L}.pt
