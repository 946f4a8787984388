"""Exercise 5: GPT-2's byte-level BPE against a SentencePiece BPE, on text neither was trained on.

Train three tokenizers of the same vocabulary size on the chapter's corpus, less its last document: our
byte-level BPE, and SentencePiece's BPE with byte fallback and without. Encode strings an English Wikipedia
corpus rarely shows (accents, emoji, code, CJK, Cyrillic, symbols, tabs) and the held-out document, and count
the tokens, whether decode(encode(text)) gives the text back, and the <unk> tokens. After the run's numbers
the script prints what the course measured (README, "Experiments").

    uv run python phase1_foundation/project2_gpt2/exercises/ex5_byte_bpe_vs_sentencepiece.py
    uv run python phase1_foundation/project2_gpt2/exercises/ex5_byte_bpe_vs_sentencepiece.py --VOCAB_SIZE=1024

Predict before you run it: the byte-level BPE gives every string back exactly (README, "Byte-level BPE");
will either SentencePiece? How many tokens will the byte-level BPE spend on one Chinese character, and on one
emoji? Will SentencePiece without byte fallback lose anything from the held-out English article?
"""  # noqa: E501 (a usage command longer than a line, kept whole so it can be copied)

from pathlib import Path

from common.course.exercises import print_measured
from common.data.corpora import choose_corpus, prepare_corpus
from common.data.tokenizers import SentencePieceTokenizer
from common.errors import CourseError, run_main
from common.training.config import load_config
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.download_data import LARGER_CORPUS, auto_vocab_size, training_text
from phase1_foundation.project2_gpt2.exercises import parse_args
from phase1_foundation.project2_gpt2.tokenizer import END_OF_TEXT, ByteBPETokenizer

UNK = "<unk>"
# Strings an English Wikipedia sample rarely or never contains. None holds "▁" (U+2581), the character
# SentencePiece writes spaces as, which it would turn back into a space.
TEST_STRINGS = {
    "accents": "Café au lait in Zürich, a naïve façade in São Paulo, Dvořák in Łódź.",
    "emoji": "Great job 👍🎉 see you at 🏠 (family: 👨‍👩‍👧, flag: 🇫🇷)",
    "code": "def mean(xs):\n\treturn sum(xs) / len(xs)  # O(n), n >= 1\n",
    "chinese": "机器学习很有趣，我们明天见。",
    "japanese": "東京は日本の首都です。",
    "cyrillic": "Москва — столица России.",
    "symbols": "∑ x² ≤ 10⁶ ± 3 °C, €5 ≈ ½ of £9 → ∞",
}
TOKENIZERS = {  # name: label
    "byte_bpe": "byte-level BPE",
    "sp_bytes": "SentencePiece BPE + byte fallback",
    "sp_no_bytes": "SentencePiece BPE, no byte fallback",
}


def train_tokenizers(texts: list[str], vocab_size: int, out_dir: Path) -> dict:
    """The three tokenizers, trained on the same texts with the same vocabulary size, saved in out_dir."""
    byte_bpe = ByteBPETokenizer.train(texts, vocab_size)
    byte_bpe.save(out_dir / "byte_bpe")
    sentencepiece = {
        name: SentencePieceTokenizer.train(texts, out_dir / name, vocab_size, model_type="bpe",
                                           special_tokens=[UNK, END_OF_TEXT], unk_token=UNK,
                                           byte_fallback=byte_fallback)
        for name, byte_fallback in (("sp_bytes", True), ("sp_no_bytes", False))
    }
    return {"byte_bpe": byte_bpe, **sentencepiece}


def measure(tokenizer: ByteBPETokenizer | SentencePieceTokenizer, text: str) -> dict:
    """Tokens of `text`, whether it decodes back exactly, how many tokens are <unk>, and what came back."""
    ids = tokenizer.encode(text)
    # The byte-level BPE has no unknown token: every byte value is a token of its own.
    unk_id = tokenizer.token_to_id(UNK) if isinstance(tokenizer, SentencePieceTokenizer) else None
    decoded = tokenizer.decode(ids)
    return {"tokens": len(ids), "exact": decoded == text, "unknown": ids.count(unk_id), "decoded": decoded,
            "characters_per_token": len(text) / max(1, len(ids))}


def pieces(tokenizer: ByteBPETokenizer | SentencePieceTokenizer, text: str) -> list[str]:
    """The tokens of `text` as strings: a byte-level token that is part of a character shows as its bytes."""
    if isinstance(tokenizer, SentencePieceTokenizer):
        return [tokenizer.processor.id_to_piece(i) for i in tokenizer.encode(text)]
    shown = []
    for i in tokenizer.encode(text):
        data = tokenizer.decode_bytes([i])
        try:
            shown.append(data.decode("utf-8"))
        except UnicodeDecodeError:  # a piece of a multi-byte character
            shown.append("<" + " ".join(f"{byte:02X}" for byte in data) + ">")
    return shown


def vocabulary(tokenizer: ByteBPETokenizer | SentencePieceTokenizer) -> str:
    """What the vocabulary is spent on: bytes, single characters, longer pieces, special tokens."""
    if isinstance(tokenizer, ByteBPETokenizer):
        return f"256 bytes + {len(tokenizer.merges):,} merges + 1 special"
    processor = tokenizer.processor
    ids = range(tokenizer.vocab_size)
    n_bytes = sum(processor.is_byte(i) for i in ids)
    n_special = len(tokenizer.special_tokens)
    n_chars = sum(len(processor.id_to_piece(i)) == 1 for i in ids if not processor.is_byte(i)
                  and i not in tokenizer.special_tokens)
    n_longer = tokenizer.vocab_size - n_bytes - n_special - n_chars
    return f"{n_bytes} bytes + {n_chars} characters + {n_longer:,} longer pieces + {n_special} special"


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex5_byte_bpe_vs_sentencepiece")
    cfg = load_config(config, settings)
    corpus = prepare_corpus(choose_corpus(cfg, larger=LARGER_CORPUS), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    documents = list(training_text(corpus))  # what the chapter's tokenizer learns from
    if len(documents) < 2:
        raise CourseError(f"error: {corpus.name} has one document; this exercise keeps the last one for "
                          "testing and trains on the rest, so it needs at least two")
    vocab_size = cfg.VOCAB_SIZE or auto_vocab_size(corpus.characters)
    print(f"training three tokenizers of {vocab_size:,} tokens on {len(documents) - 1} documents of "
          f"{corpus.name} ...")
    tokenizers = train_tokenizers(documents[:-1], vocab_size, out_dir)
    tests = {**TEST_STRINGS, "held-out document": documents[-1]}
    results = {name: {label: measure(tokenizer, text) for label, text in tests.items()}
               for name, tokenizer in tokenizers.items()}

    print("\nvocabularies:")
    for name, tokenizer in tokenizers.items():
        print(f"  {TOKENIZERS[name]:<37} {tokenizer.vocab_size:>6,} = {vocabulary(tokenizer)}")
    print(f"\n{'':<40}" + "".join(f"{name:>20}" for name in TOKENIZERS))
    print(f"{'string':<22}{'characters':>18}" + f"{'tokens':>10}{'exact':>6}{'unk':>4}" * len(TOKENIZERS))
    for label, text in tests.items():
        cells = [results[name][label] for name in TOKENIZERS]
        print(f"{label:<22}{len(text):>18,}" + "".join(
            f"{c['tokens']:>10,}{'yes' if c['exact'] else 'NO':>6}{c['unknown']:>4}" for c in cells))
    held_out = {name: results[name]["held-out document"]["characters_per_token"] for name in TOKENIZERS}
    print("characters per token on the held-out document: "
          + ", ".join(f"{name} {value:.2f}" for name, value in held_out.items()))

    for label in ("emoji", "japanese"):
        print(f"\n{label}: {TEST_STRINGS[label]}")
        for name, tokenizer in tokenizers.items():
            print(f"  {name:<12} {' | '.join(pieces(tokenizer, TEST_STRINGS[label]))}")
        print(f"  sp_no_bytes decodes it as: {results['sp_no_bytes'][label]['decoded']}")
    print_measured(WHAT_WE_MEASURED)
    return {"vocab_size": {name: t.vocab_size for name, t in tokenizers.items()}, **results}


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
Three tokenizers of 5,504 tokens (12 s). The byte-level BPE and SentencePiece with byte fallback give every
string back exactly, with no unknown token, and both encode the held-out article at 3.53 characters per token;
what they never learned they spell in UTF-8 bytes (3 tokens per Chinese character, 4 per emoji). Without byte
fallback, SentencePiece keeps only the characters that cover 99.95% of its training text (its default
character_coverage), so the emoji, the CJK, most accented letters, Cyrillic, tabs and newlines all become
<unk> (it learns from lines, so it never sees a newline): 183 of them in the held-out article alone, where
its paragraph breaks were, and the text cannot be recovered. Byte fallback costs SentencePiece 256 of its
vocabulary for the byte pieces, on top of one piece per character it keeps; the byte-level BPE needs the 256
bytes and nothing per character, which is why GPT-2's vocabulary (§2.2) starts from bytes.
"""


if __name__ == "__main__":
    run_main(main)
