"""Tokenizers: text <-> lists of integer ids.

Every tokenizer is a `Tokenizer` (the Protocol below), so a chapter never cares which one it holds. Here
are the two we train on our own corpora:

* CharTokenizer: one id per character. The simplest thing that works, and a baseline for BPE.
* SentencePieceTokenizer: subwords (BPE or unigram) with byte fallback, so any UTF-8 text survives
  encode -> decode unchanged.

The vocabulary a model was released with (GPT-1's BPE, BERT's WordPiece) lives with that model, in its
chapter's tokenizer.py, whose load_tokenizer recognises those files and hands every other folder to the one
here. What those two share, BERT's basic tokenizer (normalise, then split off words and punctuation), is here.

Special tokens ("<|endoftext|>", "[MASK]", ...) of the tokenizers we train always take the first ids, 0..k-1,
in the order given. Their encode() treats its input as plain text: writing "<|endoftext|>" in a string gives
the pieces of those 13 characters, never the special id, so no user text can forge a document boundary or a
mask. Programs insert special tokens by id (`token_to_id`), and decode() shows them literally so you can see
where they are. A released vocabulary follows its own model's tokenizer instead (BERT's reads "[MASK]" typed
in the text as the mask token).
"""

import io
import itertools
import json
import os
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import sentencepiece as spm

from common.errors import CourseError
from common.files import write_atomic

# SentencePiece holds its training lines in memory; a random million of them is plenty to learn a vocabulary.
MAX_TRAINING_LINES = 1_000_000
# Lines (paragraphs) longer than this many bytes are skipped by SentencePiece; the default 4192 would skip
# many Wikipedia paragraphs.
MAX_LINE_BYTES = 1 << 16


@runtime_checkable  # so a test can check that every tokenizer of the course has these members
class Tokenizer(Protocol):
    """What a chapter may ask of any tokenizer, so that its code runs unchanged on every one of them.

        ids = tokenizer.encode("Hello world")      # list[int]
        text = tokenizer.decode(ids)               # str
        tokenizer.token_to_id("<|endoftext|>")     # int, the id of one token
        tokenizer.save(folder); load_tokenizer(folder)
    """

    vocab_size: int  # every id is < vocab_size: the number of rows of a model's embedding table

    def encode(self, text: str) -> list[int]:
        """Special tokens typed in `text` stay plain text in the tokenizers we train (see above)."""

    def decode(self, ids: Iterable[int]) -> str:
        """Accepts numpy and torch integers too, so a model's output can be decoded as it comes."""

    def token_to_id(self, token: str) -> int:
        """A misspelt special token raises KeyError rather than quietly becoming the unknown token."""

    def save(self, folder: Path) -> None:
        """Write the vocabulary into `folder`, in the files load_tokenizer recognises it by."""


def _check_special_tokens(special_tokens: Sequence[str], unk_token: str) -> None:
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special tokens must be distinct: {list(special_tokens)}")
    if unk_token not in special_tokens:
        raise ValueError(
            f"the unknown token {unk_token!r} must be one of the special tokens {list(special_tokens)}"
        )


# --- characters ---------------------------------------------------------------------------------------------


class CharTokenizer:
    """One token per character: special tokens first, then every character of the training text, sorted.

    A character never seen in training becomes "<unk>", so decode(encode(text)) == text only for text made of
    known characters. Saved as folder/"tokenizer.json".
    """

    FILE = "tokenizer.json"
    UNK = "<unk>"

    def __init__(self, special_tokens: Sequence[str], characters: Sequence[str]):
        _check_special_tokens(special_tokens, self.UNK)
        self.special_tokens = list(special_tokens)
        self.characters = list(characters)
        self.itos = self.special_tokens + self.characters  # id -> token
        self.stoi = {token: i for i, token in enumerate(self.itos)}  # token -> id
        self.vocab_size = len(self.itos)
        self.unk_id = self.stoi[self.UNK]

    @classmethod
    def train(cls, texts: Iterable[str], special_tokens: Sequence[str],
              min_count: int = 1) -> "CharTokenizer":
        """Collect the characters of `texts` seen at least `min_count` times (streamed: only the counts are
        kept in memory). A rarer character becomes <unk>: a corpus's long tail of symbols would otherwise
        give a small model an embedding table larger than the rest of it."""
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(text)
        kept = {ch for ch, count in counts.items() if count >= min_count}
        return cls(special_tokens, sorted(kept - set(special_tokens)))

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(ch, self.unk_id) for ch in text]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.itos[int(i)] for i in ids)

    def token_to_id(self, token: str) -> int:
        return self.stoi[token]

    def save(self, folder: Path) -> None:
        state = {"type": "char", "special_tokens": self.special_tokens, "characters": self.characters}
        write_atomic(Path(folder) / self.FILE, json.dumps(state, ensure_ascii=False, indent=1).encode())

    @classmethod
    def load(cls, folder: Path) -> "CharTokenizer":
        path = Path(folder) / cls.FILE
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.get("type") != "char":
            raise CourseError(
                f"error: {path} is not a character tokenizer; delete {folder} and run download_data.py"
            )
        return cls(state["special_tokens"], state["characters"])


# --- SentencePiece (our own BPE or unigram vocabulary) ------------------------------------------------------


class _TrainingLines:
    """The non-empty lines of `texts`, streamed to SentencePiece, which learns from lines and never sees "\n".

    ("\n" is still encodable afterwards: byte fallback gives it a token of its own, <0x0A>.) We count the
    lines to tell an empty corpus from other failures, and keep any exception the texts raise (Ctrl-C, a
    corpus error), because SentencePiece would report it as a RuntimeError of its own.
    """

    def __init__(self, texts: Iterable[str]):
        self.texts = texts
        self.count = 0
        self.error: BaseException | None = None

    def __iter__(self) -> Iterator[str]:
        try:
            for text in self.texts:
                for line in text.split("\n"):
                    if line:
                        self.count += 1
                        yield line
        except BaseException as e:
            self.error = e
            raise


class SentencePieceTokenizer:
    """A subword vocabulary learned with SentencePiece, saved as folder/"tokenizer.model".

    Trained with identity normalisation (no Unicode folding, spaces kept as they are, no space added in
    front), so the only change encode -> decode could make is to the character "▁" (U+2581), which
    SentencePiece uses to mark spaces and so decodes as " ". With byte_fallback every other character it has
    not learned is spelt as its UTF-8 bytes (<0x00>..<0xFF>, like GPT-2), and nothing ever becomes the
    unknown token.
    """

    FILE = "tokenizer.model"

    def __init__(self, model_proto: bytes):
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)
        self.vocab_size = self.processor.get_piece_size()
        # Control symbols and the unknown token: the special tokens, at ids 0..k-1.
        self.special_tokens = {
            i: self.processor.id_to_piece(i)
            for i in range(self.vocab_size)
            if self.processor.is_control(i) or self.processor.is_unknown(i)
        }

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        out_dir: Path,
        vocab_size: int,
        *,
        model_type: str = "bpe",
        special_tokens: Sequence[str],
        unk_token: str,
        byte_fallback: bool = True,
    ) -> "SentencePieceTokenizer":
        """Learn a vocabulary of at most `vocab_size` pieces from `texts` and save it in `out_dir`.

        How the special ids are pinned: SentencePiece first places its four meta pieces at the ids we name.
        We give it only the unknown token (unk_id = its position in `special_tokens`; bos/eos/pad = -1 switch
        the others off). The remaining special tokens are control symbols, and SentencePiece hands those the
        lowest free ids in the order listed. Together they fill ids 0..k-1 exactly as given; the 256 byte
        pieces (with byte_fallback) and then the learned pieces follow.

        A corpus too small for `vocab_size` gets a smaller vocabulary instead of an error (a soft limit);
        the actual size is printed and is `vocab_size` of the result.
        """
        _check_special_tokens(special_tokens, unk_token)
        model = io.BytesIO()
        lines = _TrainingLines(texts)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_writer=model,
                model_type=model_type,
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                unk_id=special_tokens.index(unk_token),
                unk_piece=unk_token,
                bos_id=-1,
                eos_id=-1,
                pad_id=-1,
                control_symbols=[token for token in special_tokens if token != unk_token],
                byte_fallback=byte_fallback,
                normalization_rule_name="identity",
                remove_extra_whitespaces=False,
                add_dummy_prefix=False,
                input_sentence_size=MAX_TRAINING_LINES,
                shuffle_input_sentence=True,
                max_sentence_length=MAX_LINE_BYTES,
                num_threads=os.cpu_count() or 1,
                minloglevel=2,  # warnings and errors only: the info log is hundreds of lines
            )
        except RuntimeError as e:
            if lines.error is not None:
                raise lines.error from None
            if lines.count == 0:
                raise CourseError(
                    "error: the corpus has no text to train a tokenizer on; check --CORPUS"
                ) from None
            too_small = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(e))
            if not too_small:
                raise
            needs = "the special tokens, 256 byte tokens" if byte_fallback else "the special tokens"
            raise CourseError(
                f"error: --VOCAB_SIZE={vocab_size} is too small: {needs} and the corpus's characters already "
                f"take {too_small[1]}; raise --VOCAB_SIZE"
            ) from None
        tokenizer = cls(model.getvalue())
        if tokenizer.special_tokens != dict(enumerate(special_tokens)):  # the promise above, checked
            raise RuntimeError(f"sentencepiece placed the special tokens as {tokenizer.special_tokens}")
        if tokenizer.vocab_size < vocab_size:
            print(
                f"tokenizer: this corpus supports {tokenizer.vocab_size:,} tokens, not {vocab_size:,}; "
                "using those"
            )
        tokenizer.save(out_dir)
        return tokenizer

    def encode(self, text: str) -> list[int]:
        return self.processor.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        """Decode runs of ordinary ids with SentencePiece and write special tokens out literally.

        SentencePiece alone would print control symbols as nothing and the unknown token as " ⁇ ".
        """
        parts = []
        ids = [int(i) for i in ids]  # numpy or torch integers -> Python ints
        for special, run in itertools.groupby(ids, key=self.special_tokens.__contains__):
            run = list(run)
            text = "".join(self.special_tokens[i] for i in run) if special else self.processor.decode(run)
            parts.append(text)
        return "".join(parts)

    def token_to_id(self, token: str) -> int:
        i = self.processor.piece_to_id(token)  # unknown pieces answer with the unknown token's id
        if self.processor.id_to_piece(i) != token:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return i

    def save(self, folder: Path) -> None:
        write_atomic(Path(folder) / self.FILE, self.processor.serialized_model_proto())

    @classmethod
    def load(cls, folder: Path) -> "SentencePieceTokenizer":
        return cls((Path(folder) / cls.FILE).read_bytes())


# --- BERT's basic tokenizer: the text normalisation both released vocabularies start from -------------------
#
# Google's BERT cleans its text, strips accents, lowercases, and splits off every punctuation character before
# WordPiece sees a word. OpenAI cleaned GPT-1's text with ftfy and spaCy; without them, transformers'
# OpenAIGPTTokenizer falls back to this same basic tokenizer, and so do we, to give the same ids as it does.
# Chapter 1's GPT1BPETokenizer and chapter 3's WordPieceTokenizer both start here.


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    # Every ASCII symbol counts, although "$", "+" or "^" are not punctuation to Unicode.
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    """CJK ideographs are written without spaces, so the basic tokenizer makes each one a word of its own."""
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B920 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def basic_normalize(text: str) -> str:
    """Clean, strip accents, lowercase: all that happens to the text before it is split into words."""
    text = "".join(" " if ch.isspace() else ch for ch in text if ch != "\ufffd" and not _is_control(ch))
    text = "".join(f" {ch} " if _is_cjk(ch) else ch for ch in text)
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
    return text.lower()


def basic_words(text: str) -> Iterator[str]:
    """Split at whitespace, and make each punctuation character a word of its own: "hi, you!" -> hi , you !"""
    for chunk in text.split():
        word = ""
        for ch in chunk:
            if _is_punctuation(ch):
                if word:
                    yield word
                yield ch
                word = ""
            else:
                word += ch
        if word:
            yield word


# --- loading whichever one a folder holds ------------------------------------------------------------------


def load_tokenizer(folder: Path) -> Tokenizer:
    """Load the tokenizer we trained into `folder`, recognised by its file.

    A chapter whose model was released with a vocabulary of its own has a load_tokenizer that looks for that
    first and hands every other folder here.
    """
    folder = Path(folder)
    if (folder / SentencePieceTokenizer.FILE).exists():
        return SentencePieceTokenizer.load(folder)
    if (folder / CharTokenizer.FILE).exists():
        return CharTokenizer.load(folder)
    raise CourseError(
        f"error: no tokenizer in {folder} (tokenizer.model or tokenizer.json); run download_data.py"
    )
