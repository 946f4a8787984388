"""A real trained model to look inside, for the theory notebooks.

    model, tokenizer, about = trained_gpt()      # chapter 1's checkpoint, or a tiny GPT trained here
    weights = attention_weights(model, idx)      # per layer: (B, n_head, T, T), the weights the model used
    moved = outputs_moved(model, idx)            # (T, T): which outputs change when one token changes

Attention weights of an untrained model are close to uniform and show nothing, so the notebooks need a
trained one. Chapter 1's `train.py` leaves one in checkpoints/project1; where it has not been run (and in the
test suite, which points DOCS_CHECKPOINTS at an empty folder) a tiny character-level GPT is trained here
instead, from a fixed seed, on a few articles of the offline Wikipedia sample.
"""

import os
from itertools import islice
from pathlib import Path

import torch
from torch import Tensor
from torch.nn import functional as F
from tqdm.auto import tqdm

import phase1_foundation
from common.data.corpora import prepare_corpus
from common.data.tokenizers import CharTokenizer, Tokenizer
from common.training import checkpoint as ckpt
from common.training.run import checkpoint_tokenizer
from phase1_foundation.project1_gpt.model import GPT, PREFIX, CausalSelfAttention, GPTConfig
from phase1_foundation.project1_gpt.tokenizer import load_tokenizer

ROOT = Path(phase1_foundation.__file__).resolve().parents[1]  # the repository

# The fallback model: chapter 1's GPT at a size one CPU thread trains in well under a minute.
TINY = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, dropout=0.0)
TINY_ARTICLES = 8  # the first articles of wiki-sample: about 400,000 characters, more than training reads
# Post-LN with a tied head sits at the unigram loss (about 3.1) for the first ~200 steps, then learns.
TINY_STEPS, TINY_STEPS_SMALL = 400, 40
TINY_BATCH, TINY_LR, TINY_SEED = 32, 1e-3, 1337


def trained_gpt(small: bool = False) -> tuple[GPT, Tokenizer, str]:
    """A trained GPT (eval mode, CPU), its tokenizer, and one line saying which model it is.

    Chapter 1's latest checkpoint when the folder DOCS_CHECKPOINTS (default checkpoints/project1) has one;
    otherwise a tiny character-level GPT trained now (small=True: fewer steps, a few seconds).
    """
    folder = Path(os.environ.get("DOCS_CHECKPOINTS", ROOT / "checkpoints" / "project1"))
    if any(folder.glob(f"{PREFIX}_iter*.pt")):
        path = ckpt.find_checkpoint("latest", folder, PREFIX)
        model, state = GPT.from_checkpoint(path, device="cpu")
        tokenizer = checkpoint_tokenizer(state, load_tokenizer)  # the tokenizer the run used
        c = model.config
        kind = "BPE" if state["config"]["TOKENIZER"] == "bpe" else "characters"
        about = (f"chapter 1 checkpoint {path.name} ({c.n_layer} layers, {c.n_head} heads, "
                 f"n_embd {c.n_embd}, {kind} {c.vocab_size})")
        return model, tokenizer, about
    return _train_tiny(small)


def _train_tiny(small: bool) -> tuple[GPT, Tokenizer, str]:
    """Chapter 1's GPT, 2 layers and 4 heads, trained on characters of the first wiki-sample articles."""
    corpus = prepare_corpus("wiki-sample", ROOT / "data")  # read from a cache after the first call
    text = "\n\n".join(islice(corpus.iter_documents(), TINY_ARTICLES))
    tokenizer = CharTokenizer.train([text], special_tokens=[CharTokenizer.UNK])
    data = torch.tensor(tokenizer.encode(text))
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    steps = TINY_STEPS_SMALL if small else TINY_STEPS
    with torch.random.fork_rng():  # a fixed seed for the weights, without resetting the caller's generator
        torch.manual_seed(TINY_SEED)
        model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, **TINY))
    batches = torch.Generator().manual_seed(TINY_SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=TINY_LR)
    for _ in tqdm(range(steps), desc="training a tiny GPT"):
        _, loss = model(*_batch(train, batches))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = sum(model(*_batch(val, batches))[1].item() for _ in range(10)) / 10
    c = model.config
    about = (f"tiny character GPT trained here: {c.n_layer} layers, {c.n_head} heads, n_embd {c.n_embd}, "
             f"{steps} steps, val loss {val_loss:.2f}")
    return model, tokenizer, about


def _batch(data: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """TINY_BATCH random windows of the text and the same windows shifted by one: inputs and targets."""
    T = TINY["block_size"]
    starts = torch.randint(len(data) - T - 1, (TINY_BATCH,), generator=generator)
    x = torch.stack([data[s : s + T] for s in starts])
    y = torch.stack([data[s + 1 : s + T + 1] for s in starts])
    return x, y


def _weights_and_values(attn: CausalSelfAttention, x: Tensor) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ / √hs + mask) and v, per head, computed from the module's own c_attn.

    The same arithmetic as the explicit path of CausalSelfAttention.forward, written out here so that it
    works whichever path (fast_attention or not) the model was built with.
    Returns the weights (B, nh, T, T) and the values (B, nh, T, hs).
    """
    B, T, C = x.shape
    hs = C // attn.n_head
    q, k, v = attn.c_attn(x).split(C, dim=2)  # 3 x (B, T, C)
    q, k, v = (t.view(B, T, attn.n_head, hs).transpose(1, 2) for t in (q, k, v))  # 3 x (B, nh, T, hs)
    scores = q @ k.transpose(-2, -1) / hs**0.5  # (B, nh, T, T)
    if attn.causal:
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # key j > query i
        scores = scores.masked_fill(future, float("-inf"))
    return F.softmax(scores, dim=-1), v


@torch.no_grad()
def attention_weights(model: GPT, idx: Tensor) -> list[Tensor]:
    """The attention weights of every layer, (B, n_head, T, T) each, for the token ids idx (B, T).

    A forward hook on each block's `attn` records its input and output during one ordinary forward pass.
    The weights are recomputed from that input, and then checked: weights @ v, heads side by side, through
    the module's c_proj must give the output the module actually produced. So the weights returned are
    the ones the model used, not a reconstruction that might differ from it.
    """
    if model.training:
        raise ValueError("call model.eval() first: in training mode dropout changes the weights at random")
    seen = []  # (input, output) of each block's attention, in order
    hooks = [block.attn.register_forward_hook(lambda _m, args, out: seen.append((args[0], out)))
             for block in model.blocks]
    try:
        model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    layers = []
    for block, (x, out) in zip(model.blocks, seen, strict=True):
        weights, v = _weights_and_values(block.attn, x)
        y = (weights @ v).transpose(1, 2).reshape(x.shape)  # (B, T, C)
        difference = (block.attn.c_proj(y) - out).abs().max().item()
        if difference > 1e-5 * max(1.0, out.abs().max().item()):  # float32 rounding, relative to the output
            raise AssertionError(f"recomputed attention differs from the module's output by {difference:.1e}")
        layers.append(weights)
    return layers


@torch.no_grad()
def outputs_moved(model: GPT, idx: Tensor) -> Tensor:
    """moved[t, i]: whether the model's output (logits) at position i changes when token t of idx (1, T) is
    replaced by another. Returns (T, T) bool.

    A test of causality on the model itself, whichever attention path it runs: nothing of ours is recomputed.
    A causal model's output at i reads tokens 0..i only, so row t must be False before t, exactly: the
    outputs there are compared bit for bit (torch.equal, no tolerance), and True from t on, where the changed
    token is read. A model that could see the future fails it.
    """
    T = idx.shape[1]
    logits = model(idx)[0][0]  # (T, V)
    moved = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        other = idx.clone()
        other[0, t] = (other[0, t] + 1) % model.config.vocab_size  # another token at t, nothing else changed
        changed = model(other)[0][0]  # (T, V); one sequence at a time, as idx was: the same kernels run
        moved[t] = torch.tensor([not torch.equal(a, b) for a, b in zip(logits, changed, strict=True)])
    return moved
