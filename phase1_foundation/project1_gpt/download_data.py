"""Prepare chapter 1's data, once: corpus -> tokenizer -> train.bin / val.bin.

    uv run python phase1_foundation/project1_gpt/download_data.py                      # auto: books online, wiki-sample offline
    uv run python phase1_foundation/project1_gpt/download_data.py --CORPUS=tinyshakespeare --TOKENIZER=char
    uv run python phase1_foundation/project1_gpt/download_data.py --TEXT_FILE=my_notes.txt

`train.py` calls `prepare()` itself when nothing is prepared yet, so this script is only needed to choose
another corpus or tokenizer ahead of time. Nothing after this step reads raw text again.
"""

from pathlib import Path
from types import SimpleNamespace

from common.config import load_config
from common.corpora import network_available, prepare_corpus
from common.tokenizers import CharTokenizer, SentencePieceTokenizer
from common.tokens import read_meta, write_token_files
from phase1_foundation.project1_gpt import config

# Fixed ids 0..4. GPT-1 added its start, delimiter and extract tokens for fine-tuning (§3.3); we reserve them
# in the vocabulary up front, so their embeddings simply stay untrained until finetune.py learns them.
SPECIAL_TOKENS = ["<unk>", "<|endoftext|>", "<|start|>", "<|delim|>", "<|extract|>"]
END_OF_TEXT = "<|endoftext|>"  # separates documents in the token stream


def corpus_name(cfg: SimpleNamespace) -> str:
    """`auto` means the BooksCorpus stand-in when the network is there, the embedded Wikipedia sample when not."""
    if cfg.CORPUS != "auto" or cfg.TEXT_FILE:
        return cfg.CORPUS
    if network_available():
        return "books"
    print("offline: using the embedded wiki-sample corpus (--CORPUS=books downloads novels when online)")
    return "wiki-sample"


def prepare(cfg: SimpleNamespace) -> Path:
    """Return the folder holding tokenizer + token files for this config, building it if it is missing."""
    corpus = prepare_corpus(corpus_name(cfg), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    print(f"corpus: {corpus.describe()}")
    vocab = "" if cfg.TOKENIZER == "char" else str(cfg.VOCAB_SIZE)
    out_dir = Path(cfg.DATA_DIR) / "project1" / f"{corpus.path.stem}-{cfg.TOKENIZER}{vocab}"
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["val_fraction"] == cfg.VAL_FRACTION:
        return out_dir

    print(f"training a {cfg.TOKENIZER} tokenizer on {corpus.name} ...")
    if cfg.TOKENIZER == "char":
        tokenizer = CharTokenizer.train(corpus.iter_documents(), SPECIAL_TOKENS)
        tokenizer.save(out_dir)
    elif cfg.TOKENIZER == "bpe":
        tokenizer = SentencePieceTokenizer.train(
            corpus.iter_documents(), out_dir, cfg.VOCAB_SIZE,
            model_type="bpe", special_tokens=SPECIAL_TOKENS, unk_token="<unk>",
        )
    else:
        raise SystemExit(f"error: unknown tokenizer {cfg.TOKENIZER!r}; use --TOKENIZER=bpe or --TOKENIZER=char")

    print(f"encoding {corpus.name} with {tokenizer.vocab_size:,} tokens ...")
    meta = write_token_files(
        corpus.iter_documents(), tokenizer, out_dir,
        val_fraction=cfg.VAL_FRACTION, separator_id=tokenizer.token_to_id(END_OF_TEXT),
        extra_meta={"corpus": corpus.name, "corpus_path": str(corpus.path), "tokenizer": cfg.TOKENIZER},
    )
    print(f"wrote {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens to {out_dir}")
    return out_dir


def main(argv: list[str] | None = None) -> Path:
    return prepare(load_config(config, argv))


if __name__ == "__main__":
    main()
