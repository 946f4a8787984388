"""Fast generation with GPT-2: the KV cache, and the sampling controls a released model is used with.

KVCache keeps every layer's keys and values, so that each step feeds the newest token alone; while generate
runs, each attention layer holds one in its `cache` slot, and hidden_states' `start` puts the new tokens after
the cached positions. README, "Generating text fast", explains the cache and the sampling controls.

Shapes: B batch, T new positions, S positions held (the cached ones, then the T new ones), C = n_embd,
nh = n_head, hs = C // nh head size, V vocabulary size.
"""

from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F

from phase1_foundation.project2_gpt2.model import GPT, GPTConfig


class KVCache:
    """One attention layer's keys and values for the positions it has already seen.

    In a causal model the key and value of position t depend only on positions <= t, so they never change
    once computed. Generating without a cache recomputes them for the whole context at every new token;
    with one, each step computes them for the new token alone and reads the rest from here. The tensors are
    allocated once, at block_size positions, and filled from the left.
    """

    def __init__(self, config: GPTConfig, batch_size: int, device: torch.device, dtype: torch.dtype):
        shape = (batch_size, config.n_head, config.block_size, config.n_embd // config.n_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)  # (B, nh, block_size, hs)
        self.v = torch.zeros(shape, device=device, dtype=dtype)  # (B, nh, block_size, hs)
        self.length = 0  # positions stored so far

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store the keys and values (B, nh, T, hs) of T new positions; return those of all positions.

        An empty cache takes a whole prompt; one that already holds positions takes one new token at a time.
        That is all generation needs, and it keeps the attention's mask simple: the prompt's queries and keys
        start at the same position (the causal triangle, S == T), and a single new token may see every
        cached key. Several new queries after cached keys would each need their own offset into the mask.
        """
        T = k.size(2)
        if self.length and T != 1:
            raise ValueError(f"a cache that holds positions ({self.length}) takes one new token at a time, "
                             f"not {T}; feed several only to an empty cache")
        end = self.length + T
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]  # 2 x (B, nh, S, hs)

    def clear(self) -> None:
        """Forget every position; the tensors stay allocated for the next prompt."""
        self.length = 0


def new_cache(model: GPT, batch_size: int) -> list[KVCache]:
    """An empty cache for `batch_size` sequences: a KVCache per block, on the model's device, in its dtype."""
    weight = model.wte.weight
    return [KVCache(model.config, batch_size, weight.device, weight.dtype) for _ in model.blocks]


@torch.inference_mode()  # no_grad, and no version counters either: a little less work per token
def generate(
    model: GPT,
    idx: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_id: int | None = None,
    stop: Callable[[Tensor], bool] | None = None,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Append up to max_new_tokens tokens to the prompt idx (B, T), one at a time; return (B, T + n).

    Each token is drawn from the softmax of the last position's logits / temperature, among the top_k
    likeliest tokens and the top_p nucleus only (filter_logits). temperature=0 means greedy decoding:
    the likeliest token, with no draw (top_k=1 gives the same tokens by drawing among one). `generator`
    (a torch.Generator on the model's device) makes the draws repeatable: a seed gives one sample.

    Generation ends early when every row has produced eos_id (a finished row keeps emitting eos_id
    while the others go on), or when stop(new) returns True, where new (B, n) holds the tokens generated
    so far (sample.py stops at a string this way). Call model.eval() first, or dropout perturbs each step.

    The model knows block_size positions, so it sees the last block_size tokens. use_cache=True puts a
    KVCache in every attention layer's `cache` slot: the prompt runs through the model once (the prefill),
    then each step feeds only the newest token. Once the context is full the window slides, and because
    GPT-2's positions are absolute, every kept token's position, and with it every cached key and
    value, changes: the cache is refilled from the last block_size tokens at each step. So the cache
    pays while the context fills, and use_cache=True and False give the same tokens. Either way only the
    last position goes through the output head: it alone is sampled from. The caches are taken out again
    when the call ends, even by an exception, so that a model trained after generating runs without one.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), not {temperature}")
    if (top_k is not None and top_k < 1) or (top_p is not None and top_p <= 0):
        raise ValueError(f"top_k must be >= 1 and top_p > 0 (None: no limit), not {top_k} and {top_p}")
    if idx.size(1) == 0:
        raise ValueError("the prompt is empty; start from at least one token, such as <|endoftext|>")
    B, prompt_length = idx.shape
    block_size = model.config.block_size
    finished = torch.zeros(B, 1, dtype=torch.bool, device=idx.device)  # rows that have emitted eos_id
    caches = new_cache(model, B) if use_cache else []
    try:
        if use_cache:
            for block, cache in zip(model.blocks, caches, strict=True):
                block.attn.cache = cache
        for step in range(max_new_tokens):
            if not use_cache:  # the whole context again for every new token (its attention alone is O(T^2))
                states = model.hidden_states(idx[:, -block_size:])  # (B, T, C)
            elif step == 0 or caches[0].length == block_size:  # the prompt, or a full window that slid
                for cache in caches:
                    cache.clear()
                states = model.hidden_states(idx[:, -block_size:])  # (B, T, C)
            else:  # the newest token alone, attending over the cached keys and values
                states = model.hidden_states(idx[:, -1:], start=caches[0].length)  # (B, 1, C)
            logits = model.lm_head(states[:, -1])  # (B, V): the next token's scores
            if temperature == 0:
                next_id = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                probs = F.softmax(filter_logits(logits / temperature, top_k, top_p), dim=-1)  # (B, V)
                next_id = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
            if eos_id is not None:
                next_id = next_id.masked_fill(finished, eos_id)
                finished |= next_id == eos_id
            idx = torch.cat((idx, next_id), dim=1)  # (B, T + 1)
            if (eos_id is not None and finished.all()) or (stop is not None and stop(idx[:, prompt_length:])):
                break
    finally:
        for block in model.blocks:
            block.attn.cache = None
    return idx


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """logits (B, V) with every token outside the top_k likeliest and outside the top_p nucleus set to -inf.

    top_k (>= 1) keeps the k highest scores. top_p is nucleus sampling (Holtzman et al. 2019, "The Curious
    Case of Neural Text Degeneration"): keep the smallest set of tokens, likeliest first, whose probability
    reaches p. Unlike a fixed k, the set is small where the model is sure and large where it is not. The
    token whose probability crosses p is kept, so for any p > 0 the likeliest token is, and p >= 1 keeps
    every token.
    """
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]  # (B, 1): the k-th highest score
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V), likeliest first
        probs = F.softmax(sorted_logits, dim=-1)  # (B, V)
        before = probs.cumsum(dim=-1) - probs  # (B, V): the probability of the likelier tokens
        drop = before >= top_p  # the likelier tokens already reach p (never true for the likeliest)
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = logits.scatter(-1, order, sorted_logits)  # back to vocabulary order
    return logits
