"""Data preparation and BERT's two pre-training tasks: the files, the masking statistics, the pairs."""

import io
import shutil
from itertools import pairwise
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from common.data.corpora import open_corpus
from common.data.sentences import document_sentences
from common.data.tokens import read_meta
from common.errors import CourseError
from phase1_foundation.project3_contextual_embeddings import download_data, pretraining_data
from phase1_foundation.project3_contextual_embeddings.download_data import (
    CLS_ID,
    MASK_ID,
    PAD_ID,
    SEP_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    load_split,
)
from phase1_foundation.project3_contextual_embeddings.pretraining_data import (
    IGNORE,
    PairBatches,
    mask_tokens,
    truncated_lengths,
)
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer

CPU = torch.device("cpu")
MASKING = dict(mlm_prob=0.15, mask_share=0.8, random_share=0.1)

# --- download_data.py ---------------------------------------------------------------------------------------


def test_prepare_writes_tokenizer_sentences_and_documents(tiny, monkeypatch):
    folder = download_data.main(tiny)
    tokenizer = load_tokenizer(folder)
    assert [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS] == [PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID]
    assert [PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID] == [0, 1, 2, 3, 4]
    assert sorted(p.name for p in folder.iterdir()) == sorted([
        "meta.json", "tokenizer.model", "train.bin", "val.bin", "train_sentences.npy", "val_sentences.npy",
        "train_documents.npy", "val_documents.npy",
    ])
    meta = read_meta(folder)
    assert meta["corpus"] == "file:articles" and meta["documents"] == 12 and meta["vocab_size"] == 512
    assert meta["val_documents"] and meta["val_documents"] == sorted(meta["val_documents"])

    # Every sentence of every document, decoded from the files, is the corpus's sentence, in order.
    documents_text = open_corpus(meta["corpus_path"]).iter_documents()
    corpus = [document_sentences(text) for text in documents_text]
    for split in ("train", "val"):
        tokens, sentences, documents = load_split(folder, split)
        assert tokens.dtype == np.uint16 and sentences.dtype == documents.dtype == np.int64
        assert sentences[0] == documents[0] == 0 and sentences[-1] == len(tokens)
        assert (np.diff(sentences) > 0).all() and (np.diff(documents) > 0).all()  # nothing empty
        assert meta["counts"][split] == {
            "documents": len(documents) - 1, "sentences": len(sentences) - 1, "tokens": len(tokens),
        }
        held_out = set(meta["val_documents"])
        expected = [doc for i, doc in enumerate(corpus) if (i in held_out) == (split == "val")]
        text = [tokenizer.decode(tokens[start:end]) for start, end in pairwise(sentences)]
        decoded = [text[first:last] for first, last in pairwise(documents)]
        assert decoded == [[" " + s for s in doc] for doc in expected]

    # Prepared once, then reused: a second call trains nothing and rewrites nothing.
    stamp = (folder / "meta.json").stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("the tokenizer was trained again")

    monkeypatch.setattr(download_data.SentencePieceTokenizer, "train", no_training)
    assert download_data.main(tiny) == folder
    assert (folder / "meta.json").stat().st_mtime_ns == stamp


def test_load_split_refuses_incomplete_files(tiny, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(download_data.main(tiny), copy)
    (copy / "val_documents.npy").unlink()
    load_split(copy, "train")  # the other split is still fine
    with pytest.raises(CourseError, match="val files in .* are missing or incomplete"):
        load_split(copy, "val")


class StubTokenizer:
    vocab_size = 300

    def encode(self, text):
        return [5 + ord(ch) % 250 for ch in text]


def test_a_corpus_that_leaves_a_split_empty_is_one_line(tmp_path):
    with pytest.raises(CourseError, match="1 document.* 1 train and 0 val"):
        download_data.write_sentence_files(["One. Two. Three."], StubTokenizer(), tmp_path, val_fraction=0.1)
    assert not list(tmp_path.iterdir())  # no half-written files


# --- mask_tokens --------------------------------------------------------------------------------------------


def padded_pairs(generator, B=64, T=128, vocab_size=1000):
    """[CLS] a [SEP] b [SEP] [PAD]...: n = 1 .. T-3 ordinary tokens per row, random in [5, vocab_size)."""
    ids = torch.full((B, T), PAD_ID)
    for row, n in enumerate(torch.randint(1, T - 2, (B,), generator=generator).tolist()):
        a = torch.randint(0, n + 1, (1,), generator=generator).item()
        words = torch.randint(len(SPECIAL_TOKENS), vocab_size, (n,), generator=generator)
        ids[row, : n + 3] = torch.cat([torch.tensor([CLS_ID]), words[:a], torch.tensor([SEP_ID]), words[a:],
                                      torch.tensor([SEP_ID])])
    return ids


def test_mask_tokens_follows_bert_statistics():
    generator = torch.Generator().manual_seed(0)
    chosen_total = ordinary_total = mask = random = 0
    for _ in range(40):
        ids = padded_pairs(generator)
        masked, labels = mask_tokens(ids, vocab_size=1000, generator=generator, **MASKING)
        assert masked.shape == labels.shape == ids.shape and masked.dtype == labels.dtype == torch.long
        ordinary = ids >= len(SPECIAL_TOKENS)
        chosen = labels != IGNORE
        assert not (chosen & ~ordinary).any()  # specials and padding never chosen
        assert torch.equal(labels[chosen], ids[chosen])  # the target is always the original token
        assert torch.equal(masked[~chosen], ids[~chosen])  # nothing else changes
        n = ordinary.sum(1)
        assert chosen.sum(1).tolist() == [max(1, round(0.15 * k)) for k in n.tolist()]  # exact count per row
        replaced = chosen & (masked != MASK_ID) & (masked != ids)
        assert (masked[replaced] >= len(SPECIAL_TOKENS)).all() and (masked < 1000).all()  # never a special
        chosen_total += chosen.sum().item()
        ordinary_total += n.sum().item()
        mask += (chosen & (masked == MASK_ID)).sum().item()
        random += replaced.sum().item()
    assert abs(chosen_total / ordinary_total - 0.15) < 0.005
    assert abs(mask / chosen_total - 0.8) < 0.015
    assert abs(random / chosen_total - 0.1) < 0.015
    assert abs(1 - (mask + random) / chosen_total - 0.1) < 0.015


def test_mask_tokens_picks_at_least_one_and_skips_rows_without_words():
    ids = torch.tensor([[CLS_ID, 7, SEP_ID, 8, SEP_ID, PAD_ID], [CLS_ID, SEP_ID, SEP_ID] + [PAD_ID] * 3])
    masked, labels = mask_tokens(ids, vocab_size=50, generator=torch.Generator().manual_seed(1), **MASKING)
    assert (labels[0] != IGNORE).sum() == 1 and (labels[1] == IGNORE).all() and torch.equal(masked[1], ids[1])


def test_mask_tokens_is_decided_by_the_generator():
    ids = padded_pairs(torch.Generator().manual_seed(0))
    a, b, c = (mask_tokens(ids, vocab_size=1000, generator=torch.Generator().manual_seed(seed), **MASKING)
               for seed in (3, 3, 4))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])


# --- PairBatches --------------------------------------------------------------------------------------------


def synthetic_split(n_documents=60, seed=0):
    """Documents of 1..8 sentences of 2..20 tokens, where the token at position p is 5 + p: every token says
    exactly where it came from, so a pair can be checked against the corpus."""
    rng = np.random.default_rng(seed)
    documents = np.concatenate([[0], np.cumsum(rng.integers(1, 9, n_documents))])
    sentences = np.concatenate([[0], np.cumsum(rng.integers(2, 21, documents[-1]))])
    tokens = (np.arange(sentences[-1]) + len(SPECIAL_TOKENS)).astype(np.uint16)
    return tokens, sentences, documents


def pair_batches(split, block_size, batch_size=64, seed=0, **kwargs):
    return PairBatches(*split, block_size=block_size, batch_size=batch_size, device=CPU, seed=seed,
                       vocab_size=5000, **MASKING, **kwargs)


def unpack(batch, split):
    """Each row as (A's token positions, B's token positions, label), checking the layout on the way."""
    _, sentences, documents = split
    original = torch.where(batch["mlm_labels"] != IGNORE, batch["mlm_labels"], batch["input_ids"])
    pairs = []
    for ids, segments, attention, label in zip(original, batch["segment_ids"], batch["attention_mask"],
                                               batch["nsp_labels"], strict=True):
        ids = ids.numpy()
        first, second = np.flatnonzero(ids == SEP_ID)  # exactly two [SEP]s
        assert ids[0] == CLS_ID and (ids[1:first] >= 5).all() and (ids[first + 1 : second] >= 5).all()
        assert (ids[second + 1 :] == PAD_ID).all()
        assert attention.tolist() == [1] * (second + 1) + [0] * (len(ids) - second - 1)
        assert segments.tolist() == [0] * (first + 1) + [1] * (second - first) + [0] * (len(ids) - second - 1)
        a, b = ids[1:first] - 5, ids[first + 1 : second] - 5
        assert len(a) and len(b) and (np.diff(a) == 1).all() and (np.diff(b) == 1).all()  # contiguous text
        pairs.append((a, b, label.item()))
    return pairs


def document_of(position, split):
    _, sentences, documents = split
    sentence = np.searchsorted(sentences, position, side="right") - 1
    return np.searchsorted(documents, sentence, side="right") - 1


def test_pairs_are_half_true_continuations_half_other_documents():
    split = synthetic_split()
    _, sentences, documents = split
    batches = pair_batches(split, block_size=256)  # longer than any document: nothing is ever truncated
    labels = []
    for _ in range(125):
        batch = batches.next()
        assert {k: tuple(v.shape) for k, v in batch.items()} == {
            "input_ids": (64, 256), "segment_ids": (64, 256), "attention_mask": (64, 256),
            "mlm_labels": (64, 256), "nsp_labels": (64,)}
        assert all(v.dtype == torch.long for v in batch.values())
        for a, b, label in unpack(batch, split):
            labels.append(label)
            doc_a, doc_b = document_of(a[0], split), document_of(b[0], split)
            assert document_of(a[-1], split) == doc_a and document_of(b[-1], split) == doc_b
            assert a[0] in sentences and b[0] in sentences  # whole sentences
            if label == 1:  # B is exactly what follows A, to the end of the chunk (here: of the document)
                assert doc_a == doc_b and b[0] == a[-1] + 1 and b[-1] + 1 == sentences[documents[doc_a + 1]]
            else:  # B comes from another document, so it can never be A's true continuation
                assert doc_a != doc_b and b[-1] + 1 in sentences
    assert abs(np.mean(labels) - 0.5) < 0.02


def test_long_pairs_are_truncated_like_bert():
    split = synthetic_split()
    batches = pair_batches(split, block_size=24)
    lengths, gaps = [], []
    for _ in range(20):
        for a, b, label in unpack(batches.next(), split):
            lengths.append(len(a) + len(b))
            if label == 1:
                assert document_of(a[0], split) == document_of(b[-1], split) and b[0] > a[-1]
                gaps.append(b[0] - a[-1] - 1)  # trimmed at the join: the back of A, the front of B
            else:
                assert document_of(a[0], split) != document_of(b[0], split)
    assert max(lengths) == 21  # block_size - 3
    assert np.mean(np.array(lengths) == 21) > 0.8  # filled up, unless the document ends first
    assert 0 in gaps and max(gaps) > 0  # sometimes trimmed at the join, sometimes at the outer ends


def test_truncated_lengths_match_berts_token_by_token_loop():
    def truncate_seq_pair(len_a, len_b, max_tokens):  # create_pretraining_data.py's, counting, not deleting
        while len_a + len_b > max_tokens:
            if len_a > len_b:
                len_a -= 1
            else:
                len_b -= 1
        return len_a, len_b

    grid = np.array([(a, b) for a in range(1, 40) for b in range(1, 40)])
    for max_tokens in range(2, 30):
        keep_a, keep_b = truncated_lengths(grid[:, 0], grid[:, 1], max_tokens)
        expected = [truncate_seq_pair(a, b, max_tokens) for a, b in grid]
        assert list(zip(keep_a, keep_b, strict=True)) == expected


def test_short_pairs_have_a_random_target_length():
    split = synthetic_split(n_documents=200)
    full, short = pair_batches(split, block_size=64), pair_batches(split, block_size=64, short_seq_prob=1.0)
    full_lengths, short_lengths = [], []
    for _ in range(10):
        full_lengths += [len(a) + len(b) for a, b, _ in unpack(full.next(), split)]
        for a, b, label in unpack(short.next(), split):
            short_lengths.append(len(a) + len(b))
            if len(a) + len(b) < 61:  # not trimmed: a pair of whole sentences
                assert a[0] in split[1] and b[-1] + 1 in split[1] and (label == 0 or b[0] == a[-1] + 1)
    # Targets uniform over 2 .. 61, filled to the next sentence boundary: far shorter than the full ones.
    assert np.mean(short_lengths) < 0.75 * np.mean(full_lengths)
    assert np.mean(np.array(short_lengths) < 30) > np.mean(np.array(full_lengths) < 30) + 0.2


def test_validation_pairs_are_never_short():
    split = synthetic_split()
    cfg = SimpleNamespace(BLOCK_SIZE=32, BATCH_SIZE=8, USE_NSP=True, SHORT_SEQ_PROB=0.5, MLM_PROB=0.15,
                          MASK_TOKEN_SHARE=0.8, RANDOM_TOKEN_SHARE=0.1)
    assert pretraining_data.pair_batches(split, cfg, 5000, CPU, seed=0).short_seq_prob == 0.0
    assert pretraining_data.pair_batches(split, cfg, 5000, CPU, seed=0, training=True).short_seq_prob == 0.5
    with pytest.raises(CourseError, match="SHORT_SEQ_PROB"):
        pair_batches(split, block_size=32, short_seq_prob=1.5)


def test_without_nsp_every_pair_is_contiguous_text():
    split = synthetic_split()
    batches = pair_batches(split, block_size=256, use_nsp=False)
    for _ in range(10):
        for a, b, label in unpack(batches.next(), split):
            assert label == 1 and b[0] == a[-1] + 1


def test_too_few_documents_is_one_line():
    tokens, sentences, _ = synthetic_split()
    one_document = (tokens, sentences, np.array([0, len(sentences) - 1]))
    with pytest.raises(CourseError, match="1 document.*need 2 documents"):
        pair_batches(one_document, block_size=32)
    pair_batches(one_document, block_size=32, use_nsp=False).next()  # contiguous text needs only one
    with pytest.raises(CourseError, match="BLOCK_SIZE=4"):
        pair_batches(synthetic_split(), block_size=4)


def test_resumed_batches_match_an_uninterrupted_run():
    split = synthetic_split()
    uninterrupted = pair_batches(split, block_size=32, seed=1)
    expected = [uninterrupted.next() for _ in range(5)]

    first = pair_batches(split, block_size=32, seed=1)
    for _ in range(2):
        first.next()
    buffer = io.BytesIO()
    torch.save({"batches": first.state_dict()}, buffer)  # as in a checkpoint
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)["batches"]

    torch.manual_seed(123)  # other randomness in between must not matter
    resumed = pair_batches(split, block_size=32, seed=999)
    resumed.load_state_dict(state)
    for batch in expected[2:]:
        got = resumed.next()
        assert all(torch.equal(got[k], batch[k]) for k in batch)


def test_pairs_from_the_prepared_corpus(tiny):
    folder = download_data.main(tiny)
    vocab_size = read_meta(folder)["vocab_size"]
    for split in ("train", "val"):
        batches = PairBatches(*load_split(folder, split), block_size=32, batch_size=8, device=CPU, seed=0,
                              vocab_size=vocab_size, **MASKING)
        batch = batches.next()
        assert batch["input_ids"].max() < vocab_size and (batch["input_ids"][:, 0] == CLS_ID).all()
        assert (batch["mlm_labels"] != IGNORE).any(dim=1).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_batches_equal_cpu_batches():
    split = synthetic_split()
    on_cpu = pair_batches(split, block_size=32, seed=3)
    on_gpu = PairBatches(*split, block_size=32, batch_size=64, device=torch.device("cuda"), seed=3,
                         vocab_size=5000, **MASKING)
    for _ in range(3):
        expected, got = on_cpu.next(), on_gpu.next()
        assert all(got[k].is_cuda and torch.equal(got[k].cpu(), expected[k]) for k in expected)
