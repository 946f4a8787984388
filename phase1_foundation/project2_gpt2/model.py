"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"), as published.

Chapter 1's GPT-1 with the changes of GPT-2 §2.3: each block normalises the input of its two sub-blocks
(pre-LN), a final LayerNorm follows the last block, the residual projections start smaller in deeper models,
and the context is 1,024 tokens. The vocabulary is §2.2's byte-level BPE, 50,257 tokens.

Read top to bottom: GPTConfig -> CausalSelfAttention -> MLP -> Block -> GPT -> our checkpoints.
Generation is in generate.py, and the weights in transformers' layout in hf_weights.py.
All that generation needs from this file is CausalSelfAttention's cache slot and GPT.hidden_states' start.
Shapes: B batch, T sequence length, C = n_embd, nh = n_head, hs = C // nh head size, V vocabulary size.
S keys attended: the T positions, plus those a cache holds while generating.
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

IGNORE = -100  # a target F.cross_entropy leaves out (its ignore_index)


@dataclass
class GPTConfig:
    """The defaults are the smallest model of the paper, with its released 50,257-token vocabulary."""

    vocab_size: int = 50257  # PAPER: GPT-2 §2.2 (byte-level BPE: 256 bytes + 50,000 merges + <|endoftext|>)
    block_size: int = 1024  # PAPER: GPT-2 §2.3 (context of 1,024 tokens, up from 512)
    n_layer: int = 12  # PAPER: GPT-2 Table 2 (the smallest model has 12 layers)
    n_head: int = 12  # openai/gpt-2 hparams.json for the 124M model (the paper does not list heads)
    n_embd: int = 768  # PAPER: GPT-2 Table 2 (d_model 768; the MLP's inner size is 4 * 768 = 3072)
    dropout: float = 0.1  # transformers' gpt2 config.json (resid, embd, attn); OpenAI's code has none
    fast_attention: bool = True  # False: the explicit masked softmax you can read; same numbers, slower

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise CourseError(
                f"error: n_embd ({self.n_embd}) is not divisible by n_head ({self.n_head}); "
                "choose sizes where every head gets n_embd / n_head dimensions"
            )


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees only positions 0..t.

    The causal mask is the one thing that stops a decoder from reading the token it is asked to predict
    (a decoder-only model has no encoder and no cross-attention). Two paths compute the same function:
    the explicit one builds the (T, T) score matrix and hides the future with a lower-triangular mask,
    which is what to read; the fast one asks PyTorch's fused kernel for the same thing (is_causal=True)
    without storing the matrix, which is what to run. While generating, a cache adds the earlier positions'
    keys and values, and the T new queries attend over all S of them.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.fast = config.fast_attention
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # queries, keys, values: all heads at once
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)  # mixes the heads' outputs
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.cache = None  # generate.py puts a KVCache here while it generates; None when training
        if not self.fast:
            # mask[i, j] is True where query i may look at key j, i.e. j <= i. Not saved in checkpoints:
            # it is a function of block_size, not something learned.
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
            # S > T only for one new token after cached ones (KVCache.append), which may see every key.
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p,
                                               is_causal=S == T)  # (B, nh, T, hs)
        else:
            # Dividing by sqrt(hs) keeps the scores' variance near 1, so softmax does not saturate.
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, S)
            # The T queries are the last T of the S positions, so their rows of the mask are the last T.
            att = att.masked_fill(~self.mask[S - T : S, :S], float("-inf"))  # the future: weight 0
            att = self.attn_dropout(F.softmax(att, dim=-1))  # each row sums to 1 over positions <= t
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again: (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """The position-wise feed-forward network: every token is transformed on its own, 4x wider inside."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        # PAPER: GPT-1 §4.1 (GELU); the released code uses the tanh approximation, and its weights expect it.
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


class Block(nn.Module):
    """One decoder block: attention lets tokens read each other, then the MLP works on each token alone.

    PAPER: GPT-2 §2.3 moves LayerNorm "to the input of each sub-block" (pre-LN). The residual path
    x -> x + f(LN(x)) is then a plain sum from the embedding to the output, which is what lets deep stacks
    train without the care post-LN needs (chapter 1, exercise 1). LayerNorm's eps is PyTorch's default 1e-5,
    the value of openai/gpt-2 and of the released weights.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:  # (B, T, C) -> (B, T, C)
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """The language model: token ids (B, T) -> next-token logits (B, T, V)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token embedding
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # PAPER: GPT-1 §4.1 (learned positions)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        # PAPER: GPT-2 §2.3 ("an additional layer normalization was added after the final self-attention
        # block"): a pre-LN stack ends in a raw residual sum whose scale grows with depth.
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # Tied head: the score of token v is the dot product of the final state with v's own embedding, and
        # the V x C matrix is stored and learned once.
        self.lm_head.weight = self.wte.weight
        self.init_weights()

    def init_weights(self) -> None:
        """GPT-2's initialisation of every weight: a method of its own, so that it can be written and checked
        alone (`uv run learn start 2.scaled_init`)."""
        self.apply(self._init_weights)
        # PAPER: GPT-2 §2.3 scales "the weights of residual layers at initialization by a factor of 1/sqrt(N)
        # where N is the number of residual layers". Each block adds to the residual stream twice (attention,
        # MLP), each time through a c_proj; counting both, N = 2 * n_layer, the common reading (the paper
        # does not spell N out). At N(0, 0.02) the stream's variance would grow with the N additions, at
        # 0.02 / sqrt(N) it does not. It must run after the N(0, 0.02) pass above: an init that describes the
        # scaling but only ever draws N(0, 0.02) is an easy slip, and tests/test_model.py measures the std.
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * self.config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # PAPER: GPT-1 §4.1 ("a simple weight initialization of N(0, 0.02) was sufficient"); biases start at
        # zero and LayerNorms at the identity (PyTorch's default for them).
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def hidden_states(self, idx: Tensor, start: int = 0) -> Tensor:
        """Final states (B, T, C) before the head. `start` is the position of idx's first token: after a
        cached prefix (generate.py) it is the number of positions the caches hold, otherwise 0."""
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
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(),  # (B*T, V), (B*T,)
                               ignore_index=IGNORE)
        return logits, loss

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Parameter count. parameters() yields a shared tensor once, so a tied head is counted once.

        non_embedding=True gives Kaplan et al.'s N: without the token and position tables, and without the
        head's matrix when it is a separate one (subtracting only the Embedding modules would count an untied
        head as "non-embedding" compute).
        """
        params = {id(p): p for p in self.parameters()}
        if non_embedding:
            for p in (self.wte.weight, self.wpe.weight, self.lm_head.weight):
                params.pop(id(p), None)
        return sum(p.numel() for p in params.values())

    def flops_per_token(self) -> float:
        """Training FLOPs per token, as Kaplan et al. 2020 (Table 1) count them, plus the output head.

        The forward pass costs 2 FLOPs (multiply, add) per non-embedding weight, plus the attention scores
        against a full context (2 * n_layer * n_ctx * d_model); the backward pass costs twice the forward.
        Kaplan leave out the head's V x C matmul, negligible at their sizes; for a small model with a large
        vocabulary it is a big share of the work, and MFU should count work actually done. (Chapter 4's
        flops_per_token(config, "kaplan") is this count without the head: Kaplan's C, which its scaling laws
        are fitted in.)
        """
        c = self.config
        matmul_weights = self.num_parameters(non_embedding=True) + c.vocab_size * c.n_embd
        return 6 * matmul_weights + 6 * c.n_layer * c.block_size * c.n_embd

    @classmethod
    def from_checkpoint(cls, spec: str | Path, out_dir: str | Path = ".", device: str | torch.device = "cpu"
                        ) -> tuple["GPT", dict]:
        """The model a train.py checkpoint holds, in eval mode on `device`, and the checkpoint itself (its
        settings, step and prepared-data folder). `spec` is a checkpoint's path, or "latest" in `out_dir`."""
        path, state = ckpt.open_checkpoint(str(spec), Path(out_dir), PREFIX, kind=KIND, map_location=device)
        model = cls(GPTConfig(**state["model_config"]))
        model.load_state_dict(ckpt.clean_state_dict(state["model"]))
        print(f"loaded {path} (step {state['step']})")
        return model.to(device).eval(), state


# ----------------------------------------------------------------------------------------------------------
# Our own checkpoints: train.py writes them, from_checkpoint reads them.

KIND = "project2/gpt2"  # saved in every checkpoint, so another chapter's file is refused with a clear line
PREFIX = "gpt2"  # checkpoints/project2/gpt2_iter{N}_loss{L}.pt
