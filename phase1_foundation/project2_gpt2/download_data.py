"""Prepare chapter 2's data, once: corpus -> byte-level BPE -> train.bin / val.bin.

    uv run python phase1_foundation/project2_gpt2/download_data.py  # the embedded wiki-sample
    uv run python phase1_foundation/project2_gpt2/download_data.py --CORPUS=wikitext-103  # 192 MB download
    uv run python phase1_foundation/project2_gpt2/download_data.py --TOKENIZER=gpt2  # GPT-2's vocabulary
    uv run python phase1_foundation/project2_gpt2/download_data.py --TEXT_FILE=my_notes.txt --VOCAB_SIZE=4096

`train.py` calls `prepare()` itself when nothing is prepared yet, so this script is only needed to prepare
another corpus or tokenizer ahead of time. Nothing after this step reads raw text again, except zero_shot.py,
which builds its last-word task from the held-out documents that meta.json lists. README, "Run it".
"""

from pathlib import Path
from types import SimpleNamespace

from common.data.corpora import Corpus, choose_corpus, prepare_corpus
from common.data.tokens import read_meta, write_token_files
from common.errors import CourseError, run_main
from common.progress import say_how_long
from common.training.config import load_config
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.tokenizer import ByteBPETokenizer, gpt2_files, load_tokenizer

LARGER_CORPUS = "wikitext-103"  # the opt-in: Wikipedia again, 200 times wiki-sample (a WebText stand-in)
CHARACTERS_PER_TOKEN_TYPE = 500  # VOCAB_SIZE=0: one token type per 500 characters (see auto_vocab_size)
TOKENIZER_TRAINING_CHARACTERS = 20_000_000  # BPE learns its merges from at most this much text
ENCODING_RATE = 4.9e6  # characters a second the byte-level BPE encodes a large corpus, two CPU cores (README)


def auto_vocab_size(characters: int) -> int:
    """A vocabulary sized to the corpus: one token type per CHARACTERS_PER_TOKEN_TYPE characters, a multiple
    of 64 (GPU matmuls like it), between 512 and GPT-2's 50,257.

    Too large a vocabulary for the text leaves most tokens seen a handful of times, each with an embedding
    that barely trains; too small makes sequences long. At about 500 characters per type the average token
    occurs some hundred times. It is a rule of thumb, not a law: VOCAB_SIZE overrides it.
    """
    return min(50257, max(512, round(characters / CHARACTERS_PER_TOKEN_TYPE / 64) * 64))


def training_text(corpus: Corpus, limit: int = TOKENIZER_TRAINING_CHARACTERS):
    """The corpus's first documents, up to `limit` characters: enough to learn merges, in bounded time."""
    total = 0
    for document in corpus.iter_documents():
        yield document
        total += len(document)
        if total >= limit:
            return


def prepare(cfg: SimpleNamespace) -> Path:
    """Return the folder holding tokenizer + token files for this config, building it if it is missing."""
    corpus = prepare_corpus(choose_corpus(cfg, larger=LARGER_CORPUS), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    print(f"corpus: {corpus.describe()}")
    if cfg.TOKENIZER == "gpt2":
        label = "gpt2"
    elif cfg.TOKENIZER == "bpe":
        vocab_size = cfg.VOCAB_SIZE or auto_vocab_size(corpus.characters)
        if vocab_size < 257:
            raise CourseError(f"error: --VOCAB_SIZE={vocab_size} is too small; a byte-level BPE needs 256 "
                              "byte tokens plus <|endoftext|>, so at least 257 (0 sizes it to the corpus)")
        label = f"bpe{vocab_size}"
    else:
        raise CourseError(f"error: unknown tokenizer {cfg.TOKENIZER!r}; "
                          "use --TOKENIZER=bpe or --TOKENIZER=gpt2")
    out_dir = Path(cfg.DATA_DIR) / "project2" / f"{corpus.path.stem}-{label}"
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["val_fraction"] == cfg.VAL_FRACTION:
        return out_dir

    if cfg.TOKENIZER == "gpt2":
        tokenizer = ByteBPETokenizer.from_files(*gpt2_files(Path(cfg.DATA_DIR)))
    else:
        print(f"training a byte-level BPE of {vocab_size:,} tokens on {corpus.name} ...")
        tokenizer = ByteBPETokenizer.train(training_text(corpus), vocab_size)
    tokenizer.save(out_dir)

    print(f"encoding {corpus.name} with {tokenizer.vocab_size:,} tokens ...")
    say_how_long("encoding", corpus.characters, ENCODING_RATE)
    meta = write_token_files(
        corpus.iter_documents(), tokenizer, out_dir,
        val_fraction=cfg.VAL_FRACTION, separator_id=tokenizer.eot_id,
        extra_meta={"corpus": corpus.name, "corpus_path": str(corpus.path), "tokenizer": cfg.TOKENIZER},
    )
    print(f"wrote {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens to {out_dir}")
    return out_dir


def main(argv: list[str] | None = None) -> Path:
    cfg = load_config(config, argv)
    data_dir = prepare(cfg)
    tokenizer = load_tokenizer(data_dir)
    meta = read_meta(data_dir)
    print(f"{tokenizer.vocab_size:,} tokens; {meta['train_tokens']:,} train / {meta['val_tokens']:,} val")
    return data_dir


if __name__ == "__main__":
    run_main(main)
