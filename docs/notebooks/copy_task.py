"""A model whose heads have something to show: chapter 1's GPT trained to continue a repeated random sequence.

    model, losses = copy_gpt()                  # trained here: about half a minute on one CPU thread
    x, y, period = repeated(n, vocab, T, gen)   # the task: inputs, targets, each row's period k
    previous, induction, *uniform = head_scores(weights, period)  # per head, and for a uniform head

A language model meets a sequence it has already seen in its context all the time (a name, a phrase, a line of
code), and once it has seen it, the next token is easy: find where the current token occurred before and copy
what followed it. Elhage et al. (2021) named the two-layer circuit that does this an induction head, and
Olsson et al. (2022) studied it: a head in layer 1 writes into each position which token came before it, and a
head in layer 2 matches the current token against that and reads the token after the match. This task is
that situation and nothing else, so a model this small learns it in a few hundred steps and its heads can be
read off the picture.
"""

import math
from contextlib import contextmanager

import torch
from torch import Tensor

from phase1_foundation.project1_gpt.model import GPT, IGNORE, GPTConfig

VOCAB = 64  # random tokens
CHANCE = math.log(VOCAB)  # 4.16 nats: the loss of a uniform guess, all a model can do without the copy
COPY = dict(n_layer=2, n_head=2, n_embd=64, block_size=32, dropout=0.0)  # chapter 1's GPT, post-LN as GPT-1
PERIODS = (4, 16)  # k, the length of the repeated sequence, drawn per row: no fixed offset finds the copy
# Batches of 128 rows: with 32, the plateau at chance before the heads form lasted 1,100 steps for one seed
# and over 1,500 for another; with 128 the loss fell below half of chance by step 220 to 250, for four seeds.
STEPS, STEPS_SMALL = 600, 60
BATCH, LR, SEED = 128, 3e-3, 0


def repeated(n: int, vocab_size: int, T: int, generator: torch.Generator, periods: tuple[int, int] = PERIODS
             ) -> tuple[Tensor, Tensor, Tensor]:
    """n rows of T+1 random tokens whose last 2k are k tokens written twice, k drawn per row from `periods`.

    Returns the inputs (n, T), the targets (n, T) and the periods (n,). A target is IGNORE unless it can be
    known: unless both the input token and the token to predict lie in the second copy, which starts at
    position T + 1 - k of the inputs. From there on, the target of position t is the input at t - k + 1: the
    token after the current token's previous occurrence.
    """
    period = torch.randint(periods[0], periods[1] + 1, (n,), generator=generator)  # (n,)
    tokens = torch.randint(vocab_size, (n, T + 1), generator=generator)  # (n, T+1)
    pos = torch.arange(T + 1)  # (T+1,)
    second = pos >= T + 1 - period[:, None]  # (n, T+1): positions in the second copy
    earlier = (pos - period[:, None]).clamp_min(0)  # (n, T+1): the same token's position in the first copy
    tokens = torch.where(second, tokens.gather(1, earlier), tokens)
    x, y = tokens[:, :-1], tokens[:, 1:].clone()  # (n, T) each
    y[~(second[:, :-1] & second[:, 1:])] = IGNORE
    return x, y, period


def head_scores(weights: Tensor, period: Tensor) -> tuple[Tensor, Tensor, float, float]:
    """How much each head attends where the two halves of an induction circuit do.

    weights (n, n_head, T, T) of one layer on rows of `repeated`, period (n,). Returns per head (n_head,) the
    mean weight on the previous token (queries 1..T-1) and the mean weight on the token after the current
    token's previous occurrence (queries in the second copy), then what a uniform head would put on each:
    a query at position t reads t + 1 keys, so 1 / (t + 1) averaged over the same queries.
    """
    n, _, T, _ = weights.shape
    t = torch.arange(1, T)
    previous = weights[:, :, t, t - 1].mean(dim=(0, 2))  # (n_head,)
    induction, uniform = [], []
    for row in range(n):
        queries = torch.arange(T + 1 - period[row].item(), T)  # the second copy
        induction.append(weights[row, :, queries, queries - period[row] + 1])  # (n_head, queries)
        uniform.append(1 / (queries + 1.0))
    return (previous, torch.cat(induction, dim=1).mean(dim=1),
            (1 / (t + 1.0)).mean().item(), torch.cat(uniform).mean().item())


def copy_gpt(small: bool = False) -> tuple[GPT, list[tuple[int, float]]]:
    """Chapter 1's GPT (2 layers, 2 heads) trained on `repeated` from a fixed seed, in eval mode, and its
    training loss every 50 steps. small=True: 60 steps, a few seconds, too few for the heads to form."""
    with torch.random.fork_rng():  # a fixed seed for the weights, without resetting the caller's generator
        torch.manual_seed(SEED)
        model = GPT(GPTConfig(vocab_size=VOCAB, **COPY))
    rows = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS_SMALL if small else STEPS):
        x, y, _ = repeated(BATCH, VOCAB, COPY["block_size"], rows)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            losses.append((step, loss.item()))
    return model.eval(), losses



@contextmanager
def heads_removed(model: GPT, heads: list[tuple[int, int]]):
    """Inside the block, the given (layer, head) pairs add nothing: each one's slice of the concatenated head
    outputs is zeroed before W^O mixes them, so the rest of the model runs as if that head were absent."""
    def zero(layer: int):
        def hook(_module, args):
            y = args[0].clone()  # (B, T, C): the heads' outputs side by side, before W^O
            size = y.shape[-1] // model.config.n_head
            for at, head in heads:
                if at == layer:
                    y[..., head * size : (head + 1) * size] = 0
            return (y,)
        return hook

    handles = [block.attn.c_proj.register_forward_pre_hook(zero(layer))
               for layer, block in enumerate(model.blocks)]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


def in_context_score(model: GPT, x: Tensor, y: Tensor, period: Tensor) -> tuple[float, float]:
    """(loss on the second copy, loss on the same tokens in the first copy), per token, averaged.

    Olsson et al. (2022) measure in-context learning as the loss late in the context minus the loss early on,
    in models trained at every position. Here the first copy's targets are never trained (they are IGNORE),
    so the model can be confidently wrong there, above chance: read the second copy against chance, ln V."""
    targets = torch.cat([x[:, 1:], y[:, -1:]], dim=1)  # (n, T): every next token, none IGNOREd
    with torch.no_grad():
        logits, _ = model(x)  # (n, T, V)
    losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (n, T)
    T, second, first = x.shape[1], [], []
    for row in range(x.shape[0]):
        k = period[row].item()
        queries = torch.arange(T + 1 - k, T)  # predicting tokens 2..k of the second copy
        second.append(losses[row, queries])
        first.append(losses[row, queries - k])  # the same tokens, predicted in the first copy
    return torch.cat(second).mean().item(), torch.cat(first).mean().item()


def copying_score(model: GPT, layer: int, head: int) -> float:
    """The share of tokens that head's OV circuit maps to themselves: E W_V W_O E^T, a (V, V) table of which
    token's logit rises when the head moves a token's embedding, has its largest entry on the diagonal.

    The LayerNorms between the embedding, the head and the logits are left out (Elhage et al. 2021 read
    circuits the same way), so this is a reading of the weights, not a measurement of the model's output.
    A head that copies scores near 1; one that moves nothing in particular scores about 1 / V."""
    attn, C = model.blocks[layer].attn, model.config.n_embd
    size = C // model.config.n_head
    rows = slice(head * size, (head + 1) * size)
    w_v = attn.c_attn.weight[2 * C :][rows]  # (hs, C): the head's values from a token's vector
    w_o = attn.c_proj.weight[:, rows]  # (C, hs): its part of W^O
    E = model.wte.weight  # (V, C), and the tied output head
    with torch.no_grad():
        table = E @ w_v.T @ w_o.T @ E.T  # (V, V): row t, the logits a moved token t raises
    return (table.argmax(dim=1) == torch.arange(len(E))).float().mean().item()
