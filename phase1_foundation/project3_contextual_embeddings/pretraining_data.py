"""BERT's two pre-training tasks as batches: masked tokens to recover and sentence pairs to judge.

    batches = PairBatches(*load_split(folder, "train"), block_size=128, batch_size=32, device=device,
                          seed=1337, vocab_size=4096, mlm_prob=0.15, mask_share=0.8, random_share=0.1)
    batch = batches.next()  # input_ids, segment_ids, attention_mask, mlm_labels (B, T); nsp_labels (B,)

PAPER: BERT §3.1 and Appendix A.1; the details (how segments are packed, truncated and masked) follow
google-research/bert's create_pretraining_data.py. BERT wrote its pairs to disk once, with 10 different
maskings of each; we draw fresh pairs and fresh masks for every batch, the "dynamic masking" RoBERTa (§4.1)
found slightly better, and a resumed run sees the same batches because every draw comes from one saved
generator.
"""

from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor

from common.errors import CourseError
from phase1_foundation.project3_contextual_embeddings.download_data import (
    CLS_ID,
    MASK_ID,
    PAD_ID,
    SEP_ID,
    SPECIAL_TOKENS,
)

N_SPECIAL = len(SPECIAL_TOKENS)  # ids below this are special: never chosen, never drawn as a random token
IGNORE = -100  # F.cross_entropy's ignore_index: no MLM loss at this position


def mask_tokens(
    input_ids: Tensor,
    *,
    vocab_size: int,
    mlm_prob: float = 0.15,
    mask_share: float = 0.8,
    random_share: float = 0.1,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Choose tokens to predict and corrupt them: (masked_ids, labels), both (B, T) long.

    PAPER: BERT §3.1. In each sequence, max(1, round(n * mlm_prob)) of its n ordinary tokens are chosen,
    uniformly without replacement (create_pretraining_data.py picks an exact count, not a coin per token, so
    no sequence goes without a target). Of the chosen: mask_share become [MASK], random_share a random
    ordinary token, the rest stay as they are. The model cannot tell which unmasked tokens are targets, so it
    must keep a good representation of every token, and fine-tuning, which never shows [MASK], is less of a
    surprise. labels hold the original token at chosen positions (also those left unchanged) and IGNORE
    elsewhere. Special tokens, padding included, are never chosen, and the random replacement is never one
    (BERT's code drew it from the whole vocabulary, [CLS] and [SEP] included).
    """
    device = generator.device if generator is not None else input_ids.device  # draw where the generator lives
    ids = input_ids.to(device)
    ordinary = ids >= N_SPECIAL  # (B, T): not [PAD] [UNK] [CLS] [SEP] [MASK]
    n = ordinary.sum(dim=1)  # (B,)
    # (B,): mlm_prob of n, at least 1; float64 keeps an exact half (190 x 0.15) a half, to round to even
    count = torch.where(n > 0, (n.double() * mlm_prob).round().long().clamp(min=1), 0)
    key = torch.rand(ids.shape, generator=generator, device=device).masked_fill(~ordinary, 2.0)  # (B, T)
    rank = key.argsort(dim=1).argsort(dim=1)  # (B, T): 0 for the smallest key of the row, 1 for the next, ...
    chosen = rank < count[:, None]  # (B, T): exactly count[b] ordinary positions in row b
    action = torch.rand(ids.shape, generator=generator, device=device)  # (B, T)
    random_ids = torch.randint(N_SPECIAL, vocab_size, ids.shape, generator=generator, device=device)  # (B, T)
    masked = torch.where(chosen & (action < mask_share), MASK_ID, ids)  # 80%: [MASK]
    replace = chosen & (action >= mask_share) & (action < mask_share + random_share)  # 10%: a random token
    masked = torch.where(replace, random_ids, masked)  # the other 10% stay as they are
    labels = torch.where(chosen, ids, IGNORE)  # IGNORE = -100: no loss at the other positions
    return masked.to(input_ids.device), labels.to(input_ids.device)


KINDS = ("mask", "random", "unchanged")  # what the model sees at a chosen position, in mask_tokens' order


def chosen_targets(batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """The chosen positions of a batch: where they are (B, T) bool, their targets (N,), and what the model saw
    there (N,), as an index into KINDS: 0 [MASK], 1 a random token, 2 the token itself.

    A random replacement that happens to draw the original token counts as unchanged: what matters for the
    model is whether the answer is visible.
    """
    chosen = batch["mlm_labels"] != IGNORE  # (B, T)
    targets, seen = batch["mlm_labels"][chosen], batch["input_ids"][chosen]  # (N,), (N,)
    kind = torch.where(seen == MASK_ID, 0, torch.where(seen == targets, 2, 1))  # (N,)
    return chosen, targets, kind


def truncated_lengths(len_a: np.ndarray, len_b: np.ndarray, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """The lengths BERT's truncate_seq_pair leaves: it removes one token at a time from the longer segment
    (from B on a tie) until the pair fits in max_tokens. Worked out in closed form, for a batch at once.

    Cutting the longer side keeps short segments whole; once the two are level they shrink together, A ending
    up with ceil(max_tokens / 2) and B with floor(max_tokens / 2).
    """
    over = len_a + len_b > max_tokens
    keep_b = np.minimum(len_b, np.maximum(max_tokens - len_a, max_tokens // 2))
    return np.where(over, max_tokens - keep_b, len_a), np.where(over, keep_b, len_b)


def pair_layout(tokens: np.ndarray, a: np.ndarray, b: np.ndarray,
                block_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """[CLS] A [SEP] B [SEP] [PAD]... for the token ranges [start, end) of A and of B (B, 2), which fit in
    block_size: ids, segment ids and attention mask, (B, block_size) long each. PairBatches.next's layout
    step, a function of its own so that `uv run learn` can ask for it."""
    B, T = len(a), block_size
    len_a, len_b = a[:, 1:] - a[:, :1], b[:, 1:] - b[:, :1]  # (B, 1)
    # Each position's place in [CLS] A [SEP] B [SEP] [PAD]..., worked out for the whole batch at once.
    position = np.arange(T)[None, :]  # (1, T)
    in_a = (position >= 1) & (position <= len_a)  # (B, T)
    in_b = (position >= len_a + 2) & (position < len_a + len_b + 2)  # (B, T)
    real = position < len_a + len_b + 3  # (B, T): everything but padding
    source = np.where(in_a, a[:, :1] + position - 1, b[:, :1] + position - len_a - 2)  # (B, T)
    ids = np.where(in_a | in_b, tokens[np.where(in_a | in_b, source, 0)], PAD_ID)  # (B, T)
    ids[:, 0] = CLS_ID
    ids[np.arange(B), len_a[:, 0] + 1] = SEP_ID  # closes A
    ids[np.arange(B), len_a[:, 0] + len_b[:, 0] + 2] = SEP_ID  # closes B
    ids = torch.from_numpy(ids.astype(np.int64))
    # PAPER: BERT §3 Fig. 2, segment embedding E_B for B and its closing [SEP], E_A before them
    segments = torch.from_numpy((real & (position >= len_a + 2)).astype(np.int64))
    attention = torch.from_numpy(real.astype(np.int64))
    return ids, segments, attention


class PairBatches:
    """Batches of [CLS] A [SEP] B [SEP] pairs, masked, from one split's sentence files (see download_data.py).

    PAPER: BERT §3.1 Task #2 and create_instances_from_document. A is one or more consecutive sentences of
    a document; B is what really follows them (IsNext, label 1) half of the time, and otherwise
    consecutive sentences from a random point of a random DIFFERENT document (NotNext, label 0): a random
    sentence of the same document could be the true continuation (mislabelled as NotNext), or near enough
    to read as one. A and B together are first made about block_size - 3 tokens long (so little of a batch
    is padding), then trimmed to fit as truncate_seq_pair does: the longer side loses a token at a time,
    front or back at random.

    Every pair is drawn the same way up to the label, so A alone says nothing about the answer: a chunk of
    consecutive sentences of one document, filled to the target length and at least two sentences long, is
    cut at a random sentence boundary into A and its true continuation. BERT makes a one-sentence chunk
    NotNext by force; our chunks always have two, so IsNext stays at exactly half.

    use_nsp=False (RoBERTa, §4.2): B is always the real continuation, so the pair is just contiguous text; the
    label stays 1 and the model's NSP loss should be left out.

    short_seq_prob (PAPER: create_pretraining_data.py, 0.1 in BERT): that share of pairs aims at a target
    length drawn uniformly from 2 .. block_size - 3 instead of the full one, so short inputs are not new to
    the model; they are still pairs, of whole sentences, the rest of the block padding.

    All randomness comes from one private CPU generator: the same seed gives the same batches on any device,
    and state_dict() lets a resumed run continue them exactly.
    """

    def __init__(
        self,
        tokens: np.ndarray,
        sentences: np.ndarray,
        documents: np.ndarray,
        block_size: int,
        batch_size: int,
        device: torch.device,
        seed: int,
        *,
        use_nsp: bool = True,
        short_seq_prob: float = 0.0,
        vocab_size: int,
        mlm_prob: float,
        mask_share: float,
        random_share: float,
    ):
        if block_size < 5:
            raise CourseError(f"error: --BLOCK_SIZE={block_size} cannot hold [CLS] A [SEP] B [SEP]; use 5+")
        if not (0 < mlm_prob <= 1 and min(mask_share, random_share) >= 0 and mask_share + random_share <= 1):
            raise CourseError(f"error: need 0 < MLM_PROB <= 1 and MASK_TOKEN_SHARE + "
                              f"RANDOM_TOKEN_SHARE <= 1, "
                              f"got {mlm_prob} and {mask_share} + {random_share}")
        if not 0 <= short_seq_prob <= 1:
            raise CourseError(f"error: need 0 <= SHORT_SEQ_PROB <= 1, got {short_seq_prob}")
        self.n_documents = len(documents) - 1
        self.doc_of = np.repeat(np.arange(self.n_documents), np.diff(documents))  # (S,) document of each
        self.doc_end = documents[1:][self.doc_of]  # (S,) the sentence after the end of each one's document
        self.starts = np.flatnonzero(np.arange(len(self.doc_of)) + 1 < self.doc_end)  # (N,) with a successor
        if use_nsp and self.n_documents < 2 or not len(self.starts):
            raise CourseError(
                f"error: {self.n_documents} document(s), {len(self.starts)} sentence(s) followed by another; "
                "pairs need 2 documents and a document of 2 sentences: use a bigger corpus or --VAL_FRACTION"
            )
        self.tokens, self.sentences, self.documents = tokens, sentences, documents
        self.block_size, self.batch_size, self.use_nsp = block_size, batch_size, use_nsp
        self.short_seq_prob = short_seq_prob
        self.masking = dict(vocab_size=vocab_size, mlm_prob=mlm_prob, mask_share=mask_share,
                            random_share=random_share)
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)

    def _draw_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Token ranges [start, end) of A and of B, (B, 2) each, and the labels (B,): 1 IsNext, 0 NotNext."""
        g, B, off = self.generator, self.batch_size, self.sentences
        target = self.block_size - 3  # PAPER: create_pretraining_data.py's max_num_tokens: [CLS], 2x [SEP]
        # The same draws for every batch, whatever the labels: the generator's state depends only on the step.
        start = self.starts[torch.randint(len(self.starts), (B,), generator=g).numpy()]  # (B,) A's first
        cut_at = torch.rand(B, generator=g).numpy()  # (B,) where in its chunk A ends
        is_next = (torch.rand(B, generator=g) < 0.5).numpy() | (not self.use_nsp)  # (B,)
        other = torch.randint(max(self.n_documents - 1, 1), (B,), generator=g).numpy()  # (B,) NotNext's ...
        other_at = torch.rand(B, generator=g).numpy()  # (B,) ... and where in it B starts
        if self.short_seq_prob:  # drawn only when asked for: with 0, the pairs are those of a run without it
            short = (torch.rand(B, generator=g) < self.short_seq_prob).numpy()  # (B,)
            length = torch.randint(2, target + 1, (B,), generator=g).numpy()  # (B,) uniform 2 .. target
            target = np.where(short, length, target)  # (B,)

        # The chunk: sentences from `start` on until the target length is reached; at least 2, one document.
        chunk_end = np.searchsorted(off, off[start] + target).clip(start + 2, self.doc_end[start])  # (B,)
        a_end = start + 1 + (cut_at * (chunk_end - start - 1)).astype(np.int64)  # (B,) start+1 .. chunk_end-1
        a = np.stack([off[start], off[a_end]], axis=1)  # (B, 2)
        real_b = np.stack([off[a_end], off[chunk_end]], axis=1)  # (B, 2)

        # NotNext: a document other than A's, from a random sentence of it on, filled up to what A left of
        # the target (at least one sentence).
        other = (self.doc_of[start] + 1 + other) % self.n_documents  # (B,) uniform over the other documents
        first, last = self.documents[other], self.documents[other + 1]  # (B,) its sentences
        b_start = first + (other_at * (last - first)).astype(np.int64)  # (B,)
        b_end = np.searchsorted(off, off[b_start] + target - (a[:, 1] - a[:, 0])).clip(b_start + 1, last)
        random_b = np.stack([off[b_start], off[b_end]], axis=1)  # (B, 2)
        return a, np.where(is_next[:, None], real_b, random_b), is_next.astype(np.int64)

    def _truncate(self, a: np.ndarray, b: np.ndarray) -> None:
        """Trim the ranges in place to fit block_size - 3, each token from the front or back at random."""
        len_a, len_b = a[:, 1] - a[:, 0], b[:, 1] - b[:, 0]  # (B,)
        keep_a, keep_b = truncated_lengths(len_a, len_b, self.block_size - 3)  # (B,)
        cut = torch.from_numpy(np.stack([len_a - keep_a, len_b - keep_b], axis=1)).double()  # (B, 2)
        # Each trimmed token is a fair coin, front or back: how many come off the front is binomial.
        front = torch.binomial(cut, torch.full_like(cut, 0.5), generator=self.generator)  # (B, 2)
        front = front.long().numpy()
        for ranges, keep, from_front in ((a, keep_a, front[:, 0]), (b, keep_b, front[:, 1])):
            ranges[:, 0] += from_front
            ranges[:, 1] = ranges[:, 0] + keep

    def next(self) -> dict[str, Tensor]:
        """input_ids (masked), segment_ids, attention_mask, mlm_labels: (B, T) long; nsp_labels: (B,) long."""
        a, b, nsp = self._draw_pairs()
        self._truncate(a, b)
        ids, segments, attention = pair_layout(self.tokens, a, b, self.block_size)  # (B, T) each
        input_ids, mlm_labels = mask_tokens(ids, generator=self.generator, **self.masking)
        batch = dict(input_ids=input_ids, segment_ids=segments, attention_mask=attention,
                     mlm_labels=mlm_labels, nsp_labels=torch.from_numpy(nsp))
        if self.device.type == "cuda":
            # Page-locked memory lets the copies run asynchronously while the GPU is still busy.
            return {k: v.pin_memory().to(self.device, non_blocking=True) for k, v in batch.items()}
        return {k: v.to(self.device) for k, v in batch.items()}

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}  # a uint8 tensor: loads with weights_only=True

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"].cpu())  # cpu(): in case it was loaded with map_location


def pair_batches(split: tuple, cfg: SimpleNamespace, vocab_size: int, device: torch.device, seed: int,
                 training: bool = False) -> PairBatches:
    """Masked sentence pairs from one split (load_split's three arrays), shaped by the chapter's settings; the
    same seed gives the same pairs and the same masks. Only training pairs are ever short (SHORT_SEQ_PROB):
    validation scores every run on the same full-length pairs."""
    return PairBatches(
        *split, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed, use_nsp=cfg.USE_NSP, vocab_size=vocab_size,
        short_seq_prob=cfg.SHORT_SEQ_PROB if training else 0.0, mlm_prob=cfg.MLM_PROB,
        mask_share=cfg.MASK_TOKEN_SHARE, random_share=cfg.RANDOM_TOKEN_SHARE,
    )
