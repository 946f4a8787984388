"""The counted models every language model is set beside: each a probability distribution, scored on the
pairs it is given."""

import numpy as np
import pytest

from common.training.baselines import bigram_cross_entropy, bigram_log_probs, unigram_cross_entropy

TRAIN = np.array([0, 1, 2, 0, 1, 2, 0, 1, 3, 0, 1, 2])
V = 5  # token 4 never appears


def test_the_bigram_model_is_a_distribution_after_every_previous_token():
    for previous in range(V):  # 4 was never seen: all of its probability is the unigram's
        total = np.exp(bigram_log_probs(TRAIN, np.full(V, previous), np.arange(V), V)).sum()
        assert total == pytest.approx(1.0)


def test_a_seen_pair_is_likelier_than_an_unseen_one_and_the_mixture_follows_witten_bell():
    log_probs = bigram_log_probs(TRAIN, np.array([0, 0]), np.array([1, 2]), V)
    assert log_probs[0] > log_probs[1]  # 0 was always followed by 1
    # after 0: 4 followers, 1 type, so lambda = 1/5 of the add-one unigram (counts + 1 over 12 + 5)
    unigram_1 = (4 + 1) / (12 + 5)
    assert np.exp(log_probs[0]) == pytest.approx(4 / 5 + 1 / 5 * unigram_1)


def test_the_cross_entropy_is_the_mean_over_every_neighbouring_pair():
    val = np.array([0, 1, 3, 0, 4])
    expected = -bigram_log_probs(TRAIN, val[:-1], val[1:], V).mean()
    assert bigram_cross_entropy(TRAIN, val, V) == pytest.approx(expected)
    assert bigram_cross_entropy(TRAIN, val, V) < unigram_cross_entropy(TRAIN, val[1:], V)
