"""Prepare chapter 3's data, once: corpus -> tokenizer -> sentences as token ids, documents kept.

    uv run python phase1_foundation/project3_contextual_embeddings/download_data.py  # wiki-sample
    uv run python phase1_foundation/project3_contextual_embeddings/download_data.py --CORPUS=wikitext-2
    uv run python phase1_foundation/project3_contextual_embeddings/download_data.py --TEXT_FILE=my_notes.txt

WikiText-2 (2M words) and WikiText-103 (103M) download when asked for. `train.py` calls
`prepare()` itself when nothing is prepared yet. Unlike chapter 1's flat token stream, BERT's next-sentence
pairs need to know where every sentence and every document starts, so besides the tokens we keep two offset
tables:

    {split}.bin               the token ids of every sentence, one after another (no separators)
    {split}_sentences.npy     int64 (S+1,): sentence s is tokens[sentences[s]:sentences[s+1]]
    {split}_documents.npy     int64 (D+1,): document d is sentences documents[d]:documents[d+1]
    meta.json                 written last: its presence means the rest is complete
"""

from array import array
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from common.data.corpora import choose_corpus, prepare_corpus
from common.data.sentences import document_sentences
from common.data.tokenizers import SentencePieceTokenizer, Tokenizer
from common.data.tokens import SPLITS, SplitWriter, read_meta
from common.errors import CourseError, run_main
from common.progress import progress_bar, say_how_long
from common.training.config import load_config
from phase1_foundation.project3_contextual_embeddings import config

# PAPER: BERT §3 uses [CLS] to open every input and [SEP] to close each segment; [MASK] stands in for the
# tokens to predict (§3.1). Fixed ids 0..4, so the model and the data agree without reading the tokenizer.
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)

TRAINING_RATE = 37.2e6  # characters a second SentencePiece reads to learn (root README, "Data")
ENCODING_RATE = 6.1e6  # characters a second cut into sentences and encoded (root README, "Data")
SUFFIXES = (".bin", "_sentences.npy", "_documents.npy")  # a split's files: tokens, sentence, document offsets


def encode_sentence(tokenizer: Tokenizer, sentence: str) -> list[int]:
    """Token ids of one sentence, with the space that precedes it in running text.

    The tokenizer learned words with their leading space ("▁the"); without one, every sentence's first word
    would be spelt in rarer pieces than the same word anywhere else. Encode your own text the same way.
    """
    return tokenizer.encode(" " + sentence)


def prepare(cfg: SimpleNamespace) -> Path:
    """Return the folder holding tokenizer + sentence files for this config, building it if it is missing."""
    corpus = prepare_corpus(choose_corpus(cfg, larger="wikitext-2"), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    print(f"corpus: {corpus.describe()}")
    out_dir = Path(cfg.DATA_DIR) / "project3" / f"{corpus.path.stem}-sp{cfg.VOCAB_SIZE}"
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["val_fraction"] == cfg.VAL_FRACTION:
        return out_dir

    # BPE like chapter 1, not BERT's WordPiece: both grow a vocabulary by merging pieces, and SentencePiece's
    # byte fallback means no word ever becomes [UNK].
    print(f"training a bpe tokenizer on {corpus.name} ...")
    say_how_long("reading", corpus.characters, TRAINING_RATE)
    tokenizer = SentencePieceTokenizer.train(
        corpus.iter_documents(), out_dir, cfg.VOCAB_SIZE,
        model_type="bpe", special_tokens=SPECIAL_TOKENS, unk_token="[UNK]",
    )
    print(f"encoding {corpus.name} sentence by sentence with {tokenizer.vocab_size:,} tokens ...")
    say_how_long("encoding", corpus.characters, ENCODING_RATE)
    meta = write_sentence_files(
        corpus.iter_documents(), tokenizer, out_dir, val_fraction=cfg.VAL_FRACTION,
        extra_meta={"corpus": corpus.name, "corpus_path": str(corpus.path)},
    )
    for split, counts in meta["counts"].items():
        print(f"{split}: {counts['tokens']:,} tokens, {counts['sentences']:,} sentences, "
              f"{counts['documents']:,} documents")
    print(f"wrote {out_dir}")
    return out_dir


def write_sentence_files(
    documents: Iterable[str], tokenizer: Tokenizer, out_dir: Path, *, val_fraction: float,
    extra_meta: dict | None = None,
) -> dict:
    """Encode `documents` sentence by sentence into the files listed at the top; return the meta dict.

    Documents go whole to train or val by the rule chapter 1's token files follow
    (common.data.tokens.SplitWriter): val pairs come from documents training never saw, and a NotNext B, drawn
    from another document of the same split, too. Documents of one sentence give no IsNext pair but still
    serve masked LM and NotNext: kept. Empty ones are written nowhere (their index still counts in
    val_documents). Tokens are streamed to disk;
    only the offsets stay in memory.
    """
    sentences = {split: array("q", [0]) for split in SPLITS}  # offsets into each split's tokens
    docs = {split: array("q", [0]) for split in SPLITS}  # offsets into each split's sentences
    with SplitWriter(out_dir, tokenizer.vocab_size, val_fraction) as writer:
        for text in progress_bar(documents, desc="encoding", unit=" documents"):
            ids = [encode_sentence(tokenizer, s) for s in document_sentences(text)]
            split = writer.write(np.fromiter(chain.from_iterable(ids), np.int64))
            if split is None:
                continue
            sentences[split].extend((sentences[split][-1] + np.cumsum([len(s) for s in ids])).tolist())
            docs[split].append(len(sentences[split]) - 1)
        counts = {
            split: {"documents": len(docs[split]) - 1, "sentences": len(sentences[split]) - 1,
                    "tokens": sentences[split][-1]}
            for split in SPLITS
        }
        if not all(c["documents"] for c in counts.values()):
            raise CourseError(
                f"error: {writer.documents} document(s) split into {counts['train']['documents']} train and "
                f"{counts['val']['documents']} val; give more (two blank lines end a document in a text file)"
            )
        offsets = {f"{split}_{name}.npy": np.asarray(table[split], dtype=np.int64)
                   for split in SPLITS for name, table in (("sentences", sentences), ("documents", docs))}
        return writer.publish({"counts": counts, **(extra_meta or {})}, files=offsets)


def load_split(folder: Path, split: str) -> tuple[np.memmap, np.ndarray, np.ndarray]:
    """(tokens memmap, sentence offsets, document offsets) of one split, checked against meta.json."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    folder = Path(folder)
    meta = read_meta(folder)
    counts = meta["counts"][split]
    tokens_path, sentences_path, documents_path = paths = [folder / f"{split}{suffix}" for suffix in SUFFIXES]
    size = counts["tokens"] * np.dtype(meta["dtype"]).itemsize
    complete = all(path.exists() for path in paths) and tokens_path.stat().st_size == size
    if complete:
        sentences, documents = np.load(sentences_path), np.load(documents_path)
        complete = (len(sentences) == counts["sentences"] + 1 and sentences[-1] == counts["tokens"]
                    and len(documents) == counts["documents"] + 1 and documents[-1] == counts["sentences"])
    if not complete:
        raise CourseError(f"error: the {split} files in {folder} are missing or incomplete; delete {folder} "
                          "and run download_data.py")
    return np.memmap(tokens_path, dtype=meta["dtype"], mode="r"), sentences, documents


def main(argv: list[str] | None = None) -> Path:
    return prepare(load_config(config, argv))


if __name__ == "__main__":
    run_main(main)
