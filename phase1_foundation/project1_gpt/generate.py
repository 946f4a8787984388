"""Sampling from GPT-1: text, one token at a time, from the model's next-token scores.

The model maps tokens to scores for the next token and nothing more; turning those scores into text is a
loop around it, kept here so that model.py holds the architecture alone. Chapter 2's generate.py makes the
same loop fast with a KV cache and adds the sampling controls a released GPT-2 is used with.

Shapes: B batch, T sequence length, V vocabulary size.
"""

import torch
from torch import Tensor
from torch.nn import functional as F

from phase1_foundation.project1_gpt.model import GPT


@torch.no_grad()
def generate(model: GPT, idx: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None
             ) -> Tensor:
    """Append max_new_tokens sampled tokens to idx (B, T), one at a time, feeding each back in.

    The model knows block_size positions, so it sees the last block_size tokens. temperature < 1 sharpens
    the distribution and > 1 flattens it; top_k keeps only the k likeliest tokens (top_k=1 is greedy).
    Call model.eval() first, or dropout perturbs every step.
    """
    for _ in range(max_new_tokens):
        context = idx[:, -model.config.block_size :]  # (B, <= block_size)
        logits = model.lm_head(model.hidden_states(context)[:, -1]) / temperature  # (B, V), last position
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]  # (B, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        next_id = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)  # (B, 1)
        idx = torch.cat((idx, next_id), dim=1)  # (B, T + 1)
    return idx
