"""Build it yourself: chapter 3's functions for you to write, and how `uv run learn check` tests them.

The model's functions are compared with the course's on the same random weights and inputs (several shapes,
T = 1 included). The data functions draw random numbers, and a correct version may draw them differently
from the course's, so those checks test what must always hold (specials never masked, B really following A)
and the frequencies, over thousands of draws, within a margin a correct version passes but for about once in
a million. `uv run learn list` shows the tasks.
"""

import copy

import numpy as np
import torch
import torch.nn.functional as F

from common.course.learn.check import Mistake, Task
from phase1_foundation.project3_contextual_embeddings.model import BERT, BertConfig

CHAPTER = "phase1_foundation/project3_contextual_embeddings"
TESTS = CHAPTER + "/tests/"
MODEL = CHAPTER + "/model.py"
DATA = CHAPTER + "/pretraining_data.py"
FINETUNE = CHAPTER + "/finetune.py"
SMALL = dict(vocab_size=50, block_size=16, n_layer=1, n_head=4, n_embd=32, dropout=0.0)


def _margin(p: float, n: int) -> float:
    """How far an observed frequency may stray from p over n draws: 5 standard errors and a little more."""
    return 5 * (p * (1 - p) / max(n, 1)) ** 0.5 + 0.002


# ---- the model -----------------------------------------------------------------------------------------


def _padding_mask(lengths: list[int], T: int) -> torch.Tensor:
    """(B, 1, 1, T) bool, True at the real keys: BERT.hidden_states' mask for sequences of these lengths."""
    return (torch.arange(T) < torch.tensor(lengths)[:, None])[:, None, None, :]


def check_attention(course, yours, case):
    cos, sin = course.rotary_angles(16, 8)  # head size 32 / 4 = 8
    settings = [  # (what, T, lengths of the real tokens or None for no mask, rotary)
        ("no padding, T = 1", 1, None, False),
        ("no padding, T = 9", 9, None, False),
        ("padded batch, T = 7", 7, [7, 4, 1], False),
        ("padded batch, rotary positions, T = 11", 11, [11, 6, 2], True),
        ("rotary positions, no padding, T = 1", 1, None, True),
    ]
    for fast in (False, True):
        path = "fast (scaled_dot_product_attention)" if fast else "explicit"
        for what, T, lengths, rotary in settings:
            B = len(lengths) if lengths else 2
            given = (f"x = torch.randn({B}, {T}, 32), 4 heads, " + (f"real lengths {lengths}" if lengths else
                     "mask None") + (", rotary (cos, sin) of rotary_angles" if rotary else ", rotary None"))
            with case(f"{path} path, {what}", given=given) as c:
                config = dict(SMALL, fast_attention=fast)
                ref = course.BidirectionalSelfAttention(course.BertConfig(**config)).eval()
                mine = yours.BidirectionalSelfAttention(yours.BertConfig(**config)).eval()
                mine.load_state_dict(ref.state_dict())
                x = torch.randn(B, T, 32)
                mask = _padding_mask(lengths, T) if lengths else None
                angles = (cos[:T], sin[:T]) if rotary else None
                c.close(mine(x, mask, angles), ref(x, mask, angles))
    for fast in (False, True):
        with case(f"{'fast' if fast else 'explicit'} path in eval mode with dropout = 0.5: no dropout at all",
                  given="x = torch.randn(2, 5, 32), real lengths [5, 3], model.eval()") as c:
            config = dict(SMALL, fast_attention=fast, dropout=0.5)
            ref = course.BidirectionalSelfAttention(course.BertConfig(**config)).eval()
            mine = yours.BidirectionalSelfAttention(yours.BertConfig(**config)).eval()
            mine.load_state_dict(ref.state_dict())
            x, mask = torch.randn(2, 5, 32), _padding_mask([5, 3], 5)
            c.close(mine(x, mask), ref(x, mask))
    with case("gradients flow back to the input", given="x = torch.randn(2, 6, 32), real lengths [6, 3], "
              "explicit path") as c:
        ref = course.BidirectionalSelfAttention(course.BertConfig(**SMALL, fast_attention=False)).eval()
        mine = yours.BidirectionalSelfAttention(yours.BertConfig(**SMALL, fast_attention=False)).eval()
        mine.load_state_dict(ref.state_dict())
        x1 = torch.randn(2, 6, 32, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        mask = _padding_mask([6, 3], 6)
        (ref(x1, mask) ** 2).sum().backward()
        (mine(x2, mask) ** 2).sum().backward()
        c.close(x2.grad, x1.grad, "the input's gradient")


def check_rotary(course, yours, case):
    for T, hs, atol in ((1, 2, 1e-6), (16, 8, 1e-5), (64, 64, 1e-5), (512, 64, 5e-5)):
        with case(f"rotary_angles({T}, {hs})", given=f"block_size = {T}, head_size = {hs}") as c:
            mine, ref = yours.rotary_angles(T, hs), course.rotary_angles(T, hs)
            c.true(isinstance(mine, tuple) and len(mine) == 2, "return the pair (cos, sin)")
            c.close(mine[0], ref[0], "cos", atol=atol)
            c.close(mine[1], ref[1], "sin", atol=atol)
    for shape in ((2, 3, 1, 8), (2, 3, 7, 8), (1, 2, 16, 2), (2, 1, 12, 64)):
        T, hs = shape[2], shape[3]
        with case(f"rotate x of shape {shape}", given=f"x = torch.randn{shape}, cos and sin of the course's "
                  f"rotary_angles({T}, {hs})") as c:
            cos, sin = course.rotary_angles(T, hs)
            x = torch.randn(shape)
            c.close(yours.rotate(x, cos, sin), course.rotate(x, cos, sin))
    with case("rotate keeps x's dtype (bf16 under autocast)",
              given="x = torch.randn(1, 2, 5, 8) in bfloat16") as c:
        cos, sin = course.rotary_angles(5, 8)
        x = torch.randn(1, 2, 5, 8).bfloat16()
        mine = yours.rotate(x, cos, sin)
        c.true(isinstance(mine, torch.Tensor) and mine.dtype == torch.bfloat16,
               f"the output's dtype is {getattr(mine, 'dtype', type(mine).__name__)}; x's is torch.bfloat16")
        c.close(mine, course.rotate(x, cos, sin), atol=0.05, rtol=0.02)
    with case("scores depend on the offset n - m alone, and position 0 is not turned",
              given="your rotary_angles(40, 16) and rotate; q, k = torch.randn(16) at every position") as c:
        cos, sin = yours.rotary_angles(40, 16)
        q, k = torch.randn(16), torch.randn(16)
        qs = yours.rotate(q.expand(1, 1, 40, 16).clone(), cos, sin)[0, 0]  # (40, 16): q at each position
        ks = yours.rotate(k.expand(1, 1, 40, 16).clone(), cos, sin)[0, 0]
        c.close(qs[0], q, "q turned at position 0 (no turn at all)")
        c.close(qs.norm(dim=-1), q.norm().expand(40), "the length of q at each position (a turn keeps it)",
                atol=1e-4)
        scores = qs @ ks.T  # (40, 40): q at m against k at n
        for m, n in ((0, 3), (20, 23), (36, 39), (30, 27)):
            c.close(scores[m, n], scores[0, n - m] if n >= m else scores[m - n, 0],
                    f"the score of q at {m} and k at {n} (equal to the score at the same offset from 0)",
                    atol=1e-4)


# ---- the data ------------------------------------------------------------------------------------------


def _pairs(generator, rows: int, T: int, vocab_size: int, specials) -> torch.Tensor:
    """[CLS] a [SEP] b [SEP] [PAD]... rows: n = 0 .. T-3 ordinary tokens each, random in [5, vocab_size)."""
    CLS, SEP, PAD = specials
    n = torch.randint(0, T - 2, (rows, 1), generator=generator)  # words in the row
    a = (torch.rand(rows, 1, generator=generator) * (n + 1)).long()  # of which in sentence A
    ids = torch.randint(5, vocab_size, (rows, T), generator=generator)
    position = torch.arange(T)
    ids[(position == a + 1) | (position == n + 2)] = SEP
    ids[position > n + 2] = PAD
    ids[:, 0] = CLS
    return ids


def _check_masking(c, ids, masked, labels, module, vocab_size, mlm_prob):
    """What must hold for any masking of `ids`, whatever the random draws."""
    ignore, n_special = module.IGNORE, module.N_SPECIAL
    c.true(isinstance(masked, torch.Tensor) and isinstance(labels, torch.Tensor),
           "return two tensors, (masked_ids, labels)")
    c.true(masked.shape == ids.shape and labels.shape == ids.shape,
           f"masked_ids and labels have shapes {tuple(masked.shape)} and {tuple(labels.shape)}; "
           f"input_ids has {tuple(ids.shape)}")
    c.true(masked.dtype == labels.dtype == torch.long, f"dtypes {masked.dtype} and {labels.dtype}; use long")
    chosen, ordinary = labels != ignore, ids >= n_special
    if (chosen & ~ordinary).any():
        row, t = (chosen & ~ordinary).nonzero()[0].tolist()
        c.fail(f"row {row}, position {t} holds the special token {ids[row, t].item()} (an id below "
               "N_SPECIAL: [CLS], [SEP], padding) and was chosen; only ordinary tokens may be")
    c.equal(labels[chosen], ids[chosen], "the labels at the chosen positions (the original tokens)")
    if (masked != ids)[~chosen].any():
        row, t = ((masked != ids) & ~chosen).nonzero()[0].tolist()
        c.fail(f"row {row}, position {t} was not chosen (its label is IGNORE) yet changed from "
               f"{ids[row, t].item()} to {masked[row, t].item()}; only chosen tokens are corrupted")
    n = ordinary.sum(1).double()  # (B,)
    # round() as Python's and torch's: an exact half to the even neighbour (4.5 -> 4), as the chapter's test
    expected = torch.where(n > 0, (n * mlm_prob).round().clamp(min=1), 0)
    count = chosen.sum(1).double()
    bad = count != expected
    if bad.any():
        row = bad.nonzero()[0].item()
        c.fail(f"row {row} has {int(n[row])} ordinary tokens and {int(count[row])} chosen; choose exactly "
               f"max(1, round({int(n[row])} * {mlm_prob})) = {int(expected[row])} (round() takes an exact "
               "half to the even neighbour)")
    replaced = chosen & (masked != module.MASK_ID) & (masked != ids)
    if replaced.any() and (masked[replaced].min() < n_special or masked[replaced].max() >= vocab_size):
        bad_id = masked[replaced][(masked[replaced] < n_special) | (masked[replaced] >= vocab_size)][0].item()
        c.fail(f"a chosen token was replaced by {bad_id}; a random token is an ordinary one, in "
               f"[N_SPECIAL, vocab_size) = [{n_special}, {vocab_size})")
    return chosen, replaced


def _check_shares(c, ids, masked, chosen, replaced, module, vocab_size, mask_share, random_share):
    """The frequencies of [MASK], random and unchanged among the chosen positions."""
    N = int(chosen.sum())
    same = 1 / (vocab_size - module.N_SPECIAL)  # a random token that happens to be the original one
    expected = {"[MASK]": mask_share, "a different random token": random_share * (1 - same),
                "the token unchanged": 1 - mask_share - random_share * (1 - same)}
    seen = {"[MASK]": (chosen & (masked == module.MASK_ID)).sum().item() / N,
            "a different random token": replaced.sum().item() / N,
            "the token unchanged": (chosen & (masked == ids)).sum().item() / N}
    for what, p in expected.items():
        if abs(seen[what] - p) > _margin(p, N):
            c.fail(f"{seen[what]:.3f} of the {N:,} chosen positions became {what}; expected {p:.3f} "
                   f"(mask_share = {mask_share}, random_share = {random_share})")


def check_mask_tokens(course, yours, case):
    specials = (course.CLS_ID, course.SEP_ID, course.PAD_ID)
    for rows, T, V, p, mask_share, random_share in ((3000, 40, 1000, 0.15, 0.8, 0.1),
                                                    (1500, 24, 30, 0.4, 0.5, 0.3)):
        with case(f"{rows:,} padded pairs: what is chosen, and how often each of [MASK], random, unchanged",
                  given=f"rows of [CLS] a [SEP] b [SEP] [PAD]... of {T} tokens, vocab_size = {V}, mlm_prob = "
                  f"{p}, mask_share = {mask_share}, random_share = {random_share}") as c:
            g = torch.Generator().manual_seed(1)
            ids = _pairs(g, rows, T, V, specials)
            masked, labels = yours.mask_tokens(ids.clone(), vocab_size=V, mlm_prob=p, mask_share=mask_share,
                                               random_share=random_share, generator=g)
            chosen, replaced = _check_masking(c, ids, masked, labels, course, V, p)
            _check_shares(c, ids, masked, chosen, replaced, course, V, mask_share, random_share)
            if V < 100:  # every ordinary id equally likely as the random token
                drawn = torch.bincount(masked[replaced], minlength=V)[course.N_SPECIAL:].double()
                share, expected = drawn / drawn.sum(), 1 / (V - course.N_SPECIAL)
                off = (share - expected).abs() > _margin(expected, int(drawn.sum()))
                if off.any():
                    t = off.nonzero()[0].item()
                    c.fail(f"the random token was {t + course.N_SPECIAL} {share[t]:.3f} of the time; each "
                           f"of the {V - course.N_SPECIAL} ordinary ids should be {expected:.3f}")
    with case("rows whose 15% is an exact half: round() to the even neighbour",
              given="rows of 30, 70 and 110 ordinary tokens, mlm_prob = 0.15: 4.5, 10.5, 16.5 -> 4, 10, "
              "16") as c:
        rows = [[course.CLS_ID, *(10 + (torch.arange(k) % 30)).tolist(), course.SEP_ID]
                + [course.PAD_ID] * (110 - k) for k in (30, 70, 110)]
        ids = torch.tensor(rows)
        masked, labels = yours.mask_tokens(ids.clone(), vocab_size=40,
                                           generator=torch.Generator().manual_seed(3))
        _check_masking(c, ids, masked, labels, course, 40, 0.15)
    with case("every ordinary position is equally likely to be chosen",
              given="4,000 rows of [CLS] 10 words [SEP] 10 words [SEP] [PAD] [PAD], mlm_prob = 0.15: "
              "3 of the 20 words chosen in each row") as c:
        row = [course.CLS_ID, *range(10, 20), course.SEP_ID, *range(20, 30), course.SEP_ID, course.PAD_ID,
               course.PAD_ID]
        ids = torch.tensor(row).repeat(4000, 1)
        masked, labels = yours.mask_tokens(ids.clone(), vocab_size=40,
                                           generator=torch.Generator().manual_seed(2))
        chosen, _ = _check_masking(c, ids, masked, labels, course, 40, 0.15)
        rate = chosen.double().mean(0)  # (T,)
        words = ids[0] >= course.N_SPECIAL
        off = words & ((rate - 0.15).abs() > _margin(0.15, 4000))
        if off.any():
            t = off.nonzero()[0].item()
            c.fail(f"position {t} was chosen in {rate[t]:.3f} of the rows; every word should be, "
                   "3 / 20 = 0.150 (choose uniformly among a row's ordinary tokens)")
    with case("rows without a word, and a word alone",
              given="[[CLS] [SEP] [SEP] [PAD]], [[CLS] 7 [SEP] [PAD]], then a (2, 1) batch of [CLS] and "
              "[PAD] (T = 1)") as c:
        g = torch.Generator().manual_seed(3)
        small = torch.tensor([[course.CLS_ID, course.SEP_ID, course.SEP_ID, course.PAD_ID],
                              [course.CLS_ID, 7, course.SEP_ID, course.PAD_ID]])
        for ids in (small, torch.tensor([[course.CLS_ID], [course.PAD_ID]])):
            masked, labels = yours.mask_tokens(ids.clone(), vocab_size=20, generator=g)
            _check_masking(c, ids, masked, labels, course, 20, 0.15)
    with case("the draws come from `generator` alone", given="a generator seeded 3, twice, with the global "
              "torch seed changed in between; then one seeded 4") as c:
        ids = _pairs(torch.Generator().manual_seed(0), 16, 32, 1000, specials)
        out = []
        for seed, global_seed in ((3, 1), (3, 2), (4, 1)):
            torch.manual_seed(global_seed)
            generator = torch.Generator().manual_seed(seed)
            out.append(yours.mask_tokens(ids.clone(), vocab_size=1000, generator=generator))
        c.equal(out[1][0], out[0][0], "masked_ids from the same generator seed")
        c.equal(out[1][1], out[0][1], "labels from the same generator seed")
        c.true(not torch.equal(out[2][1], out[0][1]), "generators seeded 3 and 4 chose the same positions; "
               "draw with generator=generator")


def _ranges(rng: np.random.Generator, rows: int, block_size: int, n_tokens: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Token ranges [start, end) of A and of B, (rows, 2) each, a token or more each, that fit block_size."""
    room = block_size - 3
    len_a = rng.integers(1, room, rows)  # 1 .. room - 1
    len_b = rng.integers(1, room - len_a + 1)  # 1 .. room - len_a
    start_a, start_b = rng.integers(0, n_tokens - room, rows), rng.integers(0, n_tokens - room, rows)
    return np.stack([start_a, start_a + len_a], 1), np.stack([start_b, start_b + len_b], 1)


def check_pair_layout(course, yours, case):
    tokens = (np.arange(500) + 5).astype(np.uint16)  # as in the prepared files; token p is 5 + p
    rng = np.random.default_rng(0)
    sets = {
        "16 pairs of random lengths, block_size 24": (*_ranges(rng, 16, 24, 500), 24),
        "a pair that fills block_size exactly (no padding)": (np.array([[10, 20]]), np.array([[300, 307]]),
                                                              20),
        "the shortest pair: one token each, block_size 5": (np.array([[0, 1], [7, 8]]),
                                                           np.array([[3, 4], [499, 500]]), 5),
        "a one-token A, a long B, lots of padding": (np.array([[42, 43]]), np.array([[100, 130]]), 64),
    }
    for name, (a, b, block_size) in sets.items():
        with case(name, given=f"a = {a.tolist()[:3]}, b = {b.tolist()[:3]}{' ...' if len(a) > 3 else ''}, "
                  f"block_size = {block_size}; tokens[p] = 5 + p") as c:
            mine = yours.pair_layout(tokens, a.copy(), b.copy(), block_size)
            ref = course.pair_layout(tokens, a.copy(), b.copy(), block_size)
            c.true(isinstance(mine, tuple) and len(mine) == 3, "return (ids, segment_ids, attention_mask)")
            for what, x, y in zip(("ids", "segment ids", "attention mask"), mine, ref, strict=True):
                c.true(isinstance(x, torch.Tensor) and x.dtype == torch.long,
                       f"the {what} are {getattr(x, 'dtype', type(x).__name__)}; return long tensors")
                c.equal(x, y, f"the {what} (B, block_size)")


def _synthetic_split(n_documents: int = 60, seed: int = 0):
    """Documents of 1..8 sentences of 2..20 tokens (token p is 5 + p): the tests' corpus."""
    rng = np.random.default_rng(seed)
    documents = np.concatenate([[0], np.cumsum(rng.integers(1, 9, n_documents))])
    sentences = np.concatenate([[0], np.cumsum(rng.integers(2, 21, documents[-1]))])
    return (np.arange(sentences[-1]) + 5).astype(np.uint16), sentences, documents


def _batches(module, split, block_size, batch_size, seed=0, use_nsp=True):
    return module.PairBatches(*split, block_size=block_size, batch_size=batch_size,
                              device=torch.device("cpu"), seed=seed, use_nsp=use_nsp, vocab_size=1000,
                              mlm_prob=0.15, mask_share=0.8, random_share=0.1)


def _check_pairs(c, split, out, block_size, use_nsp):
    """What every pair must be, and the frequencies: half IsNext, A's start and cut uniform."""
    _, off, documents = split
    c.true(isinstance(out, tuple) and len(out) == 3, "return (a, b, labels)")
    a, b, labels = (np.asarray(x) for x in out)
    B = len(labels)
    c.true(a.shape == (B, 2) and b.shape == (B, 2), f"a and b have shapes {a.shape} and {b.shape}; expected "
           f"({B}, 2) each: [start, end) token ranges")
    c.true(set(np.unique(labels).tolist()) <= {0, 1}, "labels are 1 (IsNext) or 0 (NotNext)")
    target = block_size - 3
    doc_of = np.repeat(np.arange(len(documents) - 1), np.diff(documents))  # (S,)
    ends = {"A's start": a[:, 0], "A's end": a[:, 1], "B's start": b[:, 0], "B's end": b[:, 1]}
    index = {what: np.searchsorted(off, x) for what, x in ends.items()}  # the sentence each one begins
    for what, x in ends.items():
        bad = (x < 0) | (x > off[-1]) | (off[index[what].clip(max=len(off) - 1)] != x)
        if bad.any():
            i = bad.nonzero()[0][0]
            c.fail(f"pair {i}: {what} is token {x[i]}, not the start of a sentence; A and B are whole "
                   "sentences")
    sa, ea, sb, eb = index.values()
    for what, s, e in (("A", sa, ea), ("B", sb, eb)):
        bad = (e <= s) | (doc_of[s.clip(max=len(doc_of) - 1)] != doc_of[(e - 1).clip(0, len(doc_of) - 1)])
        if bad.any():
            i = bad.nonzero()[0][0]
            c.fail(f"pair {i} (label {labels[i]}): {what} is sentences {s[i]} .. {e[i] - 1}: "
                   + ("empty" if e[i] <= s[i] else "across two documents")
                   + "; it should be one or more sentences of one document")
    doc_a, doc_b = doc_of[sa], doc_of[sb]
    doc_end = documents[doc_a + 1]  # (B,) the sentence after A's document
    chunk_end = np.searchsorted(off, off[sa] + target).clip(sa + 2, doc_end)  # (B,)
    bad = ea >= chunk_end
    if bad.any():
        i = bad.nonzero()[0][0]
        c.fail(f"pair {i}: A is sentences {sa[i]} .. {ea[i] - 1}, its whole chunk (up to sentence "
               f"{chunk_end[i]}, the first boundary {target} tokens on); A ends at a boundary before the "
               "chunk's end")
    is_next = labels == 1
    bad = is_next & ((sb != ea) | (eb != chunk_end))
    if bad.any():
        i = bad.nonzero()[0][0]
        c.fail(f"pair {i} is labelled 1 (IsNext), but B is sentences {sb[i]} .. {eb[i] - 1} after A's "
               f"{sa[i]} .. {ea[i] - 1}; B should be what follows A to the chunk's end, sentences {ea[i]} .. "
               f"{chunk_end[i] - 1}")
    bad = ~is_next & (doc_a == doc_b)
    if bad.any():
        i = bad.nonzero()[0][0]
        c.fail(f"pair {i} is labelled 0 (NotNext), but B comes from A's own document ({doc_a[i]}); "
               "NotNext's B comes from another document")
    room = target - (a[:, 1] - a[:, 0])  # (B,) what A left of the target
    last = documents[doc_b + 1]  # (B,) the sentence after B's document
    bad = ~is_next & ~(((eb == last) | (off[eb.clip(max=len(off) - 1)] - off[sb] >= room))
                        & ((eb == sb + 1) | (off[(eb - 1).clip(min=0)] - off[sb] < room)))
    if bad.any():
        i = bad.nonzero()[0][0]
        c.fail(f"pair {i} (NotNext): B is sentences {sb[i]} .. {eb[i] - 1}, {off[eb[i]] - off[sb[i]]} "
               f"tokens, where A left {room[i]}; B runs from its first sentence up to the first boundary at "
               "least that far on (one sentence at least, within its document)")
    share = is_next.mean()
    expected = 1.0 if not use_nsp else 0.5
    if abs(share - expected) > _margin(expected, B):
        c.fail(f"{share:.3f} of {B:,} pairs are IsNext; expected {expected}"
               + ("" if use_nsp else " (use_nsp=False: B is always the real continuation)"))
    # A's first sentence uniform over those with a successor in their document; the cut uniform in the chunk
    starts = np.flatnonzero(np.arange(len(doc_of)) + 1 < documents[1:][doc_of])
    if abs(sa.mean() - starts.mean()) > 5 * starts.std() / B ** 0.5:
        c.fail(f"A's first sentence is {sa.mean():.1f} on average; drawn uniformly from self.starts it is "
               f"{starts.mean():.1f}")
    cuts = (chunk_end - sa - 1).astype(np.float64)  # (B,) the places A can end: after 1 .. cuts sentences
    mean, spread = ((cuts + 1) / 2).mean(), (((cuts ** 2 - 1) / 12).sum()) ** 0.5 / B
    if abs((ea - sa).mean() - mean) > 5 * spread + 0.01:
        c.fail(f"A is {(ea - sa).mean():.2f} sentences on average; cut uniformly at a sentence boundary of "
               f"its chunk it would be {mean:.2f}")
    if use_nsp:
        gap = ((doc_b - doc_a) % (len(documents) - 1))[~is_next]  # 1 .. D-1 for another document
        D = len(documents) - 1
        if abs(gap.mean() - D / 2) > 5 * ((D - 1) ** 2 / 12) ** 0.5 / len(gap) ** 0.5:
            c.fail("NotNext's documents are not uniform over the other documents")


def check_nsp_pairs(course, yours, case):
    split = _synthetic_split()
    for block_size, use_nsp in ((40, True), (128, True), (8, True), (40, False)):
        with case(f"4,000 pairs, block_size {block_size}" + ("" if use_nsp else ", use_nsp=False"),
                  given=f"60 documents of 1..8 sentences of 2..20 tokens; target block_size - 3 = "
                  f"{block_size - 3} tokens") as c:
            batches = _batches(yours, split, block_size, 4000, use_nsp=use_nsp)
            _check_pairs(c, split, batches._draw_pairs(), block_size, use_nsp)
    with case("the draws come from self.generator alone", given="two PairBatches seeded 7, the global torch "
              "seed changed in between; then a second call") as c:
        out = []
        for global_seed in (1, 2):
            torch.manual_seed(global_seed)
            np.random.seed(global_seed)
            batches = _batches(yours, split, 40, 32, seed=7)
            out.append((batches._draw_pairs(), batches._draw_pairs()))
        for i, what in enumerate(("a", "b", "labels")):
            c.equal(torch.as_tensor(out[1][0][i]), torch.as_tensor(out[0][0][i]),
                    f"{what} from the same seed")
        c.true(not np.array_equal(out[0][0][0], out[0][1][0]),
               "two calls drew the same A's; draw each batch anew from self.generator")


# ---- fine-tuning -----------------------------------------------------------------------------------------


def check_classifier(course, yours, case):
    cls_id, sep_id = 2, 3
    inputs = [  # (what, a, b, max_tokens)
        ("one sentence", [10, 11, 12], None, 16),
        ("a pair", [10, 11, 12], [20, 21], 16),
        ("a pair cut to fit, the longer text first", [10, 11, 12, 13, 14, 15], [20, 21], 8),
        ("a pair cut to fit, both texts", [10, 11, 12, 13], [20, 21, 22, 23, 24], 7),
        ("one sentence cut to fit", [10, 11, 12, 13, 14], None, 4),
        ("an empty second text", [10, 11], [], 8),
    ]
    for what, a, b, max_tokens in inputs:
        with case(f"pair_input: {what}", given=f"a = {a}, b = {b}, max_tokens = {max_tokens}, [CLS] = 2, "
                  "[SEP] = 3") as c:
            mine = yours.pair_input(list(a), None if b is None else list(b), max_tokens, cls_id, sep_id)
            ref = course.pair_input(list(a), None if b is None else list(b), max_tokens, cls_id, sep_id)
            c.equal(list(mine[0]), ref[0], "the token ids")
            c.equal(list(mine[1]), ref[1], "the segment ids")
    bert = BERT(BertConfig(**SMALL))  # the course's model: the task is what is built on it
    for what, dropout, lengths in (("3 labels, padded batch", 0.0, [7, 4, 1]),
                                   ("2 labels, no padding, T = 1", 0.0, [1, 1]),
                                   ("eval mode with classifier dropout 0.1", 0.1, [5, 3])):
        T, B = max(lengths), len(lengths)
        with case(f"BertClassifier: {what}", given=f"a 1-layer BERT, {B} rows of real lengths {lengths}, "
                  "segment ids 0 then 1") as c:
            K = 2 if T == 1 else 3
            ref = course.BertClassifier(bert, K, dropout).eval()
            mine = yours.BertClassifier(copy.deepcopy(bert), K, dropout).eval()
            mine.load_state_dict(ref.state_dict())
            ids = torch.randint(5, 50, (B, T))
            real = (torch.arange(T) < torch.tensor(lengths)[:, None]).long()  # (B, T)
            segments = (torch.arange(T) >= T // 2).long().expand(B, T) * real
            c.close(mine(ids, segments, real), ref(ids, segments, real), "the label scores")
    for what, B, K in (("batch of 6, 3 labels", 6, 3), ("batch of 1, 2 labels", 1, 2)):
        with case(f"classifier_loss: {what}", given=f"logits = 3 * torch.randn({B}, {K}), labels random"
                  ) as c:
            logits, labels = 3 * torch.randn(B, K), torch.randint(0, K, (B,))
            c.close(yours.classifier_loss(logits, labels), course.classifier_loss(logits, labels), "the loss")


def check_mlm_heads(course, yours, case):
    for positions in ("learned", "rotary"):
        with case(f"{positions} positions: NSP logits, MLM logits at the chosen positions, and the MLM loss",
                  given="ids (3, 12), two segments, real lengths [12, 9, 5], about 15% of the real positions "
                        "chosen") as c:
            config = dict(SMALL, positions=positions)
            ref = course.BERT(course.BertConfig(**config)).eval()
            for p in ref.parameters():  # LayerNorms and biases away from their start, so that each counts
                torch.nn.init.normal_(p, 0.1, 0.3)
            mine = yours.BERT(yours.BertConfig(**config)).eval()
            mine.load_state_dict(ref.state_dict())
            ids = torch.randint(5, 50, (3, 12))
            segments = (torch.arange(12) >= 6).long().expand(3, 12)
            attention = _padding_mask([12, 9, 5], 12)[:, 0, 0].long()  # (B, T): 1 real, 0 padding
            chosen = (torch.rand(3, 12) < 0.15) & attention.bool()
            chosen[2, 1] = True  # at least one chosen position
            targets = torch.randint(5, 50, (int(chosen.sum()),))
            mine_out = mine(ids, segments, attention, chosen=chosen)
            ref_out = ref(ids, segments, attention, chosen=chosen)
            c.true(isinstance(mine_out, tuple) and len(mine_out) == 2, "return (mlm_logits, nsp_logits)")
            c.close(mine_out[1], ref_out[1], "the NSP logits (B, 2)", atol=1e-4)
            c.close(mine_out[0], ref_out[0], "the MLM logits (N, V) at the chosen positions, row by row",
                    atol=1e-4)
            c.close(F.cross_entropy(mine_out[0], targets), F.cross_entropy(ref_out[0], targets),
                    "the MLM loss over the chosen positions", atol=1e-5)
            full_mine, full_ref = mine(ids, segments, attention)[0], ref(ids, segments, attention)[0]
            c.close(full_mine, full_ref, "the MLM logits (B, T, V) without `chosen`", atol=1e-4)
    with case("the decoder is the token table: the MLM loss's gradient reaches it",
              given="ids (2, 8), positions 1 and 5 chosen") as c:
        ref = course.BERT(course.BertConfig(**SMALL)).eval()
        mine = yours.BERT(yours.BertConfig(**SMALL)).eval()
        mine.load_state_dict(ref.state_dict())
        ids, chosen = torch.randint(5, 50, (2, 8)), torch.zeros(2, 8, dtype=torch.bool)
        chosen[:, [1, 5]] = True
        targets = torch.randint(5, 50, (4,))
        F.cross_entropy(ref(ids, chosen=chosen)[0], targets).backward()
        F.cross_entropy(mine(ids, chosen=chosen)[0], targets).backward()
        c.close(mine.embeddings.token.weight.grad, ref.embeddings.token.weight.grad,
                "the token table's gradient", atol=1e-6)


TASKS = [
    Task(
        id="3.attention",
        title="bidirectional self-attention with a padding mask",
        file=MODEL,
        functions=("BidirectionalSelfAttention.forward",),
        difficulty=2,
        asks="Chapter 1's attention without the causal mask: every query reads every key but padding.\n"
             "mask is (B, 1, 1, T) bool, True where the KEY is a real token, or None. With rotary =\n"
             "(cos, sin), turn the queries and keys (not the values) with rotate() first. Two paths:\n"
             "self.fast uses F.scaled_dot_product_attention; the other builds the (T, T) scores itself.\n"
             "Dropout: self.attn_dropout on the weights, self.resid_dropout after self.c_proj.",
        hints=(
            "Shapes: self.c_attn(x) is (B, T, 3C); split it into q, k, v and give each the shape "
            "(B, nh, T, hs) with .view(B, T, nh, hs).transpose(1, 2). Scores q @ k^T / sqrt(hs) are "
            "(B, nh, T, T): row i is query i, column j key j.",
            "The mask (B, 1, 1, T) broadcasts over heads and queries, so it hides columns: the padding keys. "
            "Fill the hidden scores with -inf (not 0: exp(0) = 1 still weighs them) before the softmax over "
            "the last axis. On the fast path pass attn_mask=mask, and dropout_p only in training.",
            "if rotary is not None: q, k = rotate(q, *rotary), rotate(k, *rotary). After weights @ v, "
            ".transpose(1, 2).contiguous().view(B, T, C) joins the heads; then self.c_proj and "
            "self.resid_dropout.",
        ),
        check=check_attention,
        tests=(TESTS + "test_model.py::test_logits_match_transformers",
               TESTS + "test_model.py::test_rotary_positions_match_roformer",
               TESTS + "test_model.py::test_padding_never_changes_real_positions",
               TESTS + "test_model.py::test_changing_a_later_token_changes_every_earlier_position",
               TESTS + "test_model.py::test_attention_paths_agree_in_eval_and_in_train_without_dropout",
               TESTS + "test_model.py::test_dropout_acts_in_train_mode_only"),
        mistakes=(
            Mistake("attention dropout on the fast path in eval mode too",
                    (("dropout_p = self.dropout if self.training else 0.0", "dropout_p = self.dropout"),)),
            Mistake("the padding mask over the queries' axis instead of the keys'",
                    (("attn_mask=mask,", "attn_mask=None if mask is None else mask.transpose(-2, -1),"),
                     ("att.masked_fill(~mask,", "att.masked_fill(~mask.transpose(-2, -1),"))),
            Mistake("padding scores set to 0 instead of -inf",
                    (('masked_fill(~mask, float("-inf"))', "masked_fill(~mask, 0.0)"),)),
            Mistake("GPT's causal mask kept",
                    (("/ math.sqrt(k.size(-1))  # (B, nh, T, T)",
                      "/ math.sqrt(k.size(-1))\n            att = att.masked_fill("
                      "torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf'))"),
                     ("dropout_p=dropout_p)", "dropout_p=dropout_p, is_causal=mask is None)"))),
            Mistake("the values turned as well",
                    (("q, k = rotate(q, *rotary), rotate(k, *rotary)",
                      "q, k, v = rotate(q, *rotary), rotate(k, *rotary), rotate(v, *rotary)"),)),
        ),
    ),
    Task(
        id="3.rotary",
        title="rotary positions (RoFormer)",
        file=MODEL,
        functions=("rotary_angles", "rotate"),
        difficulty=2,
        asks="rotary_angles: cos and sin of m * theta_i for each position m < block_size and pair\n"
             "i < head_size / 2, theta_i = ROTARY_BASE ** (-2i / head_size): two float32 (T, hs/2) tensors.\n"
             "rotate: split each vector of x (B, nh, T, hs) into neighbouring pairs (x[2i], x[2i+1]), turn\n"
             "pair i at position t by its angle (cos[t, i], sin[t, i]), put the pairs back in place, and\n"
             "return the result in x's dtype.",
        hints=(
            "rotary_angles: one angle m * theta_i per position m and pair i, a (T, hs/2) table; theta_i "
            "falls from 1 for pair 0 towards 1 / ROTARY_BASE. rotate: each vector of x (B, nh, T, hs) is "
            "hs/2 pairs, and cos, sin (T, hs/2) broadcast over B and nh.",
            "Two traps: the pairs are neighbours, x0 = x[..., 0::2] and x1 = x[..., 1::2], not the two "
            "halves of the vector (GPT-NeoX's layout); and the exponent's 2i runs 0, 2, 4, ..., not 0, 1, "
            "2. Work out the angles in float64 and return them as float32.",
            "Angles: torch.outer(positions, theta), theta = ROTARY_BASE ** (-torch.arange(0, head_size, 2) "
            "/ head_size). Turning (x0, x1) by a gives (x0 cos a - x1 sin a, x0 sin a + x1 cos a); stack the "
            "two on a new last axis and .flatten(-2) to interleave them back, then .type_as(x).",
        ),
        check=check_rotary,
        tests=(TESTS + "test_model.py::test_rotary_scores_depend_on_the_offset_only",
               TESTS + "test_model.py::test_rotary_positions_match_roformer"),
        mistakes=(
            Mistake("the two halves paired (GPT-NeoX's rotate_half) instead of neighbours",
                    (("x[..., 0::2], x[..., 1::2]", "x.chunk(2, dim=-1)"), ("torch.stack(", "torch.cat("),
                     ("turned.flatten(-2)", "turned"))),
            Mistake("theta_i = 10000^(-i/d) instead of 10000^(-2i/d)",
                    (("-torch.arange(0, head_size, 2, dtype=torch.float64)",
                      "-torch.arange(head_size // 2, dtype=torch.float64)"),)),
            Mistake("positions counted from 1",
                    (("torch.arange(block_size, dtype=torch.float64)",
                      "torch.arange(1, block_size + 1, dtype=torch.float64)"),)),
            Mistake("turned the other way (the sines' signs swapped)",
                    (("x0 * cos - x1 * sin, x0 * sin + x1 * cos",
                      "x0 * cos + x1 * sin, x1 * cos - x0 * sin"),)),
        ),
    ),
    Task(
        id="3.mask_tokens",
        title="masked-LM corruption: 15% chosen, then 80/10/10",
        file=DATA,
        functions=("mask_tokens",),
        difficulty=3,
        asks="In each row choose exactly max(1, round(n * mlm_prob)) of its n ordinary tokens (ids >=\n"
             "N_SPECIAL), uniformly; none if n = 0; never [CLS], [SEP] or padding. Of the chosen, a share\n"
             "mask_share becomes MASK_ID, random_share a random ordinary token in [N_SPECIAL, vocab_size),\n"
             "the rest stay as they are. labels: the original token at the chosen positions, IGNORE\n"
             "elsewhere. Draw every random number with `generator`.",
        hints=(
            "Everything is (B, T): ordinary = ids >= N_SPECIAL marks the candidates, and each row b has its "
            "own count of tokens to choose, from its own n. Draw with torch.rand and torch.randint, "
            "generator=generator; a boolean (B, T) `chosen` then drives the rest.",
            "A coin per token (rand < mlm_prob) is the classic mistake: right on average, but not exactly "
            "the count per row, and sometimes none. Exact counts without a loop: give every position a "
            "random key, push the specials' keys past all the others, and choose each row's count smallest "
            "keys.",
            "key.argsort(1).argsort(1) is each key's rank within its row (0 for the smallest), so chosen = "
            "rank < count[:, None]. count is round(n * mlm_prob), at least 1, and 0 where n = 0.",
            "A second uniform number per chosen position splits it: below mask_share -> MASK_ID; from "
            "mask_share to mask_share + random_share -> a torch.randint(N_SPECIAL, vocab_size, ...) token; "
            "else unchanged. labels = torch.where(chosen, ids, IGNORE); both long, on input_ids' device.",
        ),
        check=check_mask_tokens,
        tests=(TESTS + "test_data.py::test_mask_tokens_follows_bert_statistics",
               TESTS + "test_data.py::test_mask_tokens_picks_at_least_one_and_skips_rows_without_words",
               TESTS + "test_data.py::test_mask_tokens_is_decided_by_the_generator"),
        mistakes=(
            Mistake("[CLS], [SEP] and padding can be chosen",
                    (("ordinary = ids >= N_SPECIAL", "ordinary = torch.ones_like(ids, dtype=torch.bool)"),)),
            Mistake("[CLS] and [SEP] can be chosen (only padding left out)",
                    (("ordinary = ids >= N_SPECIAL", "ordinary = ids != PAD_ID"),)),
            Mistake("80/10/10 applied to every token instead of the chosen 15%",
                    (("chosen & (action < mask_share)", "(action < mask_share)"),
                     ("replace = chosen & (action >= mask_share)", "replace = (action >= mask_share)"))),
            Mistake("the random token can be a special token",
                    (("torch.randint(N_SPECIAL, vocab_size,", "torch.randint(0, vocab_size,"),)),
            Mistake("a coin per token instead of exactly round(n * mlm_prob) per row",
                    (("chosen = rank < count[:, None]",
                      "chosen = ordinary & (torch.rand(ids.shape, generator=generator) < mlm_prob)"),)),
            Mistake("an exact half rounded up, not to the even neighbour",
                    (("(n.double() * mlm_prob).round()", "(n.double() * mlm_prob + 0.5).floor()"),)),
            Mistake("labels at every ordinary token, not only the chosen",
                    (("labels = torch.where(chosen, ids, IGNORE)",
                      "labels = torch.where(ordinary, ids, IGNORE)"),)),
        ),
    ),
    Task(
        id="3.mlm_loss",
        title="BERT's heads: NSP from the pooled [CLS], MLM scored at the chosen positions only",
        file="phase1_foundation/project3_contextual_embeddings/model.py",
        functions=("BERT.forward",),
        difficulty=2,
        asks="From the final hidden states (self.hidden_states): the NSP logits (B, 2) of\n"
             "self.nsp_head on the pooled [CLS] state (self.pooler of position 0); and the MLM logits of\n"
             "self.mlm_head (dense, GELU, LayerNorm, then the decoder tied to the token table), at every\n"
             "position (B, T, V) or, when `chosen` (B, T) is given, at the chosen positions only (N, V), in\n"
             "row-major order, as the targets labels[chosen] are. Return (mlm_logits, nsp_logits).",
        hints=(
            "x = self.hidden_states(input_ids, segment_ids, attention_mask) is (B, T, C). [CLS] is "
            "position 0 of every row: x[:, 0] is (B, C).",
            "The MLM loss scores only the ~15% chosen positions: gather them before the head, whose V x "
            "C product is the costly part. x[chosen] with a (B, T) bool mask gives (N, C), row by row.",
            "nsp = self.nsp_head(self.pooler(x[:, 0])); if chosen is not None: x = x[chosen]; return "
            "self.mlm_head(x), nsp.",
        ),
        check=check_mlm_heads,
        tests=(TESTS + "test_model.py::test_pretraining_loss_matches_transformers",
               TESTS + "test_model.py::test_chosen_positions_gather_the_same_logits_as_full_scoring",
               TESTS + "test_model.py::test_post_ln_layout_pooler_and_tied_decoder"),
        mistakes=(
            Mistake("NSP from the last position, not [CLS]",
                    (("self.pooler(x[:, 0])", "self.pooler(x[:, -1])"),)),
            Mistake("NSP without the pooler",
                    (("self.nsp_head(self.pooler(x[:, 0]))", "self.nsp_head(x[:, 0])"),)),
            Mistake("the chosen positions gathered column by column, out of the targets' order",
                    (("x = x[chosen]", "x = x.transpose(0, 1)[chosen.T]"),)),
            Mistake("the MLM head without its transform (the decoder alone)",
                    (("return self.mlm_head(x), nsp_logits",
                      "return self.mlm_head.decoder(x), nsp_logits"),)),
        ),
    ),
    Task(
        id="3.pair_layout",
        title="[CLS] A [SEP] B [SEP]: ids, segments, attention mask",
        file=DATA,
        functions=("pair_layout",),
        difficulty=2,
        asks="Lay out each pair r as [CLS] A [SEP] B [SEP] [PAD]... in block_size positions: A is\n"
             "tokens[a[r, 0]:a[r, 1]], B likewise from b. Segment ids: 0 for [CLS], A and its [SEP]; 1 for\n"
             "B and its closing [SEP]; 0 for padding (PAD_ID). Attention mask: 1 up to and including the\n"
             "last [SEP], 0 on padding. Return the three as (B, block_size) long tensors.",
        hints=(
            "A pair of len_a and len_b tokens takes len_a + len_b + 3 positions: [CLS] at 0, A at "
            "1 .. len_a, [SEP] at len_a + 1, B at len_a + 2 .. len_a + len_b + 1, [SEP] at "
            "len_a + len_b + 2.",
            "The traps are the [SEP]s and the padding: A's [SEP] is segment 0 and B's closing [SEP] segment "
            "1, both inside the attention mask; padding is segment 0 and outside it. A loop over the rows "
            "is fine.",
            "Per row: [CLS_ID, *tokens[a0:a1], SEP_ID, *tokens[b0:b1], SEP_ID] padded with PAD_ID; segment "
            "ids len_a + 2 zeros, len_b + 1 ones, then zeros; the mask len_a + len_b + 3 ones, then zeros. "
            "(Vectorised: np.arange(T)[None, :] against len_a, len_b of shape (B, 1).)",
        ),
        check=check_pair_layout,
        tests=(TESTS + "test_data.py::test_pairs_are_half_true_continuations_half_other_documents",
               TESTS + "test_data.py::test_long_pairs_are_truncated_like_bert",
               TESTS + "test_data.py::test_resumed_batches_match_an_uninterrupted_run"),
        mistakes=(
            Mistake("A's [SEP] in segment B (segment ids off by one at the [SEP])",
                    (("(real & (position >= len_a + 2))", "(real & (position >= len_a + 1))"),)),
            Mistake("B's closing [SEP] left in segment A", (("(real & (position >= len_a + 2))", "in_b"),)),
            Mistake("the padding in segment B",
                    (("(real & (position >= len_a + 2))", "(position >= len_a + 2)"),)),
            Mistake("the last [SEP] outside the attention mask",
                    (("real = position < len_a + len_b + 3", "real = position < len_a + len_b + 2"),)),
            Mistake("B read one token early",
                    (("b[:, :1] + position - len_a - 2", "b[:, :1] + position - len_a - 1"),)),
        ),
    ),
    Task(
        id="3.nsp_pairs",
        title="next-sentence pairs: half IsNext, half from another document",
        file=DATA,
        functions=("PairBatches._draw_pairs",),
        difficulty=3,
        asks="Draw batch_size pairs with self.generator. A starts at a sentence drawn uniformly from\n"
             "self.starts; its chunk runs to the first sentence boundary >= block_size - 3 tokens on (2+\n"
             "sentences, not past self.doc_end); A ends at a boundary inside the chunk, uniformly. Half the\n"
             "time (always if not self.use_nsp) B is the rest of the chunk, label 1; else label 0, and B\n"
             "starts at a random sentence of a random OTHER document and runs to the first boundary >= what\n"
             "A left of block_size - 3 (1+ sentence, same document). Return the token ranges [start, end)\n"
             "of A and of B, (B, 2) each, and the labels (B,). BERT's short pairs: if self.short_seq_prob,\n"
             "a pair's target is, with that probability, a length drawn uniformly from 2 .. block_size - 3.",
        hints=(
            "Work in sentence indices, a (B,) array per quantity: self.sentences (off) holds each sentence's "
            "first token, so sentences s .. e - 1 are the tokens [off[s], off[e]). self.doc_of[s] is s's "
            "document, self.doc_end[s] the sentence after it, self.documents[d] document d's first sentence.",
            "Draw every random number with generator=self.generator (torch.randint, torch.rand, then "
            ".numpy()), never np.random, so that a resumed run repeats its batches. Traps: A must leave B at "
            "least one sentence, and NotNext's B must come from another document, uniform over the others.",
            "np.searchsorted(off, off[start] + target) is the first boundary at least target tokens on; clip "
            "it to [start + 2, self.doc_end[start]] for the chunk's end. A's end: start + 1 + floor(u * "
            "(chunk_end - start - 1)), u uniform in [0, 1), is start + 1 .. chunk_end - 1.",
            "Another document: (self.doc_of[start] + 1 + randint(n_documents - 1)) % n_documents; B starts "
            "at a uniform sentence of it and runs like the chunk, to what A left of target, clipped to "
            "[b_start + 1, self.documents[d + 1]]. np.where(is_next[:, None], real_b, random_b); labels "
            "is_next as int64.",
            "Short pairs only if self.short_seq_prob (with 0, nothing more is drawn): target becomes a (B,) "
            "array, np.where(torch.rand(B) < p, torch.randint(2, target + 1, (B,)), target), used wherever "
            "the full target was.",
        ),
        check=check_nsp_pairs,
        tests=(TESTS + "test_data.py::test_pairs_are_half_true_continuations_half_other_documents",
               TESTS + "test_data.py::test_short_pairs_have_a_random_target_length",
               TESTS + "test_data.py::test_long_pairs_are_truncated_like_bert",
               TESTS + "test_data.py::test_without_nsp_every_pair_is_contiguous_text"),
        mistakes=(
            Mistake("NotNext's B may come from A's own document",
                    (("(self.doc_of[start] + 1 + other)", "(self.doc_of[start] + other)"),)),
            Mistake("labels the other way round (transformers' 0 = IsNext)",
                    (("is_next.astype(np.int64)", "(~is_next).astype(np.int64)"),)),
            Mistake("A can take the whole chunk, leaving B empty",
                    (("(cut_at * (chunk_end - start - 1))", "(cut_at * (chunk_end - start))"),)),
            Mistake("NotNext's B a single sentence, not filled up",
                    (("np.searchsorted(off, off[b_start] + target - (a[:, 1] - a[:, 0])).clip(b_start + 1, "
                      "last)", "b_start + 1"),)),
            Mistake("a chunk of one sentence allowed", ((".clip(start + 2,", ".clip(start + 1,"),)),
        ),
    ),
    Task(
        id="3.classifier",
        title="fine-tuning: [CLS] A [SEP] B [SEP], the pooled [CLS] state, a new layer, the loss",
        file=FINETUNE,
        functions=("pair_input", "BertClassifier.forward", "classifier_loss"),
        difficulty=2,
        asks="pair_input: the ids [CLS] a [SEP] (segment 0), then b [SEP] (segment 1) when b is not\n"
             "None; when a and b are longer than what max_tokens leaves after the specials, cut them as\n"
             "truncated_lengths cuts pre-training's pairs. BertClassifier.forward: label scores (B, K)\n"
             "from the final state at [CLS] through self.bert.pooler, dropout, then self.classifier.\n"
             "classifier_loss: the mean cross-entropy of the labels under the scores.",
        hints=(
            "pair_input returns two lists of the same length. A pair needs three specials, one sentence two: "
            "the room for tokens is max_tokens - 3 or max_tokens - 2. truncated_lengths takes numpy arrays "
            "(np.array(len(a)) will do) and returns the two lengths to keep.",
            "forward: self.bert.hidden_states(input_ids, segment_ids, attention_mask) gives (B, T, C); [CLS] "
            "is position 0 of every row, however long the row is. The pooler (dense + tanh) is BERT's own.",
            "F.cross_entropy takes the raw scores: it applies log_softmax itself, so a softmax before it "
            "squashes the loss. Do the loss in float32 (logits.float()) for a bf16 autocast.",
        ),
        check=check_classifier,
        tests=(TESTS + "test_finetune.py::test_pairs_read_as_cls_a_sep_b_sep_with_segments",
               TESTS + "test_finetune.py::test_the_classifier_reads_the_pooled_cls_state"),
        mistakes=(
            Mistake("the last token pooled instead of [CLS]", (("self.bert.pooler(h[:, 0])",
                                                               "self.bert.pooler(h[:, -1])"),)),
            Mistake("softmax applied before cross_entropy", (("F.cross_entropy(logits.float(), labels)",
                                                             "F.cross_entropy(logits.float().softmax(-1), "
                                                             "labels)"),)),
            Mistake("segment ids left at 0 for sentence B",
                    (("segments + [1] * (len(b_kept) + 1)", "segments + [0] * (len(b_kept) + 1)"),)),
            Mistake("the [CLS] state without the pooler",
                    (("pooled = self.bert.pooler(h[:, 0])", "pooled = h[:, 0]"),)),
            Mistake("dropout applied in eval mode too",
                    (("self.classifier(self.dropout(pooled))",
                      "self.classifier(F.dropout(pooled, self.dropout.p))"),)),
            Mistake("the special tokens left out of the budget",
                    (("room = max_tokens - (2 if b is None else 3)", "room = max_tokens"),)),
        ),
    ),
]
