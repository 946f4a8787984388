"""GPT-2's byte-level BPE: parity with transformers' GPT2Tokenizer, lossless bytes, training, the pinned
download, loading.

The tests that take the `released` fixture need GPT-2's encoder.json and vocab.bpe on disk (the download cache
or ../shared/data/gpt2) and skip without them. No test touches the network: downloads come from 127.0.0.1.
"""

import hashlib
import itertools
import random
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from common.data.tokenizers import Tokenizer
from common.errors import CourseError
from common.files import REPO_ROOT
from phase1_foundation.project2_gpt2 import tokenizer as tokenizer_module
from phase1_foundation.project2_gpt2.tokenizer import (
    END_OF_TEXT,
    GPT2_FILES,
    PRETOKENIZE,
    ByteBPETokenizer,
    _merge_pair,
    bytes_to_unicode,
    gpt2_files,
    load_tokenizer,
    to_symbols,
)

RELEASED_FOLDERS = [REPO_ROOT / "data" / "downloads" / "gpt2", REPO_ROOT.parent / "shared" / "data" / "gpt2"]

# Strings that exercise every alternative of the pre-tokenisation pattern and every kind of byte.
TEXTS = [
    "Hello world",
    "",
    "  leading, trailing and   inner spaces   ",
    "lines\nand\n\nblank lines\n\n\n",
    "\ttabs\tand\r\nWindows line ends\r\n",
    "It's, they're, we've, I'm, you'll, he'd, don't; DON'T, rock 'n' roll",
    "In 2019 GPT-2 had 1,542,000,000 parameters (1.5e9); ½ and ٣٤ are numbers too",
    "emoji 😀👍🏽 and 👨‍👩‍👧 families",
    "日本語のテキスト、中文文本。한국어 텍스트",
    "Accents: café, naïve, Zürich, São Paulo, Ångström, façade, İstanbul",
    "def f(x):\n    return x ** 2  # square\n\n\nif __name__ == '__main__':\n\tprint(f(3))",
    '{"key": [1, 2, 3]} <html><br/></html> $100 & 50% off!!!',
    "non-breaking\u00a0space, zero\u200bwidth, line\u2028separator, ideographic\u3000space",
    b"\xff\xfeinvalid \xc3 utf-8 \xe2\x82 bytes \xf0\x9f".decode("utf-8", errors="replace"),
    "\x00\x01 control \x7f bytes \x1b[0m",
]

# A small corpus for training: accents and emoji, so that merges form inside multi-byte characters too.
TRAIN_TEXT = (
    "The café served crème brûlée to naïve visitors 😀😀. They said: \"It's the best!\"\n"
    "In 2019, the model read 40 GB of text; it didn't need an unknown token.\n\n"
    "Zürich, Ålesund and São Paulo are cities. The cities are large 😀.\n"
    "    def square(x):\n        return x ** 2  # the square\n"
) * 8


# --- fixtures -----------------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_pinned(path: Path, size: int, sha256: str) -> bool:
    return path.is_file() and path.stat().st_size == size and _sha256(path) == sha256


@pytest.fixture(scope="session")
def released():
    """The folder holding GPT-2's encoder.json and vocab.bpe, checked against the pinned size and sha256."""
    for folder in RELEASED_FOLDERS:
        if all(_is_pinned(folder / name, size, sha256) for name, (size, sha256) in GPT2_FILES.items()):
            return folder
    pytest.skip(
        "GPT-2's encoder.json and vocab.bpe (pinned sha256) are in neither "
        f"{RELEASED_FOLDERS[0]} nor {RELEASED_FOLDERS[1]}; gpt2_files() downloads them into the first"
    )


@pytest.fixture(scope="session")
def gpt2(released):
    return ByteBPETokenizer.from_files(released / "encoder.json", released / "vocab.bpe")


def hf_tokenizer(folder):
    """transformers' GPT2Tokenizer on a folder holding vocab.json and merges.txt, without the network.

    from_pretrained reads a folder the same way in every version; the constructor's keywords changed in
    transformers 5, where GPT2Tokenizer(vocab_file=..., merges_file=...) silently encodes everything to [].
    """
    transformers = pytest.importorskip("transformers")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return transformers.GPT2Tokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="session")
def hf_gpt2(released, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf-gpt2")
    shutil.copy(released / "encoder.json", folder / "vocab.json")
    shutil.copy(released / "vocab.bpe", folder / "merges.txt")
    return hf_tokenizer(folder)


@pytest.fixture(scope="session")
def trained():
    return ByteBPETokenizer.train([TRAIN_TEXT], 400)


# --- the byte map and the pattern ---------------------------------------------------------------------------


def test_bytes_to_unicode_is_a_printable_one_to_one_map():
    mapping = bytes_to_unicode()
    assert sorted(mapping) == list(range(256))
    assert len(set(mapping.values())) == 256
    assert all(char.isprintable() and not char.isspace() for char in mapping.values())
    kept = [byte for byte, char in mapping.items() if char == chr(byte)]
    assert len(kept) == 188
    moved = [char for byte, char in mapping.items() if char != chr(byte)]
    assert moved == [chr(256 + n) for n in range(68)]
    assert mapping[ord(" ")] == "Ġ" and mapping[ord("\n")] == "Ċ"


def test_pretokenize_splits_like_gpt2():
    # A run of whitespace leaves its last character to the next word; a newline cannot join a word (only a
    # space can), so it stays alone. Whitespace at the very end is one piece.
    assert PRETOKENIZE.findall("Hello world's  3.5 km!\n\nok  ") == [
        "Hello", " world", "'s", " ", " 3", ".", "5", " km", "!", "\n", "\n", "ok", "  "
    ]


# --- GPT-2's released vocabulary ----------------------------------------------------------------------------


def test_released_vocabulary_layout(gpt2, released):
    assert isinstance(gpt2, Tokenizer)
    assert (gpt2.vocab_size, gpt2.eot_id, gpt2.token_to_id(END_OF_TEXT)) == (50257, 50256, 50256)
    assert len(gpt2.merges) == 50000
    assert [gpt2.id_to_token[i] for i in range(256)] == list(bytes_to_unicode().values())
    assert all(gpt2.token_to_id(left + right) == 256 + k for k, (left, right) in enumerate(gpt2.merges))
    assert gpt2.encode("Hello world") == [15496, 995]
    with pytest.raises(KeyError):
        gpt2.token_to_id("<|endoftext|")


def test_released_vocabulary_matches_transformers(gpt2, hf_gpt2):
    for text in TEXTS:
        ids = gpt2.encode(text)
        assert ids == hf_gpt2.encode(text, add_special_tokens=False), text
        assert gpt2.decode(ids) == text, text


def test_special_tokens_typed_in_text_are_plain_text(gpt2):
    ids = gpt2.encode("a <|endoftext|> b")
    assert gpt2.eot_id not in ids
    assert gpt2.decode(ids) == "a <|endoftext|> b"
    assert gpt2.decode([*gpt2.encode("one"), gpt2.eot_id, *gpt2.encode("two")]) == "one<|endoftext|>two"


# --- any bytes in, the same bytes out -----------------------------------------------------------------------


def test_any_bytes_round_trip_without_an_unknown_token(trained):
    rng = random.Random(0)
    for _ in range(300):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        ids = trained.encode_bytes(data)
        assert trained.decode_bytes(ids) == data
        assert all(0 <= i < trained.vocab_size and i != trained.eot_id for i in ids)


def test_any_unicode_round_trips(trained):
    rng = random.Random(1)
    code_points = [*range(0xD800), *range(0xE000, 0x110000)]  # all but the surrogates
    for _ in range(300):
        text = "".join(chr(rng.choice(code_points)) for _ in range(rng.randrange(20)))
        ids = trained.encode(text)
        assert trained.decode(ids) == text
        assert trained.encode_bytes(text.encode("utf-8")) == ids  # valid UTF-8: the same ids as encode


def test_decode_replaces_a_split_character(trained):
    ids = trained.encode_bytes("é".encode()[:1])  # half of a two-byte character
    assert trained.decode(ids) == "\ufffd"


# --- training -----------------------------------------------------------------------------------------------


def test_trained_vocabulary_layout(trained):
    assert isinstance(trained, Tokenizer)
    assert trained.vocab_size == 400 == 257 + len(trained.merges)
    assert trained.eot_id == trained.vocab_size - 1 == trained.token_to_id(END_OF_TEXT)
    assert [trained.id_to_token[i] for i in range(256)] == list(bytes_to_unicode().values())
    assert all(trained.token_to_id(left + right) == 256 + k for k, (left, right) in enumerate(trained.merges))
    assert len(trained.encode(TRAIN_TEXT)) < len(TRAIN_TEXT.encode()) / 3  # the merges do compress


def train_by_recounting(text: str, n_merges: int) -> list[tuple[str, str]]:
    """The textbook algorithm, slow but plainly right: recount every pair before each merge."""
    words = {}
    for piece in PRETOKENIZE.findall(text):
        symbols = tuple(to_symbols(piece))
        words[symbols] = words.get(symbols, 0) + 1
    merges = []
    for _ in range(n_merges):
        pair_counts = {}
        for symbols, count in words.items():
            for pair in itertools.pairwise(symbols):
                pair_counts[pair] = pair_counts.get(pair, 0) + count
        best = min(pair_counts, key=lambda pair: (-pair_counts[pair], pair))  # most frequent, then first
        merges.append(best)
        words = {tuple(_merge_pair(list(symbols), best)): count for symbols, count in words.items()}
    return merges


def test_training_matches_recounting_every_pair(trained):
    """The incremental pair counts of train() give exactly the merges a full recount would."""
    assert trained.merges == train_by_recounting(TRAIN_TEXT, len(trained.merges))


def test_training_is_deterministic(trained):
    assert ByteBPETokenizer.train([TRAIN_TEXT], 400).merges == trained.merges
    # Three pairs occur once each: the tie goes to the pair that sorts first ("Ġ" is chr(288), after "c").
    assert ByteBPETokenizer.train(["ab cd"], 258).merges == [("a", "b")]


def test_merges_never_cross_pre_tokens(capsys):
    text = "x.x.x.x.x.x, y!y!y!y! 12ab12ab 'sss ok\n\nok\n\n" * 5
    tokenizer = ByteBPETokenizer.train([text], 1000)  # more than the text has pairs for
    pieces = [piece.encode() for piece in PRETOKENIZE.findall(text)]
    for left, right in tokenizer.merges:
        token = tokenizer.decode_bytes([tokenizer.token_to_id(left + right)])
        assert any(token in piece for piece in pieces), token
    assert "this corpus supports" in capsys.readouterr().out
    assert tokenizer.vocab_size == 257 + len(tokenizer.merges) < 1000
    assert tokenizer.encode(" ok") == [tokenizer.token_to_id("Ġok")]  # every pre-token merged to one token


def test_train_refuses_a_vocabulary_without_room_for_the_bytes():
    with pytest.raises(CourseError, match="at least 257"):
        ByteBPETokenizer.train(["abc"], 256)


def test_trained_tokenizer_saves_in_transformers_layout(trained, tmp_path):
    trained.save(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["merges.txt", "vocab.json"]
    assert (tmp_path / "merges.txt").read_text(encoding="utf-8").splitlines()[0] == "#version: 0.2"
    again = load_tokenizer(tmp_path)
    assert (again.encoder, again.merges) == (trained.encoder, trained.merges)

    theirs = hf_tokenizer(tmp_path)
    assert len(theirs) == trained.vocab_size
    for text in [TRAIN_TEXT[:300], *TEXTS]:  # seen text and text with characters training never saw
        assert trained.encode(text) == theirs.encode(text, add_special_tokens=False), text


# --- the pinned download ------------------------------------------------------------------------------------


class FileHandler(BaseHTTPRequestHandler):
    """Serves the bytes in server.files by path; every request is logged in server.requests."""

    def do_GET(self):
        self.server.requests.append(self.path)
        body = self.server.files.get(self.path)
        if body is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture
def server(monkeypatch):
    """A local HTTP server standing in for OpenAI's, with GPT2_URL pointed at it; fill server.files."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FileHandler)
    httpd.daemon_threads = True
    httpd.files, httpd.requests = {}, []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    monkeypatch.setattr(tokenizer_module, "GPT2_URL", f"http://127.0.0.1:{httpd.server_address[1]}/files/")
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_gpt2_files_downloads_the_pinned_files_once(server, released, tmp_path):
    server.files = {f"/files/{name}": (released / name).read_bytes() for name in GPT2_FILES}
    encoder_json, vocab_bpe = gpt2_files(tmp_path)
    assert (encoder_json, vocab_bpe) == tuple(tmp_path / "downloads" / "gpt2" / name for name in GPT2_FILES)
    for path, (size, sha256) in zip((encoder_json, vocab_bpe), GPT2_FILES.values(), strict=True):
        assert _is_pinned(path, size, sha256)
    assert gpt2_files(tmp_path) == (encoder_json, vocab_bpe)
    assert len(server.requests) == 2  # the second call found both files in the cache


def test_gpt2_files_refuses_a_wrong_file(server, tmp_path):
    server.files = {"/files/encoder.json": b'{"not": "the vocabulary"}'}
    with pytest.raises(CourseError, match="expected 1,042,301") as failure:
        gpt2_files(tmp_path)
    assert "--TOKENIZER=bpe" in str(failure.value) and "\n" not in str(failure.value)
    assert "--CORPUS" not in str(failure.value)  # the corpus is not what is missing
    assert list((tmp_path / "downloads" / "gpt2").iterdir()) == []  # nothing half-checked is left


# --- loading ------------------------------------------------------------------------------------------------


def test_load_tokenizer_reads_the_released_file_names(gpt2, released):
    assert load_tokenizer(released).encode("Hello world") == [15496, 995]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no GPT-2 tokenizer in"),
        ({"vocab.json": "{not json", "merges.txt": "#version: 0.2\n"}, "cannot read a GPT-2 tokenizer"),
        ({"vocab.json": '{"a": 0, "b": 1}', "merges.txt": "#version: 0.2\na b\n"}, "byte tokens missing"),
    ],
    ids=["empty", "not-json", "not-byte-level"],
)
def test_load_tokenizer_fails_with_one_line(tmp_path, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(CourseError, match=message) as failure:
        load_tokenizer(tmp_path)
    assert str(failure.value).startswith("error: ") and "\n" not in str(failure.value)
