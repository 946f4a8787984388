"""Exercise 3 (concept): what stops BERT from generating text the way GPT does? Trace the forward pass.

A language model that generates, like chapter 1's GPT, gives the distribution of the next token from the
tokens before it, then samples, appends and repeats. Two things stop BERT from doing that in one pass.

1. Its output at position t depends on every token, those after t included: no mask hides them (model.py,
BidirectionalSelfAttention). Training it to predict token t+1 at position t would be copying, since token t+1
is in the input; chapter 1's exercise 2 removes GPT's mask and watches exactly that. This script shows the
dependence: it replaces one token at a time by [MASK] and measures how much every position's MLM logits move.
A causal model would give exact zeros above the diagonal (no output changes when a later token does).

2. What BERT learned instead is to fill a blank from both sides. The nearest thing to generation is to append
a [MASK], fill it with the most likely token, append another, and so on. The script does that, starting from
the words of --TEXT before its first [MASK]. Each blank then has nothing but [SEP] on its right, which in
training marked the end of a segment, and the model was never trained to give the distribution of a whole
continuation, only of one token with the rest of the text around it.

    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex3_why_no_generation.py
    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex3_why_no_generation.py \
        --CHECKPOINT=path/to/bert.pt

It uses the model train.py saved (the newest checkpoint in checkpoints/project3, or --CHECKPOINT=...) and
trains one first if there is none. After the run's numbers the script prints what the course measured.

Predict before you run it: above the diagonal of the table, where a LATER token changed, how large will
BERT's smallest entry be: exactly zero, as every one of them would be for GPT, rounding error, or hundredths
or more? And what will twenty blanks filled at the end give: a fluent continuation, a few plausible words and
then nonsense, or the same few tokens over and over?
"""

import math

import torch

from common.course.exercises import print_measured
from common.errors import run_main
from common.training.config import load_config
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.download_data import MASK_ID, SEP_ID, SPECIAL_TOKENS
from phase1_foundation.project3_contextual_embeddings.embed import encode_text
from phase1_foundation.project3_contextual_embeddings.exercises import (
    find_or_train,
    load_run,
    parse_args,
)
from phase1_foundation.project3_contextual_embeddings.model import BERT
from phase1_foundation.project3_contextual_embeddings.pretraining_data import N_SPECIAL
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer

NEW_TOKENS = 20  # blanks appended and filled one at a time


@torch.no_grad()
def dependence(model: BERT, ids: list[int]) -> torch.Tensor:
    """(T, T): entry [t, s] is the largest change of position t's MLM logits when token s becomes [MASK];
    NaN in the columns of special tokens and blanks, which are not replaced."""
    device = next(model.parameters()).device
    x = torch.tensor(ids, device=device)  # (T,)
    variants = x.repeat(len(ids) + 1, 1)  # (T+1, T): row s has token s replaced, the last row is the original
    variants[torch.arange(len(ids)), torch.arange(len(ids))] = MASK_ID
    logits = model(variants)[0].float()  # (T+1, T, V)
    change = (logits[:-1] - logits[-1]).abs().amax(dim=-1).T.cpu()  # (T, T): [t, s] = how far t moved
    change[:, x.cpu() < N_SPECIAL] = float("nan")
    return change


@torch.no_grad()
def fill_left_to_right(model: BERT, ids: list[int], new_tokens: int) -> list[int]:
    """Append [MASK] before the final [SEP], fill it with the most likely token, repeat: the new token ids."""
    device = next(model.parameters()).device
    ids, new = ids[:-1], []  # drop the [SEP]; it is put back after each blank
    for _ in range(new_tokens):
        # (1, T), at most block_size: past that the oldest tokens drop off
        x = torch.tensor([[*ids, MASK_ID, SEP_ID][-model.config.block_size :]], device=device)
        logits = model(x)[0][0, -2]  # (V,): the blank, just before [SEP]
        logits[:N_SPECIAL] = float("-inf")  # never a special token ([PAD], [UNK], [CLS], [SEP], [MASK])
        new.append(int(logits.argmax()))
        ids.append(new[-1])
    return new


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex3_why_no_generation")
    cfg = load_config(config, settings)
    model, _, data_dir = load_run(find_or_train(cfg, settings, out_dir), cfg.DEVICE)
    tokenizer = load_tokenizer(data_dir)

    # 1. Does position t read the tokens after it?
    ids = encode_text(tokenizer, cfg.TEXT)[: model.config.block_size]  # [CLS] text [SEP]
    change = dependence(model, ids)  # (T, T)
    later = torch.triu(torch.ones_like(change, dtype=torch.bool), diagonal=1) & ~change.isnan()  # s > t
    names = [SPECIAL_TOKENS[i] if i < N_SPECIAL else tokenizer.decode([i]).strip() or "_" for i in ids]
    print(f"\nlargest change of each position's MLM logits (rows) when one token (columns) becomes [MASK]:\n"
          f"{cfg.TEXT}\n{'':>10}" + "".join(f"{n[:6]:>7}" for n in names))
    for t, row in enumerate(change):
        print(f"{names[t][:10]:>10}"
              + "".join(f"{'-':>7}" if math.isnan(v) else f"{v:>7.2f}" for v in row.tolist()))
    print(f"above the diagonal (a LATER token changed): smallest {change[later].min():.1e}, "
          f"mean {change[later].mean():.1e}; a causal model gives exactly 0 there")

    # 2. Generate by filling blanks at the end, one at a time.
    prompt = encode_text(tokenizer, cfg.TEXT.split("[MASK]")[0])  # [CLS] words before the first blank [SEP]
    new = fill_left_to_right(model, prompt, NEW_TOKENS)
    text = tokenizer.decode(new)
    print(f"\nfilling [MASK] at the end, {NEW_TOKENS} times:\n{tokenizer.decode(prompt[1:-1])} >>>{text}")
    print_measured(WHAT_WE_MEASURED)
    return {"tokens": names, "dependence": change, "min_later_change": float(change[later].min()),
            "prompt": tokenizer.decode(prompt[1:-1]), "generated": text, "generated_ids": new}


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
Measured on the checkpoint of the chapter's default run (train.py, cpu preset; the README's results), with
this command: no zeros above the diagonal. The smallest change above the diagonal was 6.5e-2 and the mean
1.0 (a causal model: exactly 0): every position's output reads the tokens after it, so "predict the next
token" would be copying (chapter 1's exercise 2 shows what that does to GPT). The largest entries lie on and
next to the diagonal: each position's output moves most when it or a neighbour changes. The twenty blanks
after "The river flowed past the old" were filled with ". The term" three times, then ")." over and over.
The blank at the end is the one place where the model has only half the context it was trained with, and
each fill is one token's best guess rather than a sample from a distribution over whole continuations.
One forward pass of BERT gives no left-to-right next-token distribution for every position at once: its
training never asks it to predict a token from the left context alone, so it cannot be trained or sampled
like GPT in one pass. A masked LM can still generate, by iterative unmasking: fill many blanks, re-mask some
and fill again (Wang & Cho 2019, "BERT has a mouth, and it must speak").
"""


if __name__ == "__main__":
    run_main(main)
