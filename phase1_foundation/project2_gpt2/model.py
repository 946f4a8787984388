"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"), as published.

Chapter 1's GPT-1 with the changes of GPT-2 §2.3: each block normalises the input of its two sub-blocks
(pre-LN), a final LayerNorm follows the last block, the residual projections start smaller in deeper models,
and the context is 1,024 tokens. New here is fast generation: a KV cache keeps every layer's keys and
values, so each new token costs one position's work instead of the whole context's; and the sampling
controls a released model is used with (temperature, top-k, nucleus/top-p, stopping at <|endoftext|>).

Read top to bottom: GPTConfig -> KVCache -> CausalSelfAttention -> MLP -> Block -> GPT -> sampling ->
saved weights (ours, and transformers' GPT-2 folders, both ways).
Shapes: B batch, T sequence length, S keys attended to (T, plus the cached positions), C = n_embd,
nh = n_head, hs = C // nh head size, V vocabulary size.
"""

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
from safetensors.torch import save_file
from torch import Tensor
from torch.nn import functional as F

from common import checkpoint as ckpt
from common.hf import read_hf_config, read_hf_weights

IGNORE = -100  # a target F.cross_entropy leaves out (its ignore_index)


@dataclass
class GPTConfig:
    """The defaults are the smallest model of the paper, with its released 50,257-token vocabulary."""

    vocab_size: int = 50257  # PAPER: GPT-2 §2.2 (byte-level BPE: 256 bytes + 50,000 merges + <|endoftext|>)
    block_size: int = 1024  # PAPER: GPT-2 §2.3 (context of 1,024 tokens, up from 512)
    n_layer: int = 12  # PAPER: GPT-2 Table 2 (the smallest model has 12 layers)
    n_head: int = 12  # openai/gpt-2 hparams.json for the 124M model (the paper does not list heads)
    n_embd: int = 768  # PAPER: GPT-2 Table 2 (d_model 768; the MLP's inner size is 4 * 768 = 3072)
    dropout: float = 0.1  # the released config's resid, embd and attn dropout; the paper is silent
    fast_attention: bool = True  # False: the explicit masked softmax you can read; same numbers, slower

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise SystemExit(
                f"error: n_embd ({self.n_embd}) is not divisible by n_head ({self.n_head}); "
                "choose sizes where every head gets n_embd / n_head dimensions"
            )


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
        """Store the keys and values (B, nh, T, hs) of T new positions; return those of all positions."""
        end = self.length + k.size(2)
        self.k[:, :, self.length : end] = k
        self.v[:, :, self.length : end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]  # 2 x (B, nh, S, hs)


def causal_mask(T: int, S: int, device: torch.device) -> Tensor:
    """(T, S) booleans, True where query i may look at key j.

    The T queries are the last T of the S positions (S > T when earlier keys come from a cache), so query i
    sits at position S - T + i and sees keys j <= S - T + i: without a cache the usual lower triangle, for a
    single new token every key.
    """
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t sees only positions 0..t.

    Two paths compute the same function: the explicit one builds the (T, S) score matrix and hides the
    future with the causal mask, which is what to read; the fast one asks PyTorch's fused kernel for the
    same thing without storing the matrix, which is what to run. With a cache, the new positions' keys and
    values are appended to the cached ones and the T new queries attend over all S of them.
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

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, nh, S, hs): the cached positions, then these T
        S = k.size(2)
        if self.fast:
            dropout_p = self.dropout if self.training else 0.0
            # is_causal=True lines queries and keys up from the same first position: right without a cache
            # and for the prompt (S == T). One new token may see every cached key, so it needs no mask;
            # several new queries are the last T of S, and need the mask.
            mask = None if S == T or T == 1 else causal_mask(T, S, x.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                               is_causal=S == T)  # (B, nh, T, hs)
        else:
            # Dividing by sqrt(hs) keeps the scores' variance near 1, so softmax does not saturate.
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))  # (B, nh, T, S)
            att = att.masked_fill(~causal_mask(T, S, x.device), float("-inf"))  # the future: weight 0
            att = self.attn_dropout(F.softmax(att, dim=-1))  # each row sums to 1 over the visible keys
            y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again: (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """The position-wise feed-forward network: every token is transformed on its own, 4x wider inside."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        # GELU in the tanh approximation, as in openai/gpt-2's model.py: the released weights expect it.
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

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:  # (B, T, C) -> (B, T, C)
        x = x + self.attn(self.ln_1(x), cache)
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """The language model: token ids (B, T) -> next-token logits (B, T, V)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)  # token embedding
        self.wpe = nn.Embedding(config.block_size, config.n_embd)  # learned positions, as in GPT-1
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        # PAPER: GPT-2 §2.3 ("an additional layer normalization was added after the final self-attention
        # block"): a pre-LN stack ends in a raw residual sum whose scale grows with depth.
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # Tied head: the score of token v is the dot product of the final state with v's own embedding, and
        # the V x C matrix is stored and learned once.
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)
        # PAPER: GPT-2 §2.3 scales "the weights of residual layers at initialization by a factor of 1/sqrt(N)
        # where N is the number of residual layers". Each block adds to the residual stream twice (attention,
        # MLP), each time through a c_proj; at N(0, 0.02) the stream's variance would grow with the
        # N = 2 * n_layer additions, at 0.02 / sqrt(N) it does not. It must run after the N(0, 0.02) pass
        # above: an init that describes the scaling but only ever draws N(0, 0.02) is an easy slip, and
        # tests/test_model.py measures the std.
        for name, param in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # N(0, 0.02) as in GPT-1 (openai/gpt-2's model.py keeps it); biases start at zero and LayerNorms at
        # the identity (PyTorch's default for them).
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def new_cache(self, batch_size: int) -> list[KVCache]:
        """An empty KV cache for `batch_size` sequences: one KVCache per block, on the model's device."""
        weight = self.wte.weight
        return [KVCache(self.config, batch_size, weight.device, weight.dtype) for _ in self.blocks]

    def hidden_states(self, idx: Tensor, cache: list[KVCache] | None = None) -> Tensor:
        """Final states (B, T, C) before the head; with a cache, idx continues the sequence it holds."""
        B, T = idx.shape
        start = cache[0].length if cache is not None else 0  # positions already cached (alike in every layer)
        end, block_size = start + T, self.config.block_size
        if end > block_size:
            raise ValueError(f"sequence of {end} tokens is longer than block_size {block_size}")
        pos = torch.arange(start, end, device=idx.device)  # (T,)
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C) + (T, C) broadcast -> (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, cache[i] if cache is not None else None)  # (B, T, C)
        return self.ln_f(x)  # (B, T, C)

    def forward(self, idx: Tensor, targets: Tensor | None = None, cache: list[KVCache] | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """Logits (B, T, V) for the token after each position, and with targets (B, T) the mean cross-entropy.

        Targets equal to IGNORE are left out of the mean. With a cache (new_cache), idx continues the
        sequence the cache holds: its positions start at the cache's length, and the cache grows by T.
        """
        logits = self.lm_head(self.hidden_states(idx, cache))  # (B, T, V)
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
        vocabulary it is a big share of the work, and MFU should count work actually done.
        """
        c = self.config
        matmul_weights = self.num_parameters(non_embedding=True) + c.vocab_size * c.n_embd
        return 6 * matmul_weights + 6 * c.n_layer * c.block_size * c.n_embd

    @torch.inference_mode()  # no_grad, and no version counters either: a little less work per token
    def generate(
        self,
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

        The model knows block_size positions, so it sees the last block_size tokens. use_cache=True keeps
        every layer's keys and values (KVCache): the prompt runs through the model once (the prefill), then
        each step feeds only the newest token. Once the context is full the window slides, and because
        GPT-2's positions are absolute, every kept token's position, and with it every cached key and
        value, changes: the cache is refilled from the last block_size tokens at each step. So the cache
        pays while the context fills, and use_cache=True and False give the same tokens.
        """
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), not {temperature}")
        if (top_k is not None and top_k < 1) or (top_p is not None and top_p <= 0):
            raise ValueError(f"top_k must be >= 1 and top_p > 0 (None: no limit), not {top_k} and {top_p}")
        if idx.size(1) == 0:
            raise ValueError("the prompt is empty; start from at least one token, such as <|endoftext|>")
        B, prompt_length = idx.shape
        block_size = self.config.block_size
        finished = torch.zeros(B, 1, dtype=torch.bool, device=idx.device)  # rows that have emitted eos_id
        cache = None
        for step in range(max_new_tokens):
            if not use_cache:  # the whole context again for every new token (its attention alone is O(T^2))
                logits, _ = self(idx[:, -block_size:])  # (B, T, V)
            elif step == 0 or cache[0].length == block_size:  # the prompt, or a full window that slid
                cache = self.new_cache(B)
                logits, _ = self(idx[:, -block_size:], cache=cache)  # (B, T, V)
            else:  # the newest token alone, attending over the cached keys and values
                logits, _ = self(idx[:, -1:], cache=cache)  # (B, 1, V)
            logits = logits[:, -1]  # (B, V): the next token's scores
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
        return idx

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

    @classmethod
    def from_hf(cls, folder: str | Path) -> "GPT":
        """Load a GPT-2 saved in the Hugging Face transformers layout (e.g. OpenAI's released models).

        The folder holds config.json and model.safetensors or pytorch_model.bin, as written by
        GPT2LMHeadModel.save_pretrained. Anything else ends the program with one line saying what is wrong.
        """
        folder = Path(folder)
        hf = _read_hf_config(folder)
        config = GPTConfig(
            vocab_size=hf["vocab_size"],
            block_size=hf["n_positions"],
            n_layer=hf["n_layer"],
            n_head=hf["n_head"],
            n_embd=hf["n_embd"],
            dropout=hf.get("resid_pdrop", 0.1),  # the released models use 0.1 for all three dropouts
        )
        model = cls(config)
        weights = _read_hf_weights(folder)
        with torch.no_grad():
            for name, param in model.named_parameters():  # yields the tied head once, as wte.weight
                param.copy_(_hf_tensor(weights, name, param.shape, folder))
        return model

    def to_hf(self, folder: str | Path, eos_id: int | None = None) -> Path:
        """Save in the layout GPT2LMHeadModel.from_pretrained reads (config.json, model.safetensors); return
        the folder. eos_id (<|endoftext|> for GPT-2's vocabulary) becomes the config's bos and eos token.

        Each file is written under a temporary name and renamed, so an interrupted save leaves no half file.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        c = self.config
        hf_config = {
            "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
            "vocab_size": c.vocab_size, "n_positions": c.block_size, "n_ctx": c.block_size,
            "n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head,
            "activation_function": "gelu_new",  # transformers' name for GELU's tanh approximation
            "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "attn_pdrop": c.dropout,
            "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
            "bos_token_id": eos_id, "eos_token_id": eos_id,  # GPT-2 uses <|endoftext|> for both
        }
        # The tied matrix is stored once, as transformer.wte.weight (safetensors refuses two names for one
        # tensor); transformers ties lm_head.weight to it again on loading.
        weights = {"transformer." + _hf_name(name): _to_conv1d(name, param).detach().cpu().contiguous()
                   for name, param in self.named_parameters()}
        text = json.dumps(hf_config, indent=2) + "\n"
        _write_then_rename(folder / "model.safetensors",
                           lambda path: save_file(weights, path, metadata={"format": "pt"}))
        _write_then_rename(folder / "config.json", lambda path: path.write_text(text, encoding="utf-8"))
        return folder


# ----------------------------------------------------------------------------------------------------------
# Sampling: which tokens generate() may draw from.


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


# ----------------------------------------------------------------------------------------------------------
# Our own checkpoints: train.py writes them, from_checkpoint reads them.

KIND = "project2/gpt2"  # saved in every checkpoint, so another chapter's file is refused with a clear line
PREFIX = "gpt2"  # checkpoints/project2/gpt2_iter{N}_loss{L}.pt

# ----------------------------------------------------------------------------------------------------------
# transformers' GPT-2 folders. Its names are OpenAI's: transformer.wte, transformer.wpe, transformer.h.{i}
# (our blocks.{i}, with the same sub-module names), transformer.ln_f; lm_head.weight is the tied wte.weight.
# The block's linear layers are OpenAI's "Conv1D", which stores its weight as (in, out); nn.Linear stores
# (out, in), so those four weights are transposed both ways. Older files also hold each layer's causal mask
# (attn.bias, attn.masked_bias): a function of the sizes, not a learned weight, and ignored here.

_CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
_HF_HINT = "expected a folder written by GPT2LMHeadModel.save_pretrained (config.json + model.safetensors)"
# Settings of transformers' GPT2Config that change the function the model computes, and the value this GPT-2
# implements (transformers' default, and the released models' value).
_HF_FIXED = {
    "activation_function": "gelu_new",  # GELU, tanh approximation
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
    "scale_attn_weights": True,  # scores divided by sqrt(hs)
    "scale_attn_by_inverse_layer_idx": False,  # scores also divided by the layer's number (a later variant)
    "reorder_and_upcast_attn": False,
    "add_cross_attention": False,
}


def _hf_name(name: str) -> str:
    """transformers' name for our parameter `name`, without the "transformer." prefix."""
    return "h." + name.removeprefix("blocks.") if name.startswith("blocks.") else name


def _to_conv1d(name: str, tensor: Tensor) -> Tensor:
    """Our parameter in transformers' layout, or theirs in ours: the transpose is its own inverse."""
    return tensor.t() if name.endswith(_CONV1D_WEIGHTS) else tensor


def _read_hf_config(folder: Path) -> dict:
    hf = read_hf_config(folder, "gpt2", _HF_HINT)
    path = folder / "config.json"
    for key, ours in _HF_FIXED.items():
        if hf.get(key, ours) != ours:
            raise SystemExit(f"error: {path} sets {key}={hf[key]!r}; this GPT-2 supports only {key}={ours!r}")
    if hf.get("n_inner") not in (None, 4 * hf.get("n_embd", 0)):
        raise SystemExit(f"error: {path} sets n_inner={hf['n_inner']}; this GPT-2's MLP is 4 x n_embd wide")
    return hf


def _read_hf_weights(folder: Path) -> dict[str, Tensor]:
    # GPT2LMHeadModel prefixes "transformer."; a bare GPT2Model (and the original upload) does not.
    return {name.removeprefix("transformer."): t for name, t in read_hf_weights(folder, _HF_HINT).items()}


def _hf_tensor(weights: dict[str, Tensor], name: str, shape: torch.Size, folder: Path) -> Tensor:
    """The tensor transformers stores for our parameter `name`, in our layout."""
    hf_name = _hf_name(name)
    if hf_name not in weights:
        raise SystemExit(f"error: {folder} has no tensor {hf_name!r}; it is not a complete GPT-2 checkpoint")
    tensor = _to_conv1d(name, weights[hf_name])
    if tensor.shape != shape:
        raise SystemExit(f"error: {hf_name!r} in {folder} has shape {tuple(tensor.shape)}, "
                         f"config.json implies {tuple(shape)}; the folder mixes files from different models")
    return tensor


def _write_then_rename(path: Path, write: Callable[[Path], None]) -> None:
    """Write `path` under a temporary name first: a crash mid-write leaves the old file, or none."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
