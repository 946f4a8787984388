import io
import json

import numpy as np
import pytest
import torch

from common.data.tokenizers import CharTokenizer
from common.data.tokens import Batches, DocumentSplit, SplitWriter, load_tokens, read_meta, write_token_files
from common.errors import CourseError

SPECIALS = ["<unk>", "<|endoftext|>"]
EOT = 1


def make_documents(n: int) -> list[str]:
    return [f"document {i}: " + "abc" * (i % 7) for i in range(n)]


def char_tokenizer(documents: list[str]) -> CharTokenizer:
    return CharTokenizer.train(documents, SPECIALS)


class WideTokenizer:
    """A tokenizer whose ids do not fit in uint16."""

    vocab_size = 70_000

    def encode(self, text: str) -> list[int]:
        return [69_000 + ord(ch) % 1000 for ch in text]


def split_documents(tokens: np.ndarray, tok: CharTokenizer) -> list[str]:
    """Decode a token file back into its documents (each one ends with the separator)."""
    text = tok.decode(tokens)
    assert text.endswith("<|endoftext|>")
    return text.split("<|endoftext|>")[:-1]


def file_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_documents_go_whole_to_one_split(tmp_path):
    docs = make_documents(300)
    tok = char_tokenizer(docs)
    meta = write_token_files(docs, tok, tmp_path, val_fraction=0.1, separator_id=EOT,
                             extra_meta={"corpus": "x"})

    train, val = load_tokens(tmp_path, "train"), load_tokens(tmp_path, "val")
    train_docs, val_docs = split_documents(train, tok), split_documents(val, tok)
    assert sorted(train_docs + val_docs) == sorted(docs)  # every document once, in one piece
    assert 0.09 <= len(val) / (len(train) + len(val)) <= 0.1  # val's share, to within one document
    assert sorted(val_docs) == sorted(docs[i] for i in meta["val_documents"])
    assert train.dtype == np.uint16 and val.dtype == np.uint16
    assert meta == read_meta(tmp_path)
    assert meta == {
        "dtype": "uint16", "vocab_size": tok.vocab_size, "train_tokens": len(train), "val_tokens": len(val),
        "documents": 300, "val_fraction": 0.1, "val_documents": meta["val_documents"], "corpus": "x",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json", "train.bin", "val.bin"]


def test_document_split_sends_a_document_to_val_when_it_fits_in_vals_share():
    split = DocumentSplit(0.25)
    # seen: 10, 20, 23, 33, 36, 76, 80; val may hold a quarter of what was seen, counting the new document
    assert ([split.to_val(n) for n in (10, 10, 3, 10, 3, 40, 4)]
            == [False, False, True, False, True, False, True])
    assert (split.seen, split.val_seen) == (80, 10)


def test_without_separator_documents_are_concatenated(tmp_path):
    docs = ["abc", "def"] * 20
    tok = char_tokenizer(docs)
    meta = write_token_files(docs, tok, tmp_path, separator_id=None)
    assert meta["train_tokens"] + meta["val_tokens"] == 3 * 40
    assert set(tok.decode(load_tokens(tmp_path, "train"))) <= set("abcdef")


def test_split_is_deterministic_and_spread_through_the_corpus(tmp_path):
    docs = make_documents(200)
    tok = char_tokenizer(docs)
    metas = [write_token_files(iter(docs), tok, tmp_path / name, separator_id=EOT) for name in "ab"]
    assert file_bytes(tmp_path / "a") == file_bytes(tmp_path / "b")
    val_documents = metas[0]["val_documents"]
    assert val_documents[0] < 40 and val_documents[-1] > 160  # not all from one end


def test_few_long_documents_still_give_val_its_share(tmp_path):
    docs = [("word " * (50 + 37 * (i % 5))).strip() for i in range(30)]  # 30 documents of uneven length
    tok = char_tokenizer(docs)
    meta = write_token_files(docs, tok, tmp_path, val_fraction=0.1, separator_id=EOT)
    share = meta["val_tokens"] / (meta["train_tokens"] + meta["val_tokens"])
    assert 0.05 < share <= 0.1


def test_dtype_follows_the_vocabulary_size(tmp_path):
    meta = write_token_files(make_documents(20), WideTokenizer(), tmp_path, separator_id=69_999)
    assert meta["dtype"] == "uint32"
    train = load_tokens(tmp_path, "train")
    assert train.dtype == np.uint32 and train.max() == 69_999


@pytest.mark.parametrize(("n_documents", "val_fraction"),
                         [(1, 0.1), (1, 0.5), (2, 0.01), (3, 0.99), (4, 0.999)])
def test_both_splits_are_never_empty(tmp_path, n_documents, val_fraction):
    docs = ["some words in a document " * 4] * n_documents
    tok = char_tokenizer(docs)
    meta = write_token_files(docs, tok, tmp_path, val_fraction=val_fraction, separator_id=EOT, chunk_tokens=7)
    train, val = load_tokens(tmp_path, "train"), load_tokens(tmp_path, "val")
    assert len(train) > 0 and len(val) > 0
    assert len(train) + len(val) == n_documents * (len(docs[0]) + 1)
    assert (meta["train_tokens"], meta["val_tokens"]) == (len(train), len(val))
    # Nothing lost, nothing reordered: the documents are all alike, so the two splits
    # end to end spell the corpus.
    corpus = "<|endoftext|>".join(docs) + "<|endoftext|>"
    assert corpus in (tok.decode(train) + tok.decode(val), tok.decode(val) + tok.decode(train))


def test_one_document_splits_by_tokens(tmp_path):
    doc = "x" * 999
    tok = char_tokenizer([doc])
    meta = write_token_files([doc], tok, tmp_path, val_fraction=0.1, separator_id=EOT)
    assert (meta["train_tokens"], meta["val_tokens"]) == (900, 100)
    assert load_tokens(tmp_path, "val")[-1] == EOT  # the tail of the document went to val


def test_too_little_text_is_one_line(tmp_path):
    with pytest.raises(CourseError, match="too few to train on"):
        write_token_files(["a"], char_tokenizer(["a"]), tmp_path, separator_id=None)


def test_val_fraction_must_be_a_fraction(tmp_path):
    with pytest.raises(CourseError, match="VAL_FRACTION=0 must be between 0 and 1"):
        write_token_files(["abc"], char_tokenizer(["abc"]), tmp_path, val_fraction=0, separator_id=None)


def test_tokens_are_streamed_in_chunks(tmp_path):
    """With a small chunk size, tokens reach the disk while documents are still being read."""
    docs = make_documents(100)
    tok = char_tokenizer(docs)
    on_disk_before_the_end = []

    def stream():
        for i, doc in enumerate(docs):
            if i == len(docs) - 1:
                on_disk_before_the_end.append(
                    sum(p.stat().st_size for p in (tmp_path / "small").glob("*.tmp")))
            yield doc

    write_token_files(stream(), tok, tmp_path / "small", separator_id=EOT, chunk_tokens=16)
    write_token_files(docs, tok, tmp_path / "big", separator_id=EOT)
    assert on_disk_before_the_end[0] > 1000
    assert file_bytes(tmp_path / "small") == file_bytes(tmp_path / "big")


def test_interrupted_run_keeps_the_previous_files(tmp_path):
    docs = make_documents(50)
    tok = char_tokenizer(docs)
    write_token_files(docs, tok, tmp_path, separator_id=EOT)
    before = file_bytes(tmp_path)

    def failing():
        yield from docs[:30]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_token_files(failing(), tok, tmp_path, separator_id=EOT, chunk_tokens=8)
    assert file_bytes(tmp_path) == before  # same files, and no temporary ones left behind


def test_missing_or_incomplete_files_are_one_line(tmp_path):
    with pytest.raises(CourseError, match="meta.json is missing.*run download_data.py"):
        read_meta(tmp_path)
    docs = make_documents(30)
    write_token_files(docs, char_tokenizer(docs), tmp_path, separator_id=EOT)
    with open(tmp_path / "train.bin", "r+b") as f:
        f.truncate(10)
    with pytest.raises(CourseError, match="train.bin is missing or incomplete"):
        load_tokens(tmp_path, "train")



# --- SplitWriter: the same files for a chapter with a format of its own -------------------------------------


def test_split_writer_publishes_a_chapters_own_files_with_the_token_files(tmp_path):
    with SplitWriter(tmp_path, vocab_size=100, val_fraction=0.5) as writer:
        splits = [writer.write(ids) for ids in ([1, 2, 3], [], [4, 5], np.array([6, 7, 8, 9]))]
        offsets = np.array([0, 3, 7], dtype=np.int64)
        meta = writer.publish({"format": "mine"}, files={"train_offsets.npy": offsets})
    assert splits == ["train", None, "val", "train"]  # an empty document is counted, written nowhere
    assert meta == read_meta(tmp_path) == {
        "dtype": "uint16", "vocab_size": 100, "train_tokens": 7, "val_tokens": 2, "documents": 4,
        "val_fraction": 0.5, "val_documents": [2], "format": "mine"}
    assert load_tokens(tmp_path, "train").tolist() == [1, 2, 3, 6, 7, 8, 9]
    assert np.array_equal(np.load(tmp_path / "train_offsets.npy"), offsets)
    assert (sorted(p.name for p in tmp_path.iterdir())
            == ["meta.json", "train.bin", "train_offsets.npy", "val.bin"])


def test_split_writer_interrupted_before_publish_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt), SplitWriter(tmp_path, vocab_size=100, val_fraction=0.1) as writer:
        writer.write([1, 2, 3])
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


# --- Batches ------------------------------------------------------------------------------------------------


def test_batches_are_windows_and_next_tokens():
    tokens = np.arange(1000, dtype=np.uint16)  # token i sits at position i: a window shows where it came from
    x, y = Batches(tokens, block_size=8, batch_size=4, device=torch.device("cpu"), seed=0).next()
    assert x.shape == y.shape == (4, 8)
    assert x.dtype == y.dtype == torch.int64
    assert x.is_contiguous() and y.is_contiguous()
    assert torch.equal(x - x[:, :1], torch.arange(8).expand(4, 8))  # consecutive tokens
    assert torch.equal(y, x + 1)  # the targets are the inputs shifted by one


def test_batches_reach_every_window():
    tokens = np.arange(12, dtype=np.uint32)
    batches = Batches(tokens, block_size=8, batch_size=64, device=torch.device("cpu"), seed=0)
    x, y = batches.next()
    assert set(x[:, 0].tolist()) == {0, 1, 2, 3}  # windows may start anywhere their target still fits
    assert y.max().item() == 11


def test_exactly_one_window_is_enough():
    x, y = Batches(np.arange(9, dtype=np.uint16), 8, 2, torch.device("cpu"), seed=0).next()
    assert x[:, 0].tolist() == [0, 0]
    with pytest.raises(CourseError, match="fewer than BLOCK_SIZE \\+ 1 = 9"):
        Batches(np.arange(8, dtype=np.uint16), 8, 2, torch.device("cpu"), seed=0)


def test_processes_of_a_data_parallel_run_read_disjoint_parts_of_one_batch():
    tokens = np.arange(10_000, dtype=np.uint16)
    whole = Batches(tokens, 16, 8, torch.device("cpu"), seed=3)
    parts = [Batches(tokens, 16, 8, torch.device("cpu"), seed=3, rank=r, world_size=4) for r in range(4)]
    for _ in range(3):
        x, y = whole.next()
        shares = [part.next() for part in parts]
        assert all(share[0].shape == (2, 16) for share in shares)
        assert torch.equal(torch.cat([share[0] for share in shares]), x)
        assert torch.equal(torch.cat([share[1] for share in shares]), y)
    with pytest.raises(CourseError, match="does not split evenly over 3 processes"):
        Batches(tokens, 16, 8, torch.device("cpu"), seed=3, rank=0, world_size=3)


def test_seed_decides_the_batches():
    tokens = np.arange(10_000, dtype=np.uint16)

    def draw(seed):
        batches = Batches(tokens, 16, 8, torch.device("cpu"), seed=seed)
        return [batches.next()[0] for _ in range(3)]

    assert all(torch.equal(a, b) for a, b in zip(draw(5), draw(5), strict=True))
    assert not torch.equal(draw(5)[0], draw(6)[0])


def test_resumed_batches_match_an_uninterrupted_run():
    tokens = np.arange(10_000, dtype=np.uint16)
    uninterrupted = Batches(tokens, 16, 8, torch.device("cpu"), seed=1)
    expected = [uninterrupted.next() for _ in range(6)]

    first = Batches(tokens, 16, 8, torch.device("cpu"), seed=1)
    for _ in range(2):
        first.next()
    buffer = io.BytesIO()
    torch.save({"batches": first.state_dict()}, buffer)  # as in a checkpoint
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)["batches"]

    torch.manual_seed(123)  # other randomness in between must not matter
    resumed = Batches(tokens, 16, 8, torch.device("cpu"), seed=999)
    resumed.load_state_dict(state)
    for x_expected, y_expected in expected[2:]:
        x, y = resumed.next()
        assert torch.equal(x, x_expected) and torch.equal(y, y_expected)


def test_batches_from_a_token_file(tmp_path):
    docs = make_documents(100)
    write_token_files(docs, char_tokenizer(docs), tmp_path, separator_id=EOT)
    train = load_tokens(tmp_path, "train")
    x, y = Batches(train, 32, 4, torch.device("cpu"), seed=0).next()
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert 0 <= x.min() and x.max() < read_meta(tmp_path)["vocab_size"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_batches_equal_cpu_batches():
    tokens = np.arange(10_000, dtype=np.uint16)
    x_cpu, y_cpu = Batches(tokens, 16, 8, torch.device("cpu"), seed=2).next()
    x, y = Batches(tokens, 16, 8, torch.device("cuda"), seed=2).next()
    assert x.device.type == "cuda" and y.device.type == "cuda"
    assert torch.equal(x.cpu(), x_cpu) and torch.equal(y.cpu(), y_cpu)


def test_the_corpus_path_is_recorded_from_the_folder_and_moves_with_it(tmp_path):
    data = tmp_path / "data"
    (data / "corpora").mkdir(parents=True)
    corpus_path = data / "corpora" / "x.jsonl"
    tok = CharTokenizer(["<unk>", "<|endoftext|>"], list("abc"))
    write_token_files(["abc", "cab", "bca"] * 10, tok, data / "project1" / "x", val_fraction=0.1,
                      separator_id=1, extra_meta={"corpus_path": str(corpus_path)})
    on_disk = json.loads((data / "project1" / "x" / "meta.json").read_text())
    assert on_disk["corpus_path"] == "../../corpora/x.jsonl"
    assert read_meta(data / "project1" / "x")["corpus_path"] == str(corpus_path)
    data.rename(tmp_path / "moved")
    moved = tmp_path / "moved"
    assert read_meta(moved / "project1" / "x")["corpus_path"] == str(moved / "corpora" / "x.jsonl")
