"""GPT-2's tokenizer: a byte-level BPE, trained on our corpus or read from the files OpenAI released.

Any text is a sequence of UTF-8 bytes and all 256 byte values are tokens, so every string can be encoded and
there is no unknown token (§2.2). A regular expression first cuts the text into pre-tokens, and merges happen
only inside one. Ids 0..255 are the bytes, then one per merge in the order learned, then <|endoftext|>;
typed in the text, "<|endoftext|>" stays plain text. README, "Byte-level BPE, and why there is no `<unk>`".

Read top to bottom: bytes_to_unicode -> PRETOKENIZE -> ByteBPETokenizer (encode, decode, train) ->
gpt2_files (the released vocabulary) -> load_tokenizer.
"""

import functools
import heapq
import itertools
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import regex

from common.data.download import download
from common.errors import CourseError
from common.files import write_atomic
from common.progress import progress_bar

END_OF_TEXT = "<|endoftext|>"

# --- bytes as printable characters --------------------------------------------------------------------------


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from each of the 256 byte values to a printable character.

    BPE merges strings, and its merges are saved as text, one "left right" pair per line. Raw bytes would not
    survive that: a space or newline byte inside a token would break the file's format, control bytes are
    invisible, and half a UTF-8 character is not a string at all. So each byte stands for one printable
    character: the 188 bytes that already print as a visible Latin-1 character ("!".."~", "¡".."¬", "®".."ÿ")
    stand for themselves, and the other 68 (space, control bytes, ...) are moved to chr(256 + n), in order.
    That is why GPT-2's tokens look like "Ġthe": "Ġ" is chr(256 + 32), the space byte.

    The order of the dict is the order of ids 0..255 in GPT-2's vocabulary: the printable bytes first.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    moved = [byte for byte in range(256) if byte not in printable]
    return {byte: chr(byte) for byte in printable} | {byte: chr(256 + n) for n, byte in enumerate(moved)}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {char: byte for byte, char in BYTE_TO_CHAR.items()}


def to_symbols(piece: str) -> str:
    """The UTF-8 bytes of `piece` as the printable characters BPE works on: " café" -> "ĠcafÃ©".

    Lone surrogates U+DC80..U+DCFF stand for the bytes 0x80..0xFF (Python's "surrogateescape", see
    ByteBPETokenizer.encode_bytes), so arbitrary bytes can pass through str on their way in.
    """
    return "".join(BYTE_TO_CHAR[byte] for byte in piece.encode("utf-8", errors="surrogateescape"))


# --- pre-tokenisation ---------------------------------------------------------------------------------------
# GPT-2's pattern, exactly as released (openai/gpt-2, src/encoder.py). At each position of the text, findall()
# takes the first alternative that matches:
#   's|'t|'re|'ve|'m|'ll|'d   English contractions as pieces of their own: "don't" -> "don", "'t". (Only the
#                             lowercase ones after an ASCII apostrophe: "DON'T" -> "DON", "'", "T".)
#    ?\p{L}+                  a run of letters, with the one space before it: " world". The space belongs
#                             to the word after it, so " the" is one token, not " " and "the".
#    ?\p{N}+                  a run of numerals (digits of any script, "½", "Ⅻ"), with its space: " 2019"
#    ?[^\s\p{L}\p{N}]+        a run of everything else (punctuation, symbols, emoji), with its space: " ..."
#   \s+(?!\S)                 a run of whitespace, but not its last character when something else
#                             follows: that space goes with the word. "a   b" -> "a", "  ", " b"
#   \s+                       the whitespace still left: a single "\n" or "\t" before a word, which " ?"
#                             does not take (it takes a plain space only)
# The `regex` package is needed for \p{L} (any letter) and \p{N} (any digit); the standard `re` lacks them.
PRETOKENIZE = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


# --- the tokenizer ------------------------------------------------------------------------------------------


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


class ByteBPETokenizer:
    """A byte-level BPE: GPT-2's released 50,257 tokens (`from_files`) or one we train (`train`).

    Tokens are strings of bytes_to_unicode's characters ("Ġworld" = the bytes of " world"). Saved in the
    layout transformers uses, vocab.json (token -> id) and merges.txt (one merge per line, in the order
    learned), which are GPT-2's encoder.json and vocab.bpe under other names.
    """

    VOCAB, MERGES = "vocab.json", "merges.txt"
    MERGES_HEADER = "#version: 0.2"  # the first line of GPT-2's vocab.bpe; transformers skips it

    def __init__(self, encoder: dict[str, int], merges: list[tuple[str, str]]):
        missing = [char for char in BYTE_TO_CHAR.values() if char not in encoder]
        if missing or END_OF_TEXT not in encoder:
            what = f"{len(missing)} of the 256 byte tokens" if missing else END_OF_TEXT
            raise ValueError(f"not a byte-level BPE vocabulary: {what} missing")
        if sorted(encoder.values()) != list(range(len(encoder))):  # vocab_size rows must cover every id
            raise ValueError(f"the ids are not 0..{len(encoder) - 1}, each once")
        unknown = next((pair for pair in merges if pair[0] + pair[1] not in encoder), None)
        if unknown:
            raise ValueError(f"the merge {' '.join(unknown)!r} makes a token that is not in the vocabulary")
        self.encoder = encoder  # token -> id
        self.id_to_token = {i: token for token, i in encoder.items()}
        self.merges = merges  # in the order they were learned
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}  # lower rank = learned earlier
        self.vocab_size = len(encoder)
        self.eot_id = encoder[END_OF_TEXT]
        # Pre-tokens repeat a lot (Zipf): remember the ids of recent ones instead of merging them again.
        self._encode_piece = functools.lru_cache(maxsize=1 << 16)(self._encode_piece_uncached)

    # --- encoding and decoding ----------------------------------------------------------------------------

    def _bpe(self, symbols: str) -> list[str]:
        """Apply the learned merges to one pre-token, lowest rank first: "Ġtokenizer" -> ["Ġtoken", "izer"].

        Always merging the earliest-learned pair present replays exactly what training did to this word.
        """
        parts = list(symbols)
        while len(parts) > 1:
            pair = min(itertools.pairwise(parts), key=lambda p: self.ranks.get(p, len(self.ranks)))
            if pair not in self.ranks:
                break
            parts = _merge_pair(parts, pair)
        return parts

    def _encode_piece_uncached(self, piece: str) -> tuple[int, ...]:
        return tuple(self.encoder[token] for token in self._bpe(to_symbols(piece)))

    def encode(self, text: str) -> list[int]:
        """Pre-tokenise, then turn each pre-token's bytes into tokens: any text encodes, with no <unk>."""
        return [i for piece in PRETOKENIZE.findall(text) for i in self._encode_piece(piece)]

    def encode_bytes(self, data: bytes) -> list[int]:
        """Encode any bytes, valid UTF-8 or not, so that decode_bytes gives them back exactly.

        The bytes become a str by Python's lossless "surrogateescape" route: valid UTF-8 decodes as usual
        (so the ids equal encode(data.decode())), each invalid byte becomes a lone surrogate, which the
        pattern treats as punctuation and to_symbols turns back into that byte.
        """
        return self.encode(data.decode("utf-8", errors="surrogateescape"))

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The exact bytes of the tokens: the inverse of encode and encode_bytes.

        <|endoftext|> is spelt in printable ASCII, which bytes_to_unicode maps to itself, so it comes out as
        the 13 bytes of its name.
        """
        return bytes(CHAR_TO_BYTE[char] for i in ids for char in self.id_to_token[int(i)])

    def decode(self, ids: Iterable[int]) -> str:
        """Text for people. Tokens may end in the middle of a UTF-8 character (a model can stop there, or
        sample bytes in an impossible order); such bytes show as U+FFFD, "�", instead of raising an error."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def token_to_id(self, token: str) -> int:
        return self.encoder[token]

    # --- saving and loading -------------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Write vocab.json and merges.txt: the files transformers' GPT2Tokenizer.from_pretrained reads."""
        folder = Path(folder)
        write_atomic(folder / self.VOCAB, json.dumps(self.encoder, ensure_ascii=False).encode())
        merges = "".join(f"{left} {right}\n" for left, right in self.merges)
        write_atomic(folder / self.MERGES, f"{self.MERGES_HEADER}\n{merges}".encode())

    @classmethod
    def from_files(cls, encoder_json: Path, vocab_bpe: Path) -> "ByteBPETokenizer":
        """Read a vocabulary (token -> id, JSON) and its merges (a header line, then "left right" lines).

        GPT-2's released encoder.json and vocab.bpe, or a vocab.json and merges.txt written by save().
        """
        try:
            encoder = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
            lines = Path(vocab_bpe).read_text(encoding="utf-8").splitlines()
            if not isinstance(encoder, dict):
                raise ValueError("the vocabulary is not a JSON object of token -> id")
            if not lines or not lines[0].startswith("#version"):
                raise ValueError(f"the merges do not start with a {cls.MERGES_HEADER!r} line")
            merges = [tuple(line.split(" ")) for line in lines[1:] if line]
            if any(len(merge) != 2 for merge in merges):
                raise ValueError('a line of the merges is not "left right"')
            return cls(encoder, merges)
        except (OSError, ValueError) as e:  # a JSON syntax error and a bad encoding are ValueErrors too
            raise CourseError(
                f"error: cannot read a GPT-2 tokenizer from {encoder_json} and {vocab_bpe} ({e}); "
                "if download_data.py wrote them, delete them and run it again"
            ) from None

    @classmethod
    def load(cls, folder: Path) -> "ByteBPETokenizer":
        """Read the vocab.json and merges.txt that save() wrote."""
        return cls.from_files(Path(folder) / cls.VOCAB, Path(folder) / cls.MERGES)

    # --- training -----------------------------------------------------------------------------------------

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int) -> "ByteBPETokenizer":
        """Learn vocab_size - 257 merges from `texts`: the 256 bytes, the merges, then <|endoftext|>.

        The algorithm, made fast by never recounting the corpus:
        1. Pre-tokenise every text and count each distinct pre-token once: {" the": 51234, ...}. Merges never
           cross pre-tokens, so from here on the corpus is this table of words, each a list of symbols.
        2. Count every pair of neighbouring symbols, weighted by word frequency, and remember which words
           hold each pair.
        3. Repeatedly merge the most frequent pair: rewrite only the words that hold it, and update the pair
           counts by what those words lost and gained. A heap finds the most frequent pair; its stale entries
           (counts that have changed since) are skipped when they come up. Ties go to the pair that sorts
           first, so the same corpus always gives the same vocabulary.

        Every merge must add a new token (merge k is id 256 + k), so a pair that would make a token the
        vocabulary already has is passed over. A corpus too small for `vocab_size` runs out of pairs and gives
        a smaller vocabulary; the actual size is printed and is `vocab_size` of the result.
        """
        if vocab_size < 257:
            raise CourseError(
                f"error: --VOCAB_SIZE={vocab_size} is too small: a byte-level BPE has 256 byte tokens and "
                f"{END_OF_TEXT}; raise --VOCAB_SIZE to at least 257"
            )
        pieces: Counter[str] = Counter()
        for text in texts:
            pieces.update(PRETOKENIZE.findall(text))
        words = [list(to_symbols(piece)) for piece in pieces]  # each word as its list of symbols
        counts = list(pieces.values())  # counts[w]: how often word w occurs in the corpus

        pair_counts: Counter[tuple[str, str]] = Counter()
        words_with: dict[tuple[str, str], set[int]] = {}  # pair -> the words that hold it
        for w, symbols in enumerate(words):
            for pair in itertools.pairwise(symbols):
                pair_counts[pair] += counts[w]
                words_with.setdefault(pair, set()).add(w)
        heap = [(-count, pair) for pair, count in pair_counts.items()]  # the most frequent on top
        heapq.heapify(heap)

        byte_tokens = list(BYTE_TO_CHAR.values())
        tokens = set(byte_tokens) | {END_OF_TEXT}
        merges: list[tuple[str, str]] = []
        n_merges = vocab_size - 257
        with progress_bar(total=n_merges, desc="learning BPE merges", unit="merge") as progress:
            while len(merges) < n_merges and heap:
                negative_count, pair = heapq.heappop(heap)
                if pair_counts.get(pair) != -negative_count or pair[0] + pair[1] in tokens:
                    continue  # a stale entry, or a merge that would make a token we already have
                merges.append(pair)
                tokens.add(pair[0] + pair[1])
                progress.update()

                change: Counter[tuple[str, str]] = Counter()  # how each pair's count moves by this merge
                for w in words_with.pop(pair):
                    before = list(itertools.pairwise(words[w]))
                    words[w] = _merge_pair(words[w], pair)
                    after = list(itertools.pairwise(words[w]))
                    for old in before:
                        change[old] -= counts[w]
                    for new in after:
                        change[new] += counts[w]
                    for gone in set(before) - set(after) - {pair}:  # the merged pair's own entry is popped
                        words_with[gone].discard(w)
                    for arrived in set(after) - set(before):
                        words_with.setdefault(arrived, set()).add(w)
                for changed, delta in change.items():
                    if delta == 0:
                        continue
                    pair_counts[changed] += delta
                    if pair_counts[changed] > 0:
                        heapq.heappush(heap, (-pair_counts[changed], changed))
                    else:  # gone from the corpus, like the merged pair itself
                        del pair_counts[changed]
                        words_with.pop(changed, None)

        vocabulary = [*byte_tokens, *(left + right for left, right in merges), END_OF_TEXT]
        encoder = {token: i for i, token in enumerate(vocabulary)}
        if len(encoder) < vocab_size:
            print(f"tokenizer: this corpus supports {len(encoder):,} tokens, not {vocab_size:,}; using those")
        return cls(encoder, merges)


# --- GPT-2's released vocabulary ----------------------------------------------------------------------------

GPT2_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
# The two files OpenAI published with GPT-2 (the same bytes as transformers' gpt2 vocab.json and merges.txt),
# pinned by size and sha256 so that a changed or damaged file is refused.
GPT2_FILES = {
    "encoder.json": (1_042_301, "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"),
    "vocab.bpe": (456_318, "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
}


def gpt2_files(data_dir: Path) -> tuple[Path, Path]:
    """(encoder.json, vocab.bpe) of GPT-2, downloaded once into data_dir/downloads/gpt2 and checked.

    Files already there with the right size and sha256 are used without the network; put them there by hand
    to work offline. Read them with ByteBPETokenizer.from_files(*gpt2_files(data_dir)).
    """
    folder = Path(data_dir) / "downloads" / "gpt2"
    paths = []
    for name, (size, sha256) in GPT2_FILES.items():
        paths.append(download(GPT2_URL + name, folder / name, size=size, sha256=sha256,
                              hint="--TOKENIZER=bpe trains a tokenizer with no download"))
    encoder_json, vocab_bpe = paths
    return encoder_json, vocab_bpe


# --- loading whichever one a folder holds ------------------------------------------------------------------


def load_tokenizer(folder: Path) -> ByteBPETokenizer:
    """The byte-level BPE in `folder`: vocab.json + merges.txt (ours, or a transformers gpt2 folder), or
    GPT-2's encoder.json + vocab.bpe as released."""
    folder = Path(folder)
    for vocab, merges in [(ByteBPETokenizer.VOCAB, ByteBPETokenizer.MERGES), ("encoder.json", "vocab.bpe")]:
        if (folder / vocab).is_file() and (folder / merges).is_file():
            return ByteBPETokenizer.from_files(folder / vocab, folder / merges)
    raise CourseError(
        f"error: no GPT-2 tokenizer in {folder} (vocab.json + merges.txt, or encoder.json + vocab.bpe); "
        "run download_data.py"
    )
