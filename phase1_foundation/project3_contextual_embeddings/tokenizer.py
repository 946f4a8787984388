"""BERT's released vocabulary: the WordPiece that Google published with the weights (30,522 tokens in
bert-base-uncased, vocab.txt), so that the original model (`hf_weights.from_hf`, `embed.py --HF_DIR`) reads
the same ids it was trained on.

Our own runs train a SentencePiece BPE on our corpus instead, as in chapter 1 (common/data/tokenizers.py);
load_tokenizer below reads either, recognising the released vocabulary by its file.

Read top to bottom: WordPieceTokenizer -> load_tokenizer. Before the vocabulary is used, BERT's basic
tokenizer (common/data/tokenizers.py) cleans, lowercases and splits the text into words.
"""

import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from common.data.tokenizers import Tokenizer, basic_normalize, basic_words
from common.data.tokenizers import load_tokenizer as load_trained_tokenizer
from common.errors import CourseError
from common.files import write_atomic

# --- WordPiece ----------------------------------------------------------------------------------------------


class WordPieceTokenizer:
    """BERT's WordPiece vocabulary, read from vocab.txt: one token a line, its id the line number.

    BERT's basic tokenizer gives the words. Each word is then cut greedily into the longest vocabulary
    entries from the left; a piece that continues a word is written with "##" ("unaffable" -> un ##aff
    ##able). A word that cannot be cut, or is longer than 100 characters, becomes "[UNK]" as a whole.
    decode() joins the tokens with spaces and glues the "##" pieces back on, so it returns normalised text:
    "Hello, World!" -> "hello , world !".

    Unlike the tokenizers we train, BERT's special tokens typed in the text ("[MASK]", "[SEP]", ...) are never
    split and give their own ids, as in BERT's own tokenizer, so you can ask the original model to fill in a
    blank by writing "[MASK]".
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
        # Words repeat a lot (Zipf): remember the ids of recent ones instead of cutting them again.
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
                words = basic_words(basic_normalize(part))
                ids.extend(t for word in words for t in self._encode_word(word))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.tokens[int(i)] for i in ids).replace(" ##", "")

    def token_to_id(self, token: str) -> int:
        if token not in self.vocab:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return self.vocab[token]

    def save(self, folder: Path) -> None:
        write_atomic(Path(folder) / self.FILE, "".join(f"{token}\n" for token in self.tokens).encode())

    @classmethod
    def load(cls, folder: Path) -> "WordPieceTokenizer":
        path = Path(folder) / cls.FILE
        # split("\n"), not splitlines(): a token may be a character that splitlines() takes for a line end
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines[-1] == "":
            lines.pop()  # the newline that ends the last line
        if "[UNK]" not in lines:
            raise CourseError(f"error: {path} has no [UNK] token; it is not a BERT WordPiece vocabulary")
        return cls(lines)


def load_tokenizer(folder: Path) -> Tokenizer:
    """BERT's released vocabulary if `folder` holds it, else the tokenizer we trained
    (common/data/tokenizers.py).

    vocab.txt is looked for first: a transformers folder may also hold a tokenizer.json of its own, which is
    not ours.
    """
    folder = Path(folder)
    if (folder / WordPieceTokenizer.FILE).exists():
        return WordPieceTokenizer.load(folder)
    return load_trained_tokenizer(folder)
