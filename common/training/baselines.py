"""What a language model must beat: the cross-entropy of models that read one token of context, or none.

A unigram model predicts every token from the training set's token frequencies, ignoring the context; a bigram
model reads the previous token only. Both are counted on the training tokens and scored on the same held-out
tokens as the transformer, in nats per token. Whatever the transformer gets below the bigram it learned from
more than one token of context.
"""

import numpy as np
from scipy import sparse


def unigram_cross_entropy(train: np.ndarray, val: np.ndarray, vocab_size: int) -> float:
    """Add-one smoothed token frequencies of `train`, scored on `val` (nats per token)."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1  # no zero probabilities
    return float(-np.log(counts / counts.sum())[val].mean())


def bigram_cross_entropy(train: np.ndarray, val: np.ndarray, vocab_size: int) -> float:
    """`bigram_log_probs`'s model scored on every (previous, next) pair of `val` (nats per token)."""
    val = np.asarray(val, dtype=np.int64)
    return float(-bigram_log_probs(train, val[:-1], val[1:], vocab_size).mean())


def bigram_log_probs(train: np.ndarray, previous: np.ndarray, following: np.ndarray,
                     vocab_size: int) -> np.ndarray:
    """log P(following | previous) for each pair, under a bigram model counted on `train` with Witten-Bell
    smoothing.

    Witten-Bell mixes the bigram's counts with the unigram: a token seen after many different tokens gets
    more of the unigram's share, λ(prev) = n(prev) / (n(prev) + types(prev)), where n counts how often prev
    was followed by anything and types by how many different tokens. The unigram is add-one smoothed, so
    every token has a probability. Counts live in a sparse matrix: vocab_size² cells would not fit.
    """
    train = np.asarray(train, dtype=np.int64)
    prev, nxt = np.asarray(previous, dtype=np.int64).ravel(), np.asarray(following, dtype=np.int64).ravel()
    unigram = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1
    unigram /= unigram.sum()
    ones = np.ones(len(train) - 1)
    pairs = sparse.csr_matrix((ones, (train[:-1], train[1:])), shape=(vocab_size, vocab_size))  # sums dupes
    followers = np.asarray(pairs.sum(axis=1)).ravel()  # n(prev)
    types = np.diff(pairs.indptr).astype(np.float64)  # distinct tokens seen after prev
    seen = np.asarray(pairs[prev, nxt]).ravel()  # c(prev, next)
    denominator = followers[prev] + types[prev]
    with np.errstate(invalid="ignore", divide="ignore"):  # a prev never seen in training: all unigram
        bigram = np.where(denominator > 0, seen / denominator, 0.0)
        weight = np.where(denominator > 0, types[prev] / denominator, 1.0)
    return np.log(bigram + weight * unigram[nxt])
