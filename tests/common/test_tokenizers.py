import json
import random

import pytest

from common.data.tokenizers import (
    CharTokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    basic_normalize,
    basic_words,
    load_tokenizer,
)
from common.errors import CourseError
from common.files import write_atomic

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
GPT_SPECIALS = ["<unk>", "<|endoftext|>", "<|start|>", "<|delim|>", "<|extract|>"]

# Text the tokenizers never saw in training: newlines, runs of spaces, tabs, CRLF, leading and trailing
# spaces, accents (composed and combining), CJK, emoji, a zero byte, a byte-order mark.
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
        sentences = []
        for _ in range(4):
            sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
            sentences.append(sentence.capitalize() + ".")
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


# --- CharTokenizer ------------------------------------------------------------------------------------------


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
    assert isinstance(loaded, CharTokenizer) and isinstance(loaded, Tokenizer)
    assert loaded.encode("hello world?") == tok.encode("hello world?")


def test_char_tokenizer_keeps_only_characters_seen_min_count_times():
    texts = ["aab", "ac", "a\u00e9b"]  # a: 4 times, b: 2, c and é: once
    tok = CharTokenizer.train(iter(texts), GPT_SPECIALS, min_count=2)
    assert tok.decode(range(5, tok.vocab_size)) == "ab"
    assert tok.encode("ca") == [tok.token_to_id("<unk>"), tok.token_to_id("a")]


def test_char_tokenizer_needs_unk():
    with pytest.raises(ValueError, match="<unk>"):
        CharTokenizer.train(["abc"], ["<|endoftext|>"])


# --- SentencePieceTokenizer ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "specials"), [("gpt_bpe", GPT_SPECIALS), ("bert_unigram", BERT_SPECIALS)]
)
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
    assert isinstance(loaded, SentencePieceTokenizer) and isinstance(loaded, Tokenizer)
    assert loaded.vocab_size == gpt_bpe.vocab_size
    text = "The old cat said: 😀\n"
    assert loaded.encode(text) == gpt_bpe.encode(text)
    assert loaded.special_tokens == dict(enumerate(GPT_SPECIALS))


@pytest.mark.parametrize(
    ("model_type", "specials", "unk"), [("bpe", BERT_SPECIALS, "[UNK]"), ("unigram", GPT_SPECIALS, "<unk>")]
)
def test_vocabulary_larger_than_the_corpus_shrinks(tmp_path, capsys, model_type, specials, unk):
    tok = SentencePieceTokenizer.train(
        ["tiny corpus", "tiny tiny"], tmp_path, 5000,
        model_type=model_type, special_tokens=specials, unk_token=unk,
    )
    assert tok.special_tokens == dict(enumerate(specials))
    assert 5 + 256 < tok.vocab_size < 5000
    assert f"supports {tok.vocab_size:,} tokens, not 5,000" in capsys.readouterr().out
    assert tok.decode(tok.encode("tiny corpus\n ü")) == "tiny corpus\n ü"
    assert (tmp_path / "tokenizer.model").exists()


def test_vocabulary_too_small_is_one_line(tmp_path):
    with pytest.raises(CourseError, match=r"--VOCAB_SIZE=100 is too small: .* take 2\d\d; raise --VOC"):
        SentencePieceTokenizer.train(
            make_documents(5), tmp_path, 100, special_tokens=GPT_SPECIALS, unk_token="<unk>"
        )


def test_empty_corpus_is_one_line(tmp_path):
    with pytest.raises(CourseError, match="no text to train a tokenizer"):
        SentencePieceTokenizer.train(
            ["", "\n\n"], tmp_path, 400, special_tokens=GPT_SPECIALS, unk_token="<unk>"
        )


def test_interrupting_the_training_text_is_not_hidden(tmp_path):
    """SentencePiece wraps the text iterator's errors in a RuntimeError; the learner must see the original."""

    def interrupted():
        yield "some text"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        SentencePieceTokenizer.train(
            interrupted(), tmp_path, 400, special_tokens=GPT_SPECIALS, unk_token="<unk>"
        )
    assert not (tmp_path / "tokenizer.model").exists()


def test_without_byte_fallback_unseen_characters_are_unknown(tmp_path):
    tok = SentencePieceTokenizer.train(
        make_documents(), tmp_path, 100, special_tokens=BERT_SPECIALS, unk_token="[UNK]", byte_fallback=False
    )
    assert tok.encode("😀") == [tok.token_to_id("[UNK]")]
    assert tok.decode(tok.encode("the cat")) == "the cat"


def test_unk_token_must_be_a_special_token(tmp_path):
    with pytest.raises(ValueError, match="must be one of the special tokens"):
        SentencePieceTokenizer.train(
            make_documents(5), tmp_path, 400, special_tokens=["<pad>"], unk_token="<unk>"
        )


# --- load_tokenizer -----------------------------------------------------------------------------------------


def test_load_tokenizer_without_files_is_one_line(tmp_path):
    expected = r"no tokenizer in .* \(tokenizer\.model or tokenizer\.json\); run download_data\.py"
    with pytest.raises(CourseError, match=expected) as exit_info:
        load_tokenizer(tmp_path)
    assert "\n" not in str(exit_info.value)


def test_released_vocabularies_are_left_to_their_chapters(tmp_path):
    """GPT-1's vocab.json + merges.txt and BERT's vocab.txt are read by their chapters' own loaders."""
    for name in ["vocab.json", "merges.txt", "vocab.txt"]:
        (tmp_path / name).write_text("")
    with pytest.raises(CourseError, match="no tokenizer in"):
        load_tokenizer(tmp_path)


def test_foreign_tokenizer_json_is_one_line(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE"}}))
    with pytest.raises(CourseError, match="not a character tokenizer"):
        load_tokenizer(tmp_path)


# --- write_atomic -------------------------------------------------------------------------------------------


def test_write_atomic_replaces_the_whole_file(tmp_path):
    path = tmp_path / "new folder" / "vocab.txt"
    write_atomic(path, b"old, and longer than the new text")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in path.parent.iterdir()] == ["vocab.txt"]  # no temporary file left behind


# --- BERT's basic tokenizer -----------------------------------------------------------------------------


def test_basic_tokenizer_cleans_strips_accents_lowercases_and_splits_off_punctuation():
    text = "Héllo,\tWORLD!\x00 Café\u00a0$5 日本"
    assert basic_normalize(text) == "hello, world! cafe $5  日  本 "
    words = ["hello", ",", "world", "!", "cafe", "$", "5", "日", "本"]
    assert list(basic_words(basic_normalize(text))) == words
