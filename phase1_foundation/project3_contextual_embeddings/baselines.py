"""The trivial predictors a masked LM has to beat, scored on the very targets the model is scored on.

    baselines = Baselines(load_split(folder, "train"), vocab_size, nsp_fit=nsp_fitting_pairs(...))
    counts = baselines.measure(validation_batches(...))  # metrics(counts, "val") -> val_bigram_mask_loss, ...

- unigram: each token's training-split frequency, whatever the input (what learning frequencies scores).
- copy: the visible token, else the most frequent: no context, yet right wherever a token was left as is.
- bigram: the token between two visible neighbours, P(x | left, right) ∝ P(x | left) · P(right | x); a model
  that beats it at [MASK] reads more than one word on each side.
- SharedRareTokens, for NSP: IsNext when A and B share enough rare tokens (how much of NSP topic answers).

README, "The loss at [MASK], beside its baselines", has the numbers.
"""

from collections import Counter
from types import SimpleNamespace

import numpy as np
import scipy.sparse
import torch

from phase1_foundation.project3_contextual_embeddings.objectives import count_by_kind, sums_by_kind
from phase1_foundation.project3_contextual_embeddings.pretraining_data import (
    MASK_ID,
    N_SPECIAL,
    chosen_targets,
    pair_batches,
)

CHUNK = 512  # targets scored at once by the bigram model: (CHUNK, V) arrays
NSP_FIT_PAIRS = 4096  # training pairs the NSP rule's threshold is chosen on (an accuracy's s.e. < 0.8%)
NSP_FIT_SEED_OFFSET = 2  # their pairs' seed is SEED + 2: training draws with SEED, validation with SEED + 1


def nsp_fitting_pairs(split: tuple, cfg: SimpleNamespace, vocab_size: int) -> list[dict]:
    """About NSP_FIT_PAIRS masked pairs of the training split, drawn as validation draws them (same builder,
    same settings, never short) but by a generator of their own, seeded SEED + 2: making them draws nothing
    from the training run's generators (torch's, numpy's, Python's or the training pairs'), so its numbers
    stay as they were."""
    batches = pair_batches(split, cfg, vocab_size, torch.device("cpu"), seed=cfg.SEED + NSP_FIT_SEED_OFFSET)
    return [batches.next() for _ in range(-(-NSP_FIT_PAIRS // cfg.BATCH_SIZE))]


class SharedRareTokens:
    """Next-sentence prediction without a model: IsNext when the rare tokens A and B share weigh enough.

    A pair's score is the sum, over the distinct ordinary tokens that occur both in A and in B, of each one's
    rarity, -log of its frequency in the training split (Baselines.unigram: add-one smoothed, so a token
    never seen in training weighs most). The rule reads the pair as the model sees it, masks and random
    replacements included; [CLS], [SEP], [MASK] and padding weigh nothing.

    The threshold is chosen on training pairs (nsp_fitting_pairs), never on the validation labels: of all the
    cuts between the sorted training scores, the one that classifies most training pairs right (the lowest
    such cut on a tie), placed halfway between the two scores it separates. Where no pair shares anything,
    every score is 0 and the rule answers the label commoner in its training pairs every time: chance.

    Where the NotNext B comes from (pretraining_data.PairBatches._draw_pairs): a random point of a random
    document OTHER than A's, uniform over the others, never A's own document. So a true continuation shares
    its article's topic with A and a random B usually does not, which is what this rule counts on.
    """

    def __init__(self, unigram: np.ndarray, fit: list[dict]):
        with np.errstate(divide="ignore"):
            self.rarity = np.where(unigram > 0, -np.log(unigram), 0.0)  # (V,): 0 for the special tokens
        scores = np.concatenate([self.scores(batch) for batch in fit])  # (N,)
        labels = np.concatenate([batch["nsp_labels"].cpu().numpy() for batch in fit])  # (N,) 1 = IsNext
        order = np.argsort(scores, kind="stable")
        ranked, is_next = scores[order], labels[order]
        # Cut i answers NotNext for the i lowest scores and IsNext for the rest: right about the NotNext pairs
        # below it and the IsNext pairs above it. Only cuts between two different scores can be drawn.
        below = np.concatenate([[0], np.cumsum(is_next)])  # (N + 1,) IsNext pairs among the i lowest
        right = np.arange(len(ranked) + 1) - below + (below[-1] - below)  # (N + 1,)
        drawable = np.concatenate([[True], ranked[1:] > ranked[:-1], [True]])  # (N + 1,)
        cut = int(np.flatnonzero(drawable)[right[drawable].argmax()])
        self.threshold = (-np.inf if cut == 0 else np.inf if cut == len(ranked)
                          else (ranked[cut - 1] + ranked[cut]) / 2)
        self.fit_accuracy = right[cut] / len(ranked)

    def scores(self, batch: dict) -> np.ndarray:
        """The summed rarity of the token types A and B share, (B,), from a batch's input_ids and
        segment_ids (segment 0: [CLS] A [SEP] and padding; 1: B [SEP])."""
        ids, segments = batch["input_ids"].cpu().numpy(), batch["segment_ids"].cpu().numpy()  # (B, T)
        ordinary = ids >= N_SPECIAL  # (B, T): no [PAD] [UNK] [CLS] [SEP] [MASK]
        present = []
        for side in (0, 1):  # A, then B: which token types occur in each row's segment, (B, V) bool
            rows, cols = np.nonzero(ordinary & (segments == side))
            seen = np.zeros((len(ids), len(self.rarity)), dtype=bool)
            seen[rows, ids[rows, cols]] = True
            present.append(seen)
        return np.where(present[0] & present[1], self.rarity, 0.0).sum(axis=1)  # (B,)

    def predict(self, batch: dict) -> np.ndarray:
        """1 (IsNext) where the pair's score is above the threshold, else 0, (B,)."""
        return (self.scores(batch) > self.threshold).astype(np.int64)


class Baselines:
    """Unigram and bigram counts of one split (load_split's arrays), and the three predictors made of them.

    Both models are smoothed so that no ordinary token gets probability 0, as a cross-entropy needs: the
    unigram by adding one to every count (Laplace), the bigram by Witten-Bell interpolation with the unigram
    (Witten & Bell 1991; Chen & Goodman 1998 §2.4), P(x | l) = (c(l, x) + T(l) P(x)) / (c(l) + T(l)), where
    T(l) is the number of different tokens seen after l: a word followed by many different words leaves
    more room for ones never seen after it. Pairs are counted within documents only.

    nsp_fit: training pairs (nsp_fitting_pairs) to choose the NSP rule's threshold on; None, no NSP rule
    (an MLM-only run, whose pairs are all IsNext).
    """

    def __init__(self, split: tuple, vocab_size: int, nsp_fit: list[dict] | None = None):
        tokens, sentences, documents = (np.asarray(a, dtype=np.int64) for a in split)
        counts = np.bincount(tokens, minlength=vocab_size).astype(np.float64)  # (V,)
        counts[:N_SPECIAL] = 0  # special tokens are never targets
        ordinary = np.arange(vocab_size) >= N_SPECIAL  # (V,)
        self.most_frequent = int(counts.argmax())
        self.unigram = np.where(ordinary, counts + 1, 0) / (counts.sum() + ordinary.sum())  # (V,) sums to 1

        first_of_document = np.zeros(len(tokens), dtype=bool)
        first_of_document[sentences[documents[:-1]]] = True
        follows = ~first_of_document[1:]  # (L - 1,): token i + 1 continues token i's document
        left, right = tokens[:-1][follows], tokens[1:][follows]
        self.pairs = scipy.sparse.csr_matrix((np.ones(len(left)), (left, right)), shape=(vocab_size,) * 2)
        self.pairs.sum_duplicates()  # (V, V): c(l, r), one stored entry per distinct pair
        self.pairs_by_right = self.pairs.T.tocsr()  # (V, V): c(l, r) at [r, l], to read a column as a row
        self.seen_after = np.diff(self.pairs.indptr).astype(np.float64)  # (V,) T(l): distinct followers
        self.total_after = np.asarray(self.pairs.sum(axis=1), dtype=np.float64).ravel()  # (V,) c(l)
        self.nsp = None if nsp_fit is None else SharedRareTokens(self.unigram, nsp_fit)

    def smoothed(self, pair_counts: np.ndarray, left: np.ndarray | slice, prior: np.ndarray) -> np.ndarray:
        """Witten-Bell P(x | left) from the counts c(left, x); where left was never followed by anything,
        the prior alone."""
        total, distinct = self.total_after[left], self.seen_after[left]
        return np.where(total > 0, (pair_counts + distinct * prior) / np.maximum(total + distinct, 1), prior)

    def bigram_log_probs(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """log P(x | left, right) for every token x, (n, V), given the neighbours (n,) as the model saw them.
        A neighbour that is not an ordinary token ([MASK], [CLS], [SEP]) tells nothing and is left out."""
        with np.errstate(divide="ignore"):
            log_prior = np.log(self.unigram)  # (V,): -inf for special tokens, which are never the answer
            after_left = self.smoothed(self.pairs[left].toarray(), left[:, None], self.unigram)  # (n, V)
            log_left = np.where((left >= N_SPECIAL)[:, None], np.log(after_left), log_prior)  # (n, V)
            before_right = self.smoothed(self.pairs_by_right[right].toarray(), slice(None),
                                         self.unigram[right][:, None])  # (n, V): P(right | x)
            log_right = np.where((right >= N_SPECIAL)[:, None], np.log(before_right), 0.0)  # (n, V)
        scores = log_left + log_right  # (n, V)
        top = scores.max(axis=1, keepdims=True)
        return scores - top - np.log(np.exp(scores - top).sum(axis=1, keepdims=True))

    @classmethod
    def for_run(cls, split: tuple, cfg: SimpleNamespace, vocab_size: int) -> "Baselines":
        """A training run's baselines: counted on its training split, with the NSP rule's threshold chosen on
        training pairs of a generator of its own when the run trains NSP (nsp_fitting_pairs)."""
        return cls(split, vocab_size, nsp_fitting_pairs(split, cfg, vocab_size) if cfg.USE_NSP else None)

    def measure(self, batches: list[dict]) -> Counter:
        """Summed losses and correct answers of the three predictors on the chosen positions of `batches`,
        by kind of position (objectives.sums_by_kind's names, prefixed unigram_, copy_ and bigram_); with an
        NSP rule, also its right answers and pairs (overlap_nsp_correct, overlap_nsp_count)."""
        counts = Counter()
        for batch in batches:
            chosen, targets, kind = (t.cpu() for t in chosen_targets(batch))  # (B, T); (N,); (N,)
            rows, cols = chosen.nonzero(as_tuple=True)  # (N,): never the first or last position of a row
            ids = batch["input_ids"].cpu()  # (B, T)
            seen, left, right = ids[rows, cols], ids[rows, cols - 1], ids[rows, cols + 1]  # (N,) each
            unigram_loss = -torch.from_numpy(np.log(self.unigram[targets.numpy()])).float()  # (N,)
            copy_guess = torch.where(seen == MASK_ID, self.most_frequent, seen)  # (N,)
            bigram_loss, bigram_guess = [], []
            for start in range(0, len(targets), CHUNK):
                part = slice(start, start + CHUNK)
                log_probs = self.bigram_log_probs(left[part].numpy(), right[part].numpy())  # (n, V)
                bigram_loss.append(-log_probs[np.arange(len(log_probs)), targets[part].numpy()])
                bigram_guess.append(log_probs.argmax(axis=1))
            sums = count_by_kind(kind)
            sums |= sums_by_kind("unigram_", kind, unigram_loss, targets == self.most_frequent)
            sums |= sums_by_kind("copy_", kind, None, copy_guess == targets)
            sums |= sums_by_kind("bigram_", kind, torch.from_numpy(np.concatenate(bigram_loss)).float(),
                                 torch.from_numpy(np.concatenate(bigram_guess)) == targets)
            counts.update({name: float(value) for name, value in sums.items()})  # += would drop zeros
            if self.nsp is not None:
                right = self.nsp.predict(batch) == batch["nsp_labels"].cpu().numpy()  # (B,)
                counts.update(overlap_nsp_correct=float(right.sum()), overlap_nsp_count=float(len(right)))
        return counts
