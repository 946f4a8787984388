"""Tokenizers: text <-> lists of integer ids.

Four tokenizers share one small interface, so a chapter never cares which one it holds:

    ids = tokenizer.encode("Hello world")      # list[int]
    text = tokenizer.decode(ids)               # str
    tokenizer.vocab_size                       # int, every id is < vocab_size
    tokenizer.token_to_id("<|endoftext|>")     # int, the id of one token
    tokenizer.save(folder); load_tokenizer(folder)

* CharTokenizer: one id per character. The simplest thing that works, and a baseline for BPE.
* SentencePieceTokenizer: subwords (BPE or unigram) trained on our own corpus, with byte fallback, so any
  UTF-8 text survives encode -> decode unchanged.
* GPT1BPETokenizer: reads the vocabulary OpenAI released with GPT-1, to run the original weights.
* WordPieceTokenizer: reads the vocabulary Google released with BERT (vocab.txt), to run the original weights.

Special tokens ("<|endoftext|>", "[MASK]", ...) of the tokenizers we train always take the first ids, 0..k-1,
in the order given. Their encode() treats its input as plain text: writing "<|endoftext|>" in a string gives
the pieces of those 13 characters, never the special id, so no user text can forge a document boundary or a
mask. Programs insert special tokens by id (`token_to_id`), and decode() shows them literally so you can see
where they are. The exception is BERT's released vocabulary: there "[MASK]" typed in the text is the mask
token, as in BERT's own tokenizer, so a learner can ask the original model to fill in a blank.
"""

import functools
import io
import itertools
import json
import os
import re
import string
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import sentencepiece as spm

# SentencePiece holds its training lines in memory; a random million of them is plenty to learn a vocabulary.
MAX_TRAINING_LINES = 1_000_000
# Lines (paragraphs) longer than this many bytes are skipped by SentencePiece; the default 4192 would skip
# many Wikipedia paragraphs.
MAX_LINE_BYTES = 1 << 16


def _write_atomic(path: Path, data: bytes) -> None:
    """Write a file so that a crash leaves either the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _check_special_tokens(special_tokens: Sequence[str], unk_token: str) -> None:
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special tokens must be distinct: {list(special_tokens)}")
    if unk_token not in special_tokens:
        raise ValueError(f"the unknown token {unk_token!r} must be one of the special tokens {list(special_tokens)}")


# --- characters -----------------------------------------------------------------------------------------------


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
    def train(cls, texts: Iterable[str], special_tokens: Sequence[str]) -> "CharTokenizer":
        """Collect the characters of `texts` (streamed: only the set of characters is kept in memory)."""
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        return cls(special_tokens, sorted(seen - set(special_tokens)))

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(ch, self.unk_id) for ch in text]

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.itos[int(i)] for i in ids)

    def token_to_id(self, token: str) -> int:
        return self.stoi[token]

    def save(self, folder: Path) -> None:
        state = {"type": "char", "special_tokens": self.special_tokens, "characters": self.characters}
        _write_atomic(Path(folder) / self.FILE, json.dumps(state, ensure_ascii=False, indent=1).encode())

    @classmethod
    def load(cls, folder: Path) -> "CharTokenizer":
        path = Path(folder) / cls.FILE
        state = json.loads(path.read_text(encoding="utf-8"))
        if state.get("type") != "char":
            raise SystemExit(f"error: {path} is not a character tokenizer; delete {folder} and run download_data.py")
        return cls(state["special_tokens"], state["characters"])


# --- SentencePiece (our own BPE or unigram vocabulary) -------------------------------------------------------


class _TrainingLines:
    """The non-empty lines of `texts`, streamed to SentencePiece, which learns from lines and never sees "\n".

    ("\n" is still encodable afterwards: byte fallback gives it a token of its own, <0x0A>.) We count the lines
    to tell an empty corpus from other failures, and keep any exception the texts raise (Ctrl-C, a corpus
    error), because SentencePiece would report it as a RuntimeError of its own.
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

    Trained with identity normalisation (no Unicode folding, spaces kept as they are, no space added in front),
    so the only change encode -> decode could make is to the character "▁" (U+2581), which SentencePiece uses
    to mark spaces and so decodes as " ". With byte_fallback every other character it has not learned is spelt as its
    UTF-8 bytes (<0x00>..<0xFF>, like GPT-2), and nothing ever becomes the unknown token.
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
                raise SystemExit("error: the corpus has no text to train a tokenizer on; check --CORPUS") from None
            too_small = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(e))
            if not too_small:
                raise
            needs = "the special tokens, 256 byte tokens" if byte_fallback else "the special tokens"
            raise SystemExit(
                f"error: --VOCAB_SIZE={vocab_size} is too small: {needs} and the corpus's characters already "
                f"take {too_small[1]}; raise --VOCAB_SIZE"
            ) from None
        tokenizer = cls(model.getvalue())
        if tokenizer.special_tokens != dict(enumerate(special_tokens)):  # the promise above, checked
            raise RuntimeError(f"sentencepiece placed the special tokens as {tokenizer.special_tokens}")
        if tokenizer.vocab_size < vocab_size:
            print(f"tokenizer: this corpus supports {tokenizer.vocab_size:,} tokens, not {vocab_size:,}; using those")
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
            parts.append("".join(self.special_tokens[i] for i in run) if special else self.processor.decode(run))
        return "".join(parts)

    def token_to_id(self, token: str) -> int:
        i = self.processor.piece_to_id(token)  # unknown pieces answer with the unknown token's id
        if self.processor.id_to_piece(i) != token:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return i

    def save(self, folder: Path) -> None:
        _write_atomic(Path(folder) / self.FILE, self.processor.serialized_model_proto())

    @classmethod
    def load(cls, folder: Path) -> "SentencePieceTokenizer":
        return cls((Path(folder) / cls.FILE).read_bytes())


# --- GPT-1's released BPE vocabulary -----------------------------------------------------------------------------


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    # Every ASCII symbol counts, although "$", "+" or "^" are not punctuation to Unicode.
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    """CJK ideographs are written without spaces, so BERT's tokenizer makes each one a word of its own."""
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


def _bert_normalize(text: str) -> str:
    """Clean, strip accents, lowercase: what BERT's basic tokenizer does before splitting into words."""
    text = "".join(" " if ch.isspace() else ch for ch in text if ch != "\ufffd" and not _is_control(ch))
    text = "".join(f" {ch} " if _is_cjk(ch) else ch for ch in text)
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
    return text.lower()


def _bert_words(text: str) -> Iterator[str]:
    """Split at whitespace, and make every punctuation character a word of its own: "hi, you!" -> hi , you !"""
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


def _merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Replace every occurrence of `pair` in `symbols`, left to right, by the two symbols joined."""
    merged, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            merged.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


class GPT1BPETokenizer:
    """The 40,478-token BPE vocabulary of GPT-1, read from a transformers-layout folder (vocab.json, merges.txt).

    OpenAI tokenized with spaCy and ftfy; without them (as here, and in transformers) the text is lowercased and
    split like BERT's basic tokenizer. Each word then starts as characters, the last one marked as ending a word
    ("o</w>"), and the learned merges are applied, lowest rank (learned earliest) first. The word-end marks are
    what decode() turns back into spaces, so decoding gives normalised text: "Hello, World!" -> "hello , world !".
    Characters outside the vocabulary become "<unk>" when the vocabulary has it, and are dropped when not.
    """

    VOCAB, MERGES = "vocab.json", "merges.txt"
    END_OF_WORD = "</w>"

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.vocab = vocab  # token -> id
        self.merges = merges  # in the order they were learned
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.id_to_token = {i: token for token, i in vocab.items()}
        self.vocab_size = len(vocab)
        self.unk_id = vocab.get("<unk>")
        # Words repeat a lot (Zipf): remember the ids of recent ones instead of merging them again.
        self._encode_word = functools.lru_cache(maxsize=1 << 16)(self._encode_word_uncached)

    def _bpe(self, word: str) -> list[str]:
        """Merge the characters of one word into vocabulary tokens: "lower" -> ["low", "er</w>"]."""
        symbols = [*word[:-1], word[-1] + self.END_OF_WORD]
        while len(symbols) > 1:
            pair = min(itertools.pairwise(symbols), key=lambda p: self.ranks.get(p, len(self.ranks)))
            if pair not in self.ranks:
                break
            symbols = _merge_pair(symbols, pair)
        return symbols

    def _encode_word_uncached(self, word: str) -> tuple[int, ...]:
        ids = (self.vocab.get(token, self.unk_id) for token in self._bpe(word))
        return tuple(i for i in ids if i is not None)

    def encode(self, text: str) -> list[int]:
        return [i for word in _bert_words(_bert_normalize(text)) for i in self._encode_word(word)]

    def decode(self, ids: Iterable[int]) -> str:
        text = "".join(self.id_to_token[int(i)] for i in ids)
        return text.removesuffix(self.END_OF_WORD).replace(self.END_OF_WORD, " ")

    def token_to_id(self, token: str) -> int:
        return self.vocab[token]

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        _write_atomic(folder / self.VOCAB, json.dumps(self.vocab, ensure_ascii=False).encode())
        merges = "".join(f"{a} {b}\n" for a, b in self.merges)
        _write_atomic(folder / self.MERGES, f"#version: 0.2\n{merges}".encode())

    @classmethod
    def load(cls, folder: Path) -> "GPT1BPETokenizer":
        folder = Path(folder)
        vocab = json.loads((folder / cls.VOCAB).read_text(encoding="utf-8"))
        lines = (folder / cls.MERGES).read_text(encoding="utf-8").splitlines()
        merges = [tuple(line.split()) for line in lines if line and not line.startswith("#version")]
        return cls(vocab, merges)


# --- BERT's released WordPiece vocabulary -------------------------------------------------------------------


class WordPieceTokenizer:
    """BERT's WordPiece vocabulary (30,522 tokens in bert-base-uncased), read from vocab.txt: one token a line,
    its id the line number.

    The text is cleaned, accents stripped and lowercased, and split at whitespace and punctuation (BERT's basic
    tokenizer, as for GPT-1 above). Each word is then cut greedily into the longest vocabulary entries from the
    left; a piece that continues a word is written with "##" ("unaffable" -> un ##aff ##able). A word that
    cannot be cut, or is longer than 100 characters, becomes "[UNK]" as a whole. BERT's special tokens typed
    in the text ("[MASK]", "[SEP]", ...) are never split and give their own ids. decode() joins the tokens
    with spaces and glues the "##" pieces back on, so it returns normalised text: "Hello, World!" ->
    "hello , world !".
    """

    FILE = "vocab.txt"
    SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    MAX_WORD_CHARS = 100  # google-research/bert tokenization.py max_input_chars_per_word

    def __init__(self, tokens: Sequence[str]):
        self.tokens = list(tokens)  # id -> token
        self.vocab = {token: i for i, token in enumerate(self.tokens)}  # token -> id
        if "[UNK]" not in self.vocab:
            raise ValueError("a WordPiece vocabulary needs the token [UNK]")
        self.vocab_size = len(self.tokens)
        self.unk_id = self.vocab["[UNK]"]
        specials = [re.escape(t) for t in self.SPECIAL_TOKENS if t in self.vocab]
        self._specials = re.compile(f"({'|'.join(specials)})")  # split() keeps the specials at odd indices
        self._encode_word = functools.lru_cache(maxsize=1 << 16)(self._encode_word_uncached)

    def _encode_word_uncached(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match-first: "unaffable" -> un, ##aff, ##able."""
        if len(word) > self.MAX_WORD_CHARS:
            return (self.unk_id,)
        ids, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):  # the longest piece first
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
            else:  # no piece of the vocabulary starts here: the whole word is unknown
                return (self.unk_id,)
            start = end
        return tuple(ids)

    def encode(self, text: str) -> list[int]:
        ids = []
        for i, part in enumerate(self._specials.split(text)):
            if i % 2:  # a special token, as typed
                ids.append(self.vocab[part])
            else:
                ids.extend(t for word in _bert_words(_bert_normalize(part)) for t in self._encode_word(word))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.tokens[int(i)] for i in ids).replace(" ##", "")

    def token_to_id(self, token: str) -> int:
        if token not in self.vocab:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return self.vocab[token]

    def save(self, folder: Path) -> None:
        _write_atomic(Path(folder) / self.FILE, "".join(f"{token}\n" for token in self.tokens).encode())

    @classmethod
    def load(cls, folder: Path) -> "WordPieceTokenizer":
        path = Path(folder) / cls.FILE
        lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines(): tokens may hold odd characters
        if lines[-1] == "":
            lines.pop()  # the newline that ends the last line
        if "[UNK]" not in lines:
            raise SystemExit(f"error: {path} has no [UNK] token; it is not a BERT WordPiece vocabulary")
        return cls(lines)


def load_tokenizer(
    folder: Path,
) -> CharTokenizer | SentencePieceTokenizer | GPT1BPETokenizer | WordPieceTokenizer:
    """Load whichever tokenizer `folder` holds, recognised by its files.

    GPT-1's and BERT's files come first: a transformers folder may also hold a tokenizer.json of its own.
    """
    folder = Path(folder)
    if (folder / GPT1BPETokenizer.VOCAB).exists() and (folder / GPT1BPETokenizer.MERGES).exists():
        return GPT1BPETokenizer.load(folder)
    if (folder / WordPieceTokenizer.FILE).exists():
        return WordPieceTokenizer.load(folder)
    if (folder / SentencePieceTokenizer.FILE).exists():
        return SentencePieceTokenizer.load(folder)
    if (folder / CharTokenizer.FILE).exists():
        return CharTokenizer.load(folder)
    raise SystemExit(
        f"error: no tokenizer in {folder} (tokenizer.model, tokenizer.json, vocab.txt, or vocab.json + "
        "merges.txt); run download_data.py"
    )
