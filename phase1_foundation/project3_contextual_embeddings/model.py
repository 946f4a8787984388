"""BERT (Devlin et al. 2018): chapter 1's post-LN GPT-1 with the causal mask taken out.

Every token reads every other, so instead of the next token BERT learns to fill in masked tokens (MLM) and to
tell whether sentence B follows sentence A (NSP). New beside GPT-1: segment embeddings, a LayerNorm on the
embedding sum, a padding mask, the two heads, and (optionally) rotary positions (RoFormer, Su et al. 2021).
Shapes: B batch, T sequence length, C = n_embd, nh = n_head, hs = C // nh head size, V vocabulary size,
N number of chosen positions (MLM_PROB of the tokens).
"""

import math
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
from torch import Tensor
from torch.nn import functional as F

from common.errors import CourseError
from common.training import checkpoint as ckpt

LN_EPS = 1e-12  # google-research/bert's LayerNorm epsilon


@dataclass
class BertConfig:
    """BERT-base by default; only the vocabulary depends on the tokenizer."""

    vocab_size: int  # PAPER: BERT §3 (30,000-token WordPiece; 30,522 released)
    block_size: int = 512  # PAPER: BERT §A.2 (at most 512 tokens)
    n_layer: int = 12  # PAPER: BERT §3, BERT-base L = 12
    n_head: int = 12  # PAPER: BERT §3, BERT-base A = 12
    n_embd: int = 768  # PAPER: BERT §3, BERT-base H = 768
    dropout: float = 0.1  # PAPER: BERT §A.2 (on all layers)
    fast_attention: bool = True  # False: the explicit softmax you can read; same numbers, slower
    positions: str = "learned"  # PAPER: BERT §3, a learned table; "rotary": RoFormer §3.4

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise CourseError(
                f"error: n_embd ({self.n_embd}) is not divisible by n_head ({self.n_head}); "
                "choose sizes where every head gets n_embd / n_head dimensions"
            )
        if self.positions not in ("learned", "rotary"):
            raise CourseError(f"error: unknown positions {self.positions!r}; choose learned or rotary")
        if self.positions == "rotary" and (self.n_embd // self.n_head) % 2:
            raise CourseError(f"error: rotary positions turn pairs of numbers, so the head size "
                              f"({self.n_embd // self.n_head}) must be even; change n_embd or n_head")


# --- rotary positions (RoFormer, Su et al. 2021) ----------------------------------------------------------
# Pair i, (x_2i, x_2i+1), of a query or key at position m is turned by the angle m * theta_i. Rotations
# compose, so the score of q at m and k at n depends on n - m alone.

ROTARY_BASE = 10_000.0  # PAPER: RoFormer §3.2.2, theta_i = 10000^(-2(i-1)/d) for i = 1 .. d/2


def rotary_angles(block_size: int, head_size: int) -> tuple[Tensor, Tensor]:
    """cos and sin of m * theta_i for each position m < block_size and pair i < head_size / 2: (T, hs/2)."""
    theta = ROTARY_BASE ** (-torch.arange(0, head_size, 2, dtype=torch.float64) / head_size)  # (hs/2,)
    angles = torch.outer(torch.arange(block_size, dtype=torch.float64), theta)  # (T, hs/2)
    return angles.cos().float(), angles.sin().float()


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Turn each pair (x0, x1) of the vectors x (B, nh, T, hs) by its position's angle; cos, sin (T, hs/2)."""
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (B, nh, T, hs/2) each: the first and second number of every pair
    # PAPER: RoFormer §3.4.2, Eq. 34: the block-diagonal rotation, done element-wise
    turned = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)  # (B, nh, T, hs/2, 2)
    return turned.flatten(-2).type_as(x)  # (B, nh, T, hs), in x's dtype (bf16 under autocast)


class BidirectionalSelfAttention(nn.Module):
    """Chapter 1's CausalSelfAttention minus the causal mask; only padding keys stay hidden."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.fast = config.fast_attention
        # BERT's query, key and value layers side by side (from_hf concatenates them)
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, rotary: tuple[Tensor, Tensor] | None = None
                ) -> Tensor:
        """x (B, T, C); mask (B, 1, 1, T) bool, True at real keys, or None; rotary: (cos, sin) or None."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if rotary is not None:  # queries and keys only: values carry content, not position
            q, k = rotate(q, *rotary), rotate(k, *rotary)
        if self.fast:
            dropout_p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (B, nh, T, hs)
        else:
            # PAPER: Vaswani et al. 2017, Eq. 1: softmax(QK^T / sqrt(d_k)) V
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, T)
            # GPT hid the future here; BERT hides only padding keys (its code adds -10000; -inf gives 0).
            if mask is not None:
                att = att.masked_fill(~mask, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))  # each row sums to 1 over the real tokens
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again: (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """The position-wise feed-forward network, 4x wider inside."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)  # PAPER: BERT §3 (feed-forward size 4H)
        self.gelu = nn.GELU()  # the exact (erf) form, as transformers runs the released weights
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))  # (B, T, C) -> (B, T, 4C) -> (B, T, C)


class Block(nn.Module):
    """An encoder block, post-LN as in the original Transformer and GPT-1: LN(x + attn(x)), LN(h + mlp(h))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attn = BidirectionalSelfAttention(config)
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=LN_EPS)
        self.mlp = MLP(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=LN_EPS)

    def forward(self, x: Tensor, mask: Tensor | None = None, rotary: tuple[Tensor, Tensor] | None = None
                ) -> Tensor:  # (B, T, C) -> (B, T, C)
        x = self.ln_1(x + self.attn(x, mask, rotary))
        return self.ln_2(x + self.mlp(x))


class BERT(nn.Module):
    """The encoder and its two pre-training heads: token ids (B, T) -> MLM logits and NSP logits."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        C = config.n_embd
        tables = dict(token=nn.Embedding(config.vocab_size, C))
        if config.positions == "learned":
            tables["position"] = nn.Embedding(config.block_size, C)  # PAPER: BERT §3 (learned positions)
        self.embeddings = nn.ModuleDict(
            dict(
                **tables,
                segment=nn.Embedding(2, C),  # PAPER: BERT §3, Fig. 2 (sentence A = 0, sentence B = 1)
                norm=nn.LayerNorm(C, eps=LN_EPS),  # BERT normalises the sum, then drops out
                drop=nn.Dropout(config.dropout),
            )
        )
        if config.positions == "rotary":  # no table: the angles turn queries and keys in attention
            cos, sin = rotary_angles(config.block_size, C // config.n_head)
            self.register_buffer("rotary_cos", cos, persistent=False)  # (block_size, hs/2)
            self.register_buffer("rotary_sin", sin, persistent=False)  # (block_size, hs/2)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        # Post-LN: the last block already ends in a LayerNorm, so there is no final one.
        # google-research/bert's pooler: dense + tanh on the [CLS] state, the NSP head's input
        self.pooler = nn.Sequential(OrderedDict(dense=nn.Linear(C, C), act=nn.Tanh()))
        # PAPER: BERT §3.1 Task #1 (MLM). google-research/bert's head: dense, GELU, LayerNorm, then the tied
        # token embeddings (Press & Wolf 2017) plus a bias.
        head = dict(dense=nn.Linear(C, C), act=nn.GELU(), norm=nn.LayerNorm(C, eps=LN_EPS),
                    decoder=nn.Linear(C, config.vocab_size))
        self.mlm_head = nn.Sequential(OrderedDict(head))
        self.mlm_head.decoder.weight = self.embeddings.token.weight
        self.nsp_head = nn.Linear(C, 2)  # PAPER: BERT §3.1 Task #2 (NSP); 1 = IsNext, 0 = NotNext (ours)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # google-research/bert: N(0, 0.02) (truncated there), zero biases
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def hidden_states(
        self, input_ids: Tensor, segment_ids: Tensor | None = None, attention_mask: Tensor | None = None
    ) -> Tensor:
        """Final hidden states (B, T, C), the contextual embeddings; attention_mask (B, T): 1 real, 0 pad."""
        B, T = input_ids.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens is longer than block_size {self.config.block_size}")
        if segment_ids is None:
            segment_ids = torch.zeros_like(input_ids)  # one sentence: everything is sentence A
        emb = self.embeddings
        # PAPER: BERT §3, Fig. 2: the input is the sum of the token, segment and position embeddings
        x = emb.token(input_ids) + emb.segment(segment_ids)  # (B, T, C)
        rotary = None
        if self.config.positions == "learned":
            x = x + emb.position(torch.arange(T, device=input_ids.device))  # (B, T, C) + (T, C)
        else:
            rotary = self.rotary_cos[:T], self.rotary_sin[:T]  # (T, hs/2) each
        x = emb.drop(emb.norm(x))  # (B, T, C)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        for block in self.blocks:
            x = block(x, mask, rotary)  # (B, T, C)
        return x

    def forward(
        self,
        input_ids: Tensor,
        segment_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        chosen: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """MLM logits (B, T, V), or (N, V) where `chosen` (B, T) is True: the head's V x C product is its
        biggest cost, so pre-training scores only the chosen positions. NSP logits (B, 2)."""
        x = self.hidden_states(input_ids, segment_ids, attention_mask)  # (B, T, C)
        nsp_logits = self.nsp_head(self.pooler(x[:, 0]))  # [CLS] (B, C) -> pooled (B, C) -> (B, 2)
        if chosen is not None:
            x = x[chosen]  # (N, C), in row-major order of the True positions
        return self.mlm_head(x), nsp_logits  # (B, T, V) or (N, V)

    def num_parameters(self, non_embedding: bool = False) -> int:
        """Parameter count, the tied decoder counted once. non_embedding=True leaves out the three tables."""
        params = {id(p): p for p in self.parameters()}
        if non_embedding:
            for table in ("token", "position", "segment"):
                if table in self.embeddings:  # rotary positions have no table
                    params.pop(id(self.embeddings[table].weight))
            params.pop(id(self.mlm_head.decoder.weight), None)  # already gone while tied
        return sum(p.numel() for p in params.values())

    @classmethod
    def from_checkpoint(cls, spec: str | Path, out_dir: str | Path = ".", device: str | torch.device = "cpu"
                        ) -> tuple["BERT", dict]:
        """The model of a train.py checkpoint, in eval mode on `device`, and the checkpoint; `spec` is the
        checkpoint's path, or "latest" in `out_dir`."""
        path, state = ckpt.open_checkpoint(str(spec), Path(out_dir), PREFIX, kind=KIND, map_location=device)
        model = cls(BertConfig(**state["model_config"]))
        model.load_state_dict(ckpt.clean_state_dict(state["model"]))
        print(f"loaded {path} (step {state['step']})")
        return model.to(device).eval(), state


# --- our checkpoints: train.py writes them, from_checkpoint reads them ------------------------------------

KIND = "project3/bert"  # saved in every checkpoint: another chapter's file is refused
PREFIX = "bert"  # checkpoints/project3/bert_iter{N}_loss{L}.pt
