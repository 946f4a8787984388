"""The masked-LM metrics kept apart by what the model saw, and the baselines scored on the same targets."""

import math
import random
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from phase1_foundation.project3_contextual_embeddings.baselines import Baselines, nsp_fitting_pairs
from phase1_foundation.project3_contextual_embeddings.download_data import CLS_ID, MASK_ID, SEP_ID
from phase1_foundation.project3_contextual_embeddings.model import BERT, BertConfig
from phase1_foundation.project3_contextual_embeddings.objectives import (
    count_by_kind,
    metrics,
    neighbour_attention,
    pretraining_loss,
    sums_by_kind,
)
from phase1_foundation.project3_contextual_embeddings.pretraining_data import (
    IGNORE,
    chosen_targets,
    pair_batches,
)

V = 12  # 5 special tokens, then the ordinary tokens 5 .. 11


def batch(original: list[list[int]], seen: list[list[int]], chosen: list[list[bool]]) -> dict:
    """A hand-made batch: what the text was, what the model sees, and which positions are targets."""
    original, chosen = torch.tensor(original), torch.tensor(chosen)
    return dict(input_ids=torch.tensor(seen), mlm_labels=original.masked_fill(~chosen, IGNORE),
                segment_ids=torch.zeros_like(original), attention_mask=torch.ones_like(original),
                nsp_labels=torch.zeros(len(original), dtype=torch.long))


# [CLS] 5 6 7 8 [SEP]: 6 chosen and masked, 7 chosen and replaced by 9, 8 chosen and left as it is.
ONE = batch([[CLS_ID, 5, 6, 7, 8, SEP_ID]], [[CLS_ID, 5, MASK_ID, 9, 8, SEP_ID]],
            [[False, False, True, True, True, False]])


def test_chosen_targets_tell_mask_random_and_unchanged_apart():
    chosen, targets, kind = chosen_targets(ONE)
    assert chosen.tolist() == [[False, False, True, True, True, False]]
    assert targets.tolist() == [6, 7, 8] and kind.tolist() == [0, 1, 2]  # KINDS: mask, random, unchanged


def test_sums_by_kind_and_metrics_give_the_mean_of_each_kind():
    kind = torch.tensor([0, 0, 1, 2, 2, 2])
    loss = torch.tensor([1.0, 3.0, 5.0, 0.5, 0.5, 2.0])
    correct = torch.tensor([True, False, False, True, True, True])
    sums = count_by_kind(kind) | sums_by_kind("", kind, loss, correct)
    sums |= sums_by_kind("copy_", kind, None, ~correct)
    counts = Counter({k: float(v) for k, v in sums.items()})
    out = metrics(counts, "val")
    assert out["val_mask_loss"] == 2.0 and out["val_random_loss"] == 5.0 and out["val_unchanged_loss"] == 1.0
    assert out["val_mlm_loss"] == pytest.approx(12 / 6)
    assert out["val_mask_accuracy"] == 0.5 and out["val_random_accuracy"] == 0.0
    assert out["val_unchanged_accuracy"] == 1.0 and out["val_mlm_accuracy"] == pytest.approx(4 / 6)
    assert out["val_copy_mask_accuracy"] == 0.5 and "val_copy_mask_loss" not in out  # copy has no loss


def test_the_models_kinds_add_up_to_its_loss():
    torch.manual_seed(0)
    model = BERT(BertConfig(vocab_size=V, block_size=8, n_layer=1, n_head=2, n_embd=16, dropout=0.0))
    loss, counts = pretraining_loss(model, ONE, use_nsp=False)
    out = metrics(counts, "train")
    assert counts["mask_count"] == counts["random_count"] == counts["unchanged_count"] == 1
    assert loss.item() == pytest.approx(out["train_mlm_loss"])
    assert out["train_mlm_loss"] == pytest.approx(
        (out["train_mask_loss"] + out["train_random_loss"] + out["train_unchanged_loss"]) / 3)


# --- baselines.py ----------------------------------------------------------------------------------------

# Training text, one document: "5 6 7" again and again, and 8 once; most frequent: 5, 6 and 7 tie, so the
# first of them wins. Sentences and documents as load_split gives them.
TOKENS = np.array([5, 6, 7] * 10 + [8], dtype=np.uint16)
SPLIT = (TOKENS, np.array([0, len(TOKENS)]), np.array([0, 1]))


def test_unigram_and_copy_rule():
    baselines = Baselines(SPLIT, V)
    assert baselines.most_frequent == 5
    assert baselines.unigram[:5].sum() == 0 and baselines.unigram.sum() == pytest.approx(1)
    assert baselines.unigram[5] == pytest.approx(11 / (31 + 7))  # Laplace: (10 + 1) / (31 + 7 ordinary)
    out = metrics(baselines.measure([ONE]), "val")
    assert out["val_copy_mask_accuracy"] == 0.0  # [MASK] over 6: the copy rule says 5, the commonest
    assert out["val_copy_random_accuracy"] == 0.0 and out["val_copy_unchanged_accuracy"] == 1.0
    assert out["val_unigram_mask_loss"] == pytest.approx(-math.log(baselines.unigram[6]))


def test_copy_rule_is_perfect_where_every_target_is_unchanged():
    text = [[CLS_ID, 5, 6, 7, 8, 9, 10, SEP_ID], [CLS_ID, 11, 10, 9, 8, 7, 6, SEP_ID]]
    chosen = [[False, True, True, True, True, True, True, False]] * 2
    out = metrics(Baselines(SPLIT, V).measure([batch(text, text, chosen)]), "val")
    assert out["val_copy_mlm_accuracy"] == out["val_copy_unchanged_accuracy"] == 1.0
    assert "val_copy_mask_accuracy" not in out  # no [MASK] position at all: no number, rather than 0


def test_bigram_reads_both_neighbours():
    baselines = Baselines(SPLIT, V)
    log_probs = baselines.bigram_log_probs(np.array([5, 5, MASK_ID, CLS_ID]), np.array([7, 8, 7, SEP_ID]))
    assert np.exp(log_probs).sum(axis=1) == pytest.approx(np.ones(4))
    assert np.isneginf(log_probs[:, :5]).all()  # special tokens are never the answer
    assert log_probs[0].argmax() == 6 and np.exp(log_probs[0, 6]) > 0.9  # 5 _ 7: always 6 in training
    assert log_probs[2].argmax() == 6  # [MASK] _ 7: the right neighbour alone still says 6
    np.testing.assert_allclose(np.exp(log_probs[3]), baselines.unigram)  # no neighbour: the unigram
    # Witten-Bell by hand. After 5 came 6 ten times (one distinct follower): P(6 | 5) = (10 + P(6)) / 11, and
    # P(x | 5) = P(x) / 11 for the others. P(8 | x): 5 and 6 were each followed by one token ten times, never
    # by 8: P(8) / 11; 7 by 5 nine times and by 8 once: (1 + 2 P(8)) / 12; 8 and the rest by nothing: P(8).
    p = baselines.unigram
    after_5 = np.where(np.arange(V) == 6, 10 + p, p) / 11
    before_8 = np.full(V, p[8])
    before_8[[5, 6, 7]] = p[8] / 11, p[8] / 11, (1 + 2 * p[8]) / 12
    expected = after_5 * before_8
    expected[:5] = 0
    np.testing.assert_allclose(np.exp(log_probs[1]), expected / expected.sum())


def test_bigram_counts_stay_inside_documents():
    # Two documents, "5 6" and "7 8": 6 is never followed by anything, so P(. | 6) is the unigram.
    split = (np.array([5, 6, 7, 8], dtype=np.uint16), np.array([0, 2, 4]), np.array([0, 1, 2]))
    baselines = Baselines(split, V)
    assert baselines.pairs[6].nnz == 0 and baselines.pairs[5, 6] == 1 and baselines.pairs[7, 8] == 1


# --- baselines.py: the NSP rule --------------------------------------------------------------------------

NSP_SETTINGS = SimpleNamespace(BLOCK_SIZE=32, BATCH_SIZE=32, USE_NSP=True, MLM_PROB=0.15,
                               MASK_TOKEN_SHARE=0.8, RANDOM_TOKEN_SHARE=0.1, SEED=0)
COMMON = 5  # ids 5 .. 9: words every document uses, like "the" and "of"


def topic_split(documents: int, first_topic: int, seed: int, shared: bool = True) -> tuple:
    """load_split's three arrays for `documents` documents of 10 sentences of 5 tokens. shared: each sentence
    is 3 words common to all documents and 2 of its document's own 4 topic words (ids from first_topic on),
    so consecutive sentences share topic words and sentences of different documents do not. Not shared:
    every token is a new id, used nowhere else."""
    rng = np.random.default_rng(seed)
    tokens = []
    for d in range(documents):
        topic = first_topic + 4 * d + np.arange(4)
        for _ in range(10):
            words = np.concatenate([rng.choice(np.arange(5, 5 + COMMON), 3), rng.choice(topic, 2)])
            tokens.append(rng.permutation(words))
    tokens = np.concatenate(tokens)
    if not shared:
        tokens = first_topic + np.arange(len(tokens))
    return tokens.astype(np.uint16), np.arange(0, len(tokens) + 1, 5), np.arange(0, 10 * documents + 1, 10)


def nsp_rule_accuracy(train: tuple, val: tuple, vocab_size: int, cfg=NSP_SETTINGS) -> tuple[float, Baselines]:
    """The rule's accuracy on 512 validation pairs, its threshold chosen on the training split's pairs."""
    baselines = Baselines(train, vocab_size, nsp_fitting_pairs(train, cfg, vocab_size))
    pairs = pair_batches(val, cfg, vocab_size, torch.device("cpu"), seed=1)
    batches = [pairs.next() for _ in range(16)]
    out = metrics(baselines.measure(batches), "val")
    assert "val_nsp_accuracy" not in out  # the rule's counts never pass for the model's
    return out["val_overlap_nsp_accuracy"], baselines


def test_nsp_rule_answers_by_shared_topic_words():
    train, val = topic_split(60, 5 + COMMON, seed=0), topic_split(30, 5 + COMMON + 4 * 60, seed=1)
    accuracy, baselines = nsp_rule_accuracy(train, val, 5 + COMMON + 4 * 90)
    # 512 pairs: chance is 50% with a standard error of 2.2%. Topic words never seen in training weigh most,
    # so the validation pairs are easier than the training pairs the threshold was chosen on.
    assert accuracy > 0.85 and baselines.nsp.fit_accuracy > 0.8  # measured: 92.6% and 87.1%
    assert 0 < baselines.nsp.threshold < np.inf


def test_nsp_rule_is_at_chance_when_nothing_is_shared():
    train = topic_split(60, 5, seed=0, shared=False)
    val = topic_split(30, 5 + len(train[0]), seed=1, shared=False)
    no_random = SimpleNamespace(**{**vars(NSP_SETTINGS), "RANDOM_TOKEN_SHARE": 0.0})  # no chance matches
    accuracy, baselines = nsp_rule_accuracy(train, val, 5 + len(train[0]) + len(val[0]), no_random)
    assert np.isinf(baselines.nsp.threshold)  # every score 0: one answer for every pair
    assert abs(accuracy - 0.5) < 0.07  # the share of that answer's label: 3 standard errors


def test_nsp_rule_draws_from_no_generator_training_uses():
    train = topic_split(20, 5 + COMMON, seed=0)
    states = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    Baselines(train, 5 + COMMON + 4 * 20, nsp_fitting_pairs(train, NSP_SETTINGS, 5 + COMMON + 4 * 20))
    assert torch.equal(torch.get_rng_state(), states[0])
    assert (np.random.get_state()[1] == states[1]).all() and random.getstate() == states[2]


# --- objectives.py: attention on the neighbours ----------------------------------------------------------

def padded_batch(lengths: list[int], T: int = 12) -> dict:
    """Rows of random ordinary tokens, [CLS] first, padded (id 0) after `lengths` real tokens."""
    real = torch.arange(T) < torch.tensor(lengths)[:, None]  # (B, T)
    ids = torch.randint(5, V, (len(lengths), T), generator=torch.Generator().manual_seed(0))
    ids[:, 0] = CLS_ID
    return dict(input_ids=ids.masked_fill(~real, 0), segment_ids=torch.zeros_like(ids),
                attention_mask=real.long())


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_neighbour_attention_reads_the_models_own_weights(positions, monkeypatch):
    torch.manual_seed(0)
    model = BERT(BertConfig(vocab_size=V, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.1,
                            positions=positions))
    batch = padded_batch([12, 7, 3])
    out = neighbour_attention(model, batch, rows=2)  # two passes: a row at a time must add up the same
    assert set(out) == {"attention_layer1_prev", "attention_layer1_next", "attention_layer2_prev",
                        "attention_layer2_next", "attention_uniform"}
    assert all(0 <= value <= 1 for value in out.values())
    assert model.training and all(block.attn.fast for block in model.blocks)  # left as it was found
    assert neighbour_attention(model, batch) == pytest.approx(out)
    # Uniform attention: each of the 11 + 6 + 2 query-neighbour pairs gets 1 / (its row's real tokens).
    assert out["attention_uniform"] == pytest.approx((11 / 12 + 6 / 7 + 2 / 3) / 19)
    with torch.no_grad():
        for block in model.blocks:  # every score q . k = 0: attention spread evenly over the real tokens
            block.attn.c_attn.weight.zero_()
            block.attn.c_attn.bias.zero_()
    flat = neighbour_attention(model, batch)
    assert all(flat[key] == pytest.approx(flat["attention_uniform"]) for key in flat)

    # Scores (all 0 now) that favour the key just before by 30, e^30 to 1: each query's weight there is 1 and
    # after it 0, but for [CLS], with no key before it, which spreads its attention evenly still.
    softmax = F.softmax

    def favour_previous(scores, dim):
        T = scores.size(-1)
        return softmax(scores + torch.diag(torch.full((T - 1,), 30.0), -1), dim=dim)

    monkeypatch.setattr(F, "softmax", favour_previous)
    forced = neighbour_attention(model, batch)
    cls_only = (1 / 12 + 1 / 7 + 1 / 3) / 19  # the next token's share: [CLS]'s even weight, in each row
    for layer in (1, 2):
        assert forced[f"attention_layer{layer}_prev"] == pytest.approx(1, abs=1e-6)
        assert forced[f"attention_layer{layer}_next"] == pytest.approx(cls_only, abs=1e-6)
