"""BERT's released vocabulary: parity with transformers' BertTokenizer, WordPiece cuts, specials, loading."""

import pytest

from common.data.tokenizers import SentencePieceTokenizer, Tokenizer
from common.errors import CourseError
from phase1_foundation.project3_contextual_embeddings.tokenizer import WordPieceTokenizer, load_tokenizer

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


# --- WordPieceTokenizer -------------------------------------------------------------------------------------


def test_wordpiece_matches_transformers(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = write_vocab_txt(tmp_path)
    ours = load_tokenizer(folder)
    theirs = transformers.BertTokenizer.from_pretrained(str(folder))
    assert isinstance(ours, WordPieceTokenizer) and isinstance(ours, Tokenizer)
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
    with pytest.raises(CourseError, match="has no \\[UNK\\] token") as exit_info:
        load_tokenizer(write_vocab_txt(tmp_path / "c", ["[PAD]", "the"]))
    assert "\n" not in str(exit_info.value)


# --- load_tokenizer -----------------------------------------------------------------------------------------


def test_load_tokenizer_reads_our_trained_tokenizer_too(tmp_path):
    """Our runs train a SentencePiece BPE; the chapter's loader hands its folder to common's loader."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    text = "paris is the capital of france\n" * 20
    spm = SentencePieceTokenizer.train([text], tmp_path, 300, special_tokens=specials, unk_token="[UNK]")
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, SentencePieceTokenizer) and isinstance(loaded, Tokenizer)
    assert loaded.encode("the capital of france") == spm.encode("the capital of france")
    with pytest.raises(CourseError, match="no tokenizer in"):
        load_tokenizer(tmp_path / "empty")
