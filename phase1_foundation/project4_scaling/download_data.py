"""Prepare chapter 4's data, once, and say whether it is enough: corpus -> characters -> train.bin / val.bin.

    uv run python phase1_foundation/project4_scaling/download_data.py                      # the cpu sweep's
    uv run python phase1_foundation/project4_scaling/download_data.py --PRESET=gpu         # the gpu sweep's
    uv run python phase1_foundation/project4_scaling/download_data.py --CORPUS=wikitext-103  # 540M characters
    uv run python phase1_foundation/project4_scaling/download_data.py --TEXT_FILE=my_notes.txt

The text is read as characters, the tokenization that makes the most tokens of a small corpus and needs no
training; characters seen fewer than MIN_CHAR_COUNT times become <unk>, so the embedding table stays small
beside the cpu sweep's tiny models. Runs may reread the text up to MAX_EPOCHS times (config.py says why);
this script lists what the sweep will ask for, the tokens of its longest run, against the tokens there are.
README, "Choosing the cpu sweep".
"""

from pathlib import Path
from types import SimpleNamespace

from common.data.corpora import choose_corpus, prepare_corpus
from common.data.tokenizers import CharTokenizer
from common.data.tokens import read_meta, write_token_files
from common.errors import run_main
from common.progress import say_how_long
from common.training.config import load_config
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.sweep import affordable_runs, planned_runs

END_OF_TEXT = "<|endoftext|>"  # between documents
SPECIAL_TOKENS = ["<unk>", END_OF_TEXT]  # <unk>: a character the training text never had
# Characters a second through both passes, counting and encoding, on two CPU cores (root README, "Data")
ENCODING_RATE = 13.6e6


def prepare(cfg: SimpleNamespace) -> Path:
    """Return the folder holding the tokenizer and token files for this config, building it if missing."""
    corpus = prepare_corpus(choose_corpus(cfg, larger="wikitext-103"), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    print(f"corpus: {corpus.describe()}")
    out_dir = Path(cfg.DATA_DIR) / "project4" / f"{corpus.path.stem}-char-min{cfg.MIN_CHAR_COUNT}"
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["val_fraction"] == cfg.VAL_FRACTION:
        return out_dir
    say_how_long("counting and encoding", corpus.characters, ENCODING_RATE)
    tokenizer = CharTokenizer.train(corpus.iter_documents(), SPECIAL_TOKENS, min_count=cfg.MIN_CHAR_COUNT)
    tokenizer.save(out_dir)
    meta = write_token_files(corpus.iter_documents(), tokenizer, out_dir, val_fraction=cfg.VAL_FRACTION,
                             separator_id=tokenizer.token_to_id(END_OF_TEXT),
                             extra_meta={"corpus": corpus.name})
    print(f"wrote {meta['train_tokens']:,} train and {meta['val_tokens']:,} val characters to {out_dir}")
    return out_dir


def main(argv: list[str] | None = None) -> Path:
    cfg = load_config(config, argv)
    data_dir = prepare(cfg)
    meta = read_meta(data_dir)
    runs, too_short = planned_runs(cfg, meta["vocab_size"])
    runs, too_long = affordable_runs(runs, meta["train_tokens"], cfg.MAX_EPOCHS)
    print(f"{meta['vocab_size']} tokens (characters seen at least {cfg.MIN_CHAR_COUNT} times, and specials); "
          f"{meta['train_tokens']:,} train / {meta['val_tokens']:,} val tokens")
    if runs:
        longest = max(runs, key=lambda run: run.tokens)
        print(f"the sweep: {len(runs)} runs; the longest, {longest.name}, reads {longest.tokens:,} tokens, "
              f"{longest.tokens / meta['train_tokens']:.2f} epochs of the training split")
    if too_long:
        print(f"left out, as they would read the text more than MAX_EPOCHS={cfg.MAX_EPOCHS:g} times: "
              f"{', '.join(r.name for r in too_long)} (up to {max(r.tokens for r in too_long):,} tokens; a "
              "bigger --CORPUS or --TEXT_FILE has more)")
    if too_short:
        print(f"left out, fewer than MIN_STEPS={cfg.MIN_STEPS} steps: {', '.join(r.name for r in too_short)}")
    return data_dir


if __name__ == "__main__":
    run_main(main)
