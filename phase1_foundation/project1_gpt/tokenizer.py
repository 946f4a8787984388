"""GPT-1's released vocabulary: the 40,478-token BPE that OpenAI published with the weights, so that the
original model (`hf_weights.from_hf`, `sample.py --HF_DIR`) reads the same ids it was trained on.

Our own runs train a SentencePiece BPE on our corpus instead (common/data/tokenizers.py); load_tokenizer below
reads either, recognising the released vocabulary by its files.

Read top to bottom: GPT1BPETokenizer -> load_tokenizer. The text is first normalised and split into words the
way transformers does without OpenAI's ftfy and spaCy: by BERT's basic tokenizer (common/data/tokenizers.py).
"""

import functools
import itertools
import json
from collections.abc import Iterable
from pathlib import Path

from common.data.tokenizers import Tokenizer, basic_normalize, basic_words
from common.data.tokenizers import load_tokenizer as load_trained_tokenizer
from common.files import write_atomic

# --- GPT-1's BPE --------------------------------------------------------------------------------------------


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
    """GPT-1's 40,478-token BPE vocabulary, read from a transformers-layout folder (vocab.json, merges.txt).

    The text is normalised and split into words by BERT's basic tokenizer. Each word then starts as
    characters, the last one marked as ending a word ("o</w>"), and the learned merges are applied, lowest
    rank (learned earliest) first. The word-end marks are what decode() turns back into spaces, so decoding
    gives normalised text: "Hello, World!" -> "hello , world !". Characters outside the vocabulary become
    "<unk>" when the vocabulary has it, and are dropped when not.
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
        return [i for word in basic_words(basic_normalize(text)) for i in self._encode_word(word)]

    def decode(self, ids: Iterable[int]) -> str:
        text = "".join(self.id_to_token[int(i)] for i in ids)
        return text.removesuffix(self.END_OF_WORD).replace(self.END_OF_WORD, " ")

    def token_to_id(self, token: str) -> int:
        return self.vocab[token]

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        write_atomic(folder / self.VOCAB, json.dumps(self.vocab, ensure_ascii=False).encode())
        merges = "".join(f"{a} {b}\n" for a, b in self.merges)
        write_atomic(folder / self.MERGES, f"#version: 0.2\n{merges}".encode())

    @classmethod
    def load(cls, folder: Path) -> "GPT1BPETokenizer":
        folder = Path(folder)
        vocab = json.loads((folder / cls.VOCAB).read_text(encoding="utf-8"))
        lines = (folder / cls.MERGES).read_text(encoding="utf-8").splitlines()
        merges = [tuple(line.split()) for line in lines if line and not line.startswith("#version")]
        return cls(vocab, merges)


def load_tokenizer(folder: Path) -> Tokenizer:
    """GPT-1's released vocabulary if `folder` holds it, else our trained one (common/data/tokenizers.py).

    GPT-1's files are looked for first: a transformers folder may also hold a tokenizer.json of its own, which
    is not ours.
    """
    folder = Path(folder)
    if (folder / GPT1BPETokenizer.VOCAB).exists() and (folder / GPT1BPETokenizer.MERGES).exists():
        return GPT1BPETokenizer.load(folder)
    return load_trained_tokenizer(folder)
