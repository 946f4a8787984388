import json
import random

import pytest

from common.tokenizers import (
    CharTokenizer,
    GPT1BPETokenizer,
    SentencePieceTokenizer,
    WordPieceTokenizer,
    load_tokenizer,
)

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
GPT_SPECIALS = ["<unk>", "<|endoftext|>", "<|start|>", "<|delim|>", "<|extract|>"]

# Text the tokenizers never saw in training: newlines, runs of spaces, tabs, CRLF, leading and trailing spaces,
# accents (composed and combining), CJK, emoji, a zero byte, a byte-order mark.
HARD_TEXTS = [
    "",
    "\n",
    "the cat\n\nsat  on   the mat\t!",
    "  leading and trailing  ",
    "windows\r\nline ends\r\n",
    "naïve café, e\u0301 and Ünïcödé",
    "日本語のテキスト 😀👍🏽 Ω≈ç√",
    "null\x00byte and \ufeffbom",
    "<|endoftext|> [MASK] written as plain text",
]


def make_documents(n: int = 120, seed: int = 0) -> list[str]:
    """Small generated prose: paragraphs of random sentences, some lines of verse."""
    rng = random.Random(seed)
    words = "the a cat dog sat ran on under mat house garden quickly slowly red green old new said".split()
    docs = []
    for _ in range(n):
        sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(4, 12))).capitalize() + "." for _ in range(4)]
        docs.append(" ".join(sentences[:2]) + "\n\n" + "\n".join(sentences[2:]))
    return docs


@pytest.fixture(scope="module")
def gpt_bpe(tmp_path_factory) -> SentencePieceTokenizer:
    folder = tmp_path_factory.mktemp("gpt_bpe")
    return SentencePieceTokenizer.train(
        make_documents(), folder, 400, model_type="bpe", special_tokens=GPT_SPECIALS, unk_token="<unk>"
    )


@pytest.fixture(scope="module")
def bert_unigram(tmp_path_factory) -> SentencePieceTokenizer:
    folder = tmp_path_factory.mktemp("bert_unigram")
    return SentencePieceTokenizer.train(
        make_documents(), folder, 320, model_type="unigram", special_tokens=BERT_SPECIALS, unk_token="[UNK]"
    )


@pytest.fixture(params=["gpt_bpe", "bert_unigram"])
def sp_tokenizer(request) -> SentencePieceTokenizer:
    return request.getfixturevalue(request.param)


# --- CharTokenizer -------------------------------------------------------------------------------------------


def test_char_tokenizer_ids_and_round_trip(tmp_path):
    tok = CharTokenizer.train(iter(["hello", "world\n"]), GPT_SPECIALS)
    assert [tok.token_to_id(t) for t in GPT_SPECIALS] == [0, 1, 2, 3, 4]
    assert tok.decode(range(5, tok.vocab_size)) == "\ndehlorw"  # corpus characters, sorted
    assert tok.vocab_size == 5 + 8
    assert tok.decode(tok.encode("hello\nworld")) == "hello\nworld"
    assert tok.encode("hi") == [tok.token_to_id("h"), tok.token_to_id("<unk>")]
    assert tok.decode([1, *tok.encode("low")]) == "<|endoftext|>low"

    tok.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, CharTokenizer)
    assert loaded.encode("hello world?") == tok.encode("hello world?")


def test_char_tokenizer_needs_unk():
    with pytest.raises(ValueError, match="<unk>"):
        CharTokenizer.train(["abc"], ["<|endoftext|>"])


# --- SentencePieceTokenizer ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fixture", "specials"), [("gpt_bpe", GPT_SPECIALS), ("bert_unigram", BERT_SPECIALS)])
def test_special_tokens_take_exact_ids_in_order(request, fixture, specials):
    tok = request.getfixturevalue(fixture)
    assert [tok.token_to_id(t) for t in specials] == list(range(len(specials)))
    assert [tok.processor.id_to_piece(i) for i in range(len(specials))] == specials
    # The 256 byte pieces follow the specials, then the learned pieces.
    assert tok.processor.id_to_piece(len(specials)) == "<0x00>"
    assert tok.processor.id_to_piece(len(specials) + 255) == "<0xFF>"
    assert tok.processor.unk_id() == specials.index("[UNK]" if "[UNK]" in specials else "<unk>")


@pytest.mark.parametrize("text", HARD_TEXTS)
def test_round_trip_is_exact(sp_tokenizer, text):
    ids = sp_tokenizer.encode(text)
    assert all(5 <= i < sp_tokenizer.vocab_size for i in ids)  # plain text never yields a special id
    assert sp_tokenizer.decode(ids) == text


def test_the_space_marker_is_the_one_character_that_changes(gpt_bpe):
    """SentencePiece writes spaces as U+2581 inside pieces, so that character decodes as a space."""
    assert gpt_bpe.decode(gpt_bpe.encode("a\u2581b")) == "a b"


def test_unseen_characters_fall_back_to_bytes(gpt_bpe):
    pieces = [gpt_bpe.processor.id_to_piece(i) for i in gpt_bpe.encode("😀")]
    assert pieces == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert [gpt_bpe.processor.id_to_piece(i) for i in gpt_bpe.encode("\n")] == ["<0x0A>"]


def test_learned_pieces_are_subwords(gpt_bpe):
    ids = gpt_bpe.encode("the garden")
    assert len(ids) < len("the garden")


def test_specials_are_added_by_id_and_decoded_literally(gpt_bpe, bert_unigram):
    eot = gpt_bpe.token_to_id("<|endoftext|>")
    assert eot not in gpt_bpe.encode("<|endoftext|>")
    ids = gpt_bpe.encode("one.") + [eot] + gpt_bpe.encode(" two")
    assert gpt_bpe.decode(ids) == "one.<|endoftext|> two"

    cls, sep, mask = (bert_unigram.token_to_id(t) for t in ["[CLS]", "[SEP]", "[MASK]"])
    ids = [cls, *bert_unigram.encode("the "), mask, *bert_unigram.encode(" sat"), sep, 0, 0]
    assert bert_unigram.decode(ids) == "[CLS]the [MASK] sat[SEP][PAD][PAD]"
    assert bert_unigram.decode([1]) == "[UNK]"


def test_token_to_id_refuses_unknown_tokens(gpt_bpe):
    with pytest.raises(KeyError, match="not in the vocabulary"):
        gpt_bpe.token_to_id("[MASK]")


def test_save_and_load(gpt_bpe, tmp_path):
    gpt_bpe.save(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, SentencePieceTokenizer)
    assert loaded.vocab_size == gpt_bpe.vocab_size
    text = "The old cat said: 😀\n"
    assert loaded.encode(text) == gpt_bpe.encode(text)
    assert loaded.special_tokens == dict(enumerate(GPT_SPECIALS))


@pytest.mark.parametrize(
    ("model_type", "specials", "unk"), [("bpe", BERT_SPECIALS, "[UNK]"), ("unigram", GPT_SPECIALS, "<unk>")]
)
def test_vocabulary_larger_than_the_corpus_shrinks(tmp_path, capsys, model_type, specials, unk):
    tok = SentencePieceTokenizer.train(
        ["tiny corpus", "tiny tiny"], tmp_path, 5000, model_type=model_type, special_tokens=specials, unk_token=unk
    )
    assert tok.special_tokens == dict(enumerate(specials))
    assert 5 + 256 < tok.vocab_size < 5000
    assert f"supports {tok.vocab_size:,} tokens, not 5,000" in capsys.readouterr().out
    assert tok.decode(tok.encode("tiny corpus\n ü")) == "tiny corpus\n ü"
    assert (tmp_path / "tokenizer.model").exists()


def test_vocabulary_too_small_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"--VOCAB_SIZE=100 is too small: .* take 2\d\d; raise --VOCAB_SIZE"):
        SentencePieceTokenizer.train(
            make_documents(5), tmp_path, 100, special_tokens=GPT_SPECIALS, unk_token="<unk>"
        )


def test_empty_corpus_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no text to train a tokenizer"):
        SentencePieceTokenizer.train(["", "\n\n"], tmp_path, 400, special_tokens=GPT_SPECIALS, unk_token="<unk>")


def test_interrupting_the_training_text_is_not_hidden(tmp_path):
    """SentencePiece wraps errors of the text iterator in a RuntimeError; the learner must see the original."""

    def interrupted():
        yield "some text"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        SentencePieceTokenizer.train(interrupted(), tmp_path, 400, special_tokens=GPT_SPECIALS, unk_token="<unk>")
    assert not (tmp_path / "tokenizer.model").exists()


def test_without_byte_fallback_unseen_characters_are_unknown(tmp_path):
    tok = SentencePieceTokenizer.train(
        make_documents(), tmp_path, 100, special_tokens=BERT_SPECIALS, unk_token="[UNK]", byte_fallback=False
    )
    assert tok.encode("😀") == [tok.token_to_id("[UNK]")]
    assert tok.decode(tok.encode("the cat")) == "the cat"


def test_unk_token_must_be_a_special_token(tmp_path):
    with pytest.raises(ValueError, match="must be one of the special tokens"):
        SentencePieceTokenizer.train(make_documents(5), tmp_path, 400, special_tokens=["<pad>"], unk_token="<unk>")


# --- GPT1BPETokenizer ----------------------------------------------------------------------------------------

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


def test_gpt1_bpe_matches_transformers(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = write_gpt1_folder(tmp_path)
    ours = load_tokenizer(folder)
    theirs = transformers.OpenAIGPTTokenizer.from_pretrained(str(folder))
    assert isinstance(ours, GPT1BPETokenizer)
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


# --- WordPieceTokenizer -------------------------------------------------------------------------------------

# The layout of BERT's released vocab.txt: [PAD] first, unused slots, the other specials, then the pieces.
# "q" and "x" are left out so that some words cannot be cut at all.
WORDPIECE_VOCAB = [
    "[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    *".,!?'$+^=«»-", "中", "0", "1", "2", "3", "5",
    *(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in "qx"),
    *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789" if c not in "qx"),
    "the", "of", "is", "paris", "france", "capital", "cat", "un", "##aff", "##able", "##ly", "naive",
    "cafe", "creme", "brule", "don", "stop", "istanbul", "hello", "world", "##world", "unused",
]

WORDPIECE_TEXTS = [
    "Paris is the [MASK] of France.",
    "The unaffable cats, naïvely!",
    "Café CRÈME brûlée",
    "quixotic xylophones are unknown",
    "[mask] vs [MASK][MASK] and foo[SEP]bar, [CLS]hello[PAD]",
    "[unused0] is not special",
    "中国 is 中文",
    "don't stop",
    "a" * 100 + " " + "b" * 101,
    "helloworld worldhello",
    "hello\x00world\ufffd and\ttab\r\n",
    "İstanbul ÉCOLE",
    "$5 + 3^2 = «14»",
    "",
    "   \n ",
]


def write_vocab_txt(folder, tokens=WORDPIECE_VOCAB):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return folder


def test_wordpiece_matches_transformers(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = write_vocab_txt(tmp_path)
    ours = load_tokenizer(folder)
    theirs = transformers.BertTokenizer.from_pretrained(str(folder))
    assert isinstance(ours, WordPieceTokenizer)
    assert ours.vocab_size == len(theirs) == len(set(WORDPIECE_VOCAB)) == len(WORDPIECE_VOCAB)
    for text in WORDPIECE_TEXTS:
        assert ours.encode(text) == theirs.encode(text, add_special_tokens=False), text


def test_wordpiece_cuts_words_longest_first(tmp_path):
    tok = WordPieceTokenizer.load(write_vocab_txt(tmp_path))
    pieces = [tok.tokens[i] for i in tok.encode("The unaffable cats, naïvely!")]
    assert pieces == ["the", "un", "##aff", "##able", "cat", "##s", ",", "naive", "##ly", "!"]
    assert tok.decode(tok.encode("The unaffable cats, naïvely!")) == "the unaffable cats , naively !"
    unk = tok.token_to_id("[UNK]")
    assert tok.encode("xylophone unaffable") == [unk, *tok.encode("unaffable")]  # the whole word is unknown
    assert tok.encode("a" * 101) == [unk] and len(tok.encode("a" * 100)) == 100


def test_wordpiece_special_tokens_in_text_keep_their_ids(tmp_path):
    tok = WordPieceTokenizer.load(write_vocab_txt(tmp_path))
    ids = tok.encode("Paris is the [MASK] of France.")
    assert ids[3] == tok.token_to_id("[MASK]") == 5  # the id vocab.txt gives it, not a fixed one
    assert tok.decode(ids) == "paris is the [MASK] of france ."
    assert tok.token_to_id("[MASK]") not in tok.encode("[mask] [ MASK ]")  # only the exact spelling


def test_wordpiece_save_load_and_errors(tmp_path):
    tok = WordPieceTokenizer.load(write_vocab_txt(tmp_path / "a"))
    tok.save(tmp_path / "b")
    (tmp_path / "b" / "tokenizer.json").write_text("{}")  # a transformers folder holds one too
    again = load_tokenizer(tmp_path / "b")
    assert isinstance(again, WordPieceTokenizer) and again.tokens == WORDPIECE_VOCAB
    assert (tmp_path / "a" / "vocab.txt").read_bytes() == (tmp_path / "b" / "vocab.txt").read_bytes()
    with pytest.raises(KeyError, match="not in the vocabulary"):
        tok.token_to_id("<|endoftext|>")
    with pytest.raises(SystemExit, match="has no \\[UNK\\] token") as exit_info:
        load_tokenizer(write_vocab_txt(tmp_path / "c", ["[PAD]", "the"]))
    assert "\n" not in str(exit_info.value.code)


# --- load_tokenizer ------------------------------------------------------------------------------------------


def test_load_tokenizer_without_files_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no tokenizer in .*run download_data.py"):
        load_tokenizer(tmp_path)


def test_foreign_tokenizer_json_is_one_line(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(SystemExit, match="not a character tokenizer"):
        load_tokenizer(tmp_path)
