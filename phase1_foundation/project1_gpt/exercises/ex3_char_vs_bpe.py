"""Exercise 3: characters against BPE tokens, at equal tokens, scored in bits per character.

Train the same model on the same corpus twice, once reading characters and once reading BPE tokens: same
steps, same tokens per step (BATCH_SIZE x BLOCK_SIZE), same layers; only the embedding table (and the output
head tied to it) differs in size, so the BPE model also does more compute per token. Then compare their
validation losses per character, not per token, since a BPE token is several characters (README, exercise 3):

    bits per character = loss per token (nats) x val tokens / val characters / ln 2

    uv run python phase1_foundation/project1_gpt/exercises/ex3_char_vs_bpe.py
    uv run python phase1_foundation/project1_gpt/exercises/ex3_char_vs_bpe.py --MAX_ITERS=1000

The unigram column scores, in the same unit, a model of each run's tokens that ignores context. After the
run's numbers the script prints what the course measured.

Predict before you run it: which model's loss per token will be lower, and by roughly what factor? Which will
encode the validation text in fewer bits per character? And will the trained character model beat the BPE
unigram model, which reads no context at all, in bits per character?
"""

import math
from pathlib import Path

import numpy as np

from common.course.exercises import print_measured
from common.data.tokens import load_tokens
from common.errors import run_main
from common.files import in_repo
from phase1_foundation.project1_gpt.download_data import END_OF_TEXT
from phase1_foundation.project1_gpt.exercises import parse_args, train_chapter
from phase1_foundation.project1_gpt.tokenizer import load_tokenizer


def val_characters(data_dir: Path) -> tuple[int, int]:
    """(tokens, characters) of the validation split: the text the val loss was measured on."""
    tokenizer = load_tokenizer(data_dir)
    tokens = np.asarray(load_tokens(data_dir, "val"))
    text_tokens = tokens[tokens != tokenizer.token_to_id(END_OF_TEXT)]  # document separators are not text
    return len(tokens), len(tokenizer.decode(text_tokens.tolist()))


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex3_char_vs_bpe")
    results = {}
    for tokenizer in ("char", "bpe"):
        summary = train_chapter([*settings, f"--TOKENIZER={tokenizer}"], out_dir / tokenizer)
        tokens, characters = val_characters(in_repo(summary["data_dir"]))
        to_bits_per_character = tokens / characters / math.log(2)  # x nats per token
        results[tokenizer] = {
            "loss_per_token": summary["val_loss"],
            "characters_per_token": characters / tokens,
            "bits_per_character": summary["val_loss"] * to_bits_per_character,
            "unigram_bits_per_character": summary["unigram_loss"] * to_bits_per_character,
        }

    print(f"\n{'':<6}{'val loss per token':>20}{'characters per token':>22}{'bits per character':>20}"
          f"{'unigram bits/char':>19}")
    for name, r in results.items():
        print(f"{name:<6}{r['loss_per_token']:>20.3f}{r['characters_per_token']:>22.2f}"
              f"{r['bits_per_character']:>20.3f}{r['unigram_bits_per_character']:>19.3f}")
    print("(loss per token in nats; unigram: a model of the same tokens that ignores context)")
    print_measured(WHAT_WE_MEASURED)
    return results


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
The character model's loss per token is far lower (we measured 1.85 against 4.93 nats), and that comparison
is meaningless, since a BPE token is 3.4 characters here. In bits per character BPE wins: 2.11 against 2.66.
At equal tokens per step the BPE model reads 3.4 times more text and sees that much more in its window. Its
vocabulary is itself a model of the language: the BPE unigram model, which reads no context at all, encodes
this text in 2.97 bits per character, not far behind the trained character model's 2.66, which it does not
beat.
"""


if __name__ == "__main__":
    run_main(main)
