"""GPT-1's released vocabulary: parity with transformers' OpenAIGPTTokenizer, merges, saving, loading."""

import json

import pytest

from common.data.tokenizers import CharTokenizer, SentencePieceTokenizer, Tokenizer
from common.errors import CourseError
from phase1_foundation.project1_gpt.tokenizer import GPT1BPETokenizer, load_tokenizer

MERGES = [
    ("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o</w>"), ("w", "o"), ("wo", "r"), ("l", "d</w>"),
    ("wor", "ld</w>"), ("c", "a"), ("ca", "f"), ("caf", "e</w>"), ("t", "h"), ("th", "e</w>"), ("a", "n"),
    ("an", "d</w>"), ("o", "n"), ("on", "e</w>"), ("l", "o"), ("lo", "w"), ("e", "r</w>"), ("low", "er</w>"),
]


def write_gpt1_folder(folder, with_unk: bool = True):
    """A tiny vocabulary in the layout of transformers' openai-gpt: every character alone and word-final,
    every merge result, and <unk> last (as in the released 40,478-token file)."""
    folder.mkdir(parents=True, exist_ok=True)
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens = [*letters, *(f"{c}</w>" for c in letters + ",.!?'")]
    tokens += [a + b for a, b in MERGES if a + b not in tokens]
    tokens += ["<unk>"] if with_unk else []
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}), encoding="utf-8")
    merges = "".join(f"{a} {b}\n" for a, b in MERGES)
    (folder / "merges.txt").write_text(f"#version: 0.2\n{merges}", encoding="utf-8")
    return folder


GPT1_TEXTS = [
    "Hello, World!",
    "HELLO   café\nworld",
    "the lower one and the low one",
    "Hello你好world",
    "Lowers don't hello?!",
    "x\u00adhello and\ttab",
    "İstanbul ÉCOLE naïve",
    "hello\x00world\ufffd",
    "a\u2028b \u3000c",
    "$5 + 3^2 = «14»",
    "hellohello worldworld",
    "",
]


# --- GPT1BPETokenizer ---------------------------------------------------------------------------------------


def test_gpt1_bpe_matches_transformers(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = write_gpt1_folder(tmp_path)
    ours = load_tokenizer(folder)
    theirs = transformers.OpenAIGPTTokenizer.from_pretrained(str(folder))
    assert isinstance(ours, GPT1BPETokenizer) and isinstance(ours, Tokenizer)
    assert ours.vocab_size == len(theirs)
    for text in GPT1_TEXTS:
        ids = ours.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False), text
        assert ours.decode(ids) == theirs.decode(ids), text


def test_gpt1_bpe_merges_and_decodes(tmp_path):
    tok = GPT1BPETokenizer.load(write_gpt1_folder(tmp_path))
    tokens = [tok.id_to_token[i] for i in tok.encode("The lower, Hello!")]
    assert tokens == ["the</w>", "lower</w>", ",</w>", "hello</w>", "!</w>"]
    assert tok.decode(tok.encode("The lower, Hello!")) == "the lower , hello !"
    assert tok.encode("über") == [tok.token_to_id("u"), tok.token_to_id("b"), tok.token_to_id("er</w>")]


def test_gpt1_bpe_without_unk_drops_unknown_characters(tmp_path):
    tok = GPT1BPETokenizer.load(write_gpt1_folder(tmp_path, with_unk=False))
    assert tok.decode(tok.encode("hello 😀 world")) == "hello world"


def test_gpt1_bpe_save_and_load(tmp_path):
    tok = GPT1BPETokenizer.load(write_gpt1_folder(tmp_path / "a"))
    tok.save(tmp_path / "b")
    (tmp_path / "b" / "tokenizer.json").write_text("{}")  # a transformers folder may hold one too
    again = load_tokenizer(tmp_path / "b")
    assert isinstance(again, GPT1BPETokenizer)
    assert again.encode("The lower one, hello world!") == tok.encode("The lower one, hello world!")


# --- load_tokenizer -----------------------------------------------------------------------------------------


def test_load_tokenizer_reads_our_trained_tokenizers_too(tmp_path):
    """Our runs train common's tokenizers; the chapter's loader hands their folders to common's loader."""
    specials = ["<unk>", "<|endoftext|>"]
    text = "the lower one and the low one\n" * 20
    CharTokenizer.train([text], specials).save(tmp_path / "char")
    spm = SentencePieceTokenizer.train(
        [text], tmp_path / "spm", 300, special_tokens=specials, unk_token="<unk>"
    )
    assert isinstance(load_tokenizer(tmp_path / "char"), CharTokenizer)
    loaded = load_tokenizer(tmp_path / "spm")
    assert isinstance(loaded, SentencePieceTokenizer) and isinstance(loaded, Tokenizer)
    assert loaded.encode("the lower one") == spm.encode("the lower one")


def test_load_tokenizer_needs_both_of_gpt1s_files(tmp_path):
    write_gpt1_folder(tmp_path)
    (tmp_path / "merges.txt").unlink()
    with pytest.raises(CourseError, match="no tokenizer in"):
        load_tokenizer(tmp_path)
