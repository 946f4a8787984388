"""Build it yourself: chapter 2's functions for you to write, and how `uv run learn check` tests them.

Each check builds the course's version and yours from the same random weights, runs both on the same
random inputs (several shapes, T = 1 included) and compares; the initialisation, which is random by design,
is compared by its statistics. `uv run learn list` shows the tasks.
"""

import contextlib
import importlib
import io

import torch

from common.course.learn.check import Mistake, Task

CHAPTER = "phase1_foundation.project2_gpt2"
TESTS = "phase1_foundation/project2_gpt2/tests/"
MODEL = "phase1_foundation/project2_gpt2/model.py"
SMALL = dict(vocab_size=29, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)
NORM_WEIGHTS = ("ln_1.weight", "ln_2.weight", "ln_f.weight")


def _config(module, **changes):
    """A small GPTConfig from `module` (model.py, the course's or yours)."""
    return module.GPTConfig(**{**SMALL, **changes})


def _twins(course, yours, cls: str, **changes):
    """The course's `cls` and yours, in eval mode, with the same random weights: LayerNorms away from the
    identity and biases away from zero, so that each of them counts."""
    ref = getattr(course, cls)(_config(course, **changes)).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.normal_(1.0 if name.endswith(NORM_WEIGHTS) else 0.0, 0.3)
    mine = getattr(yours, cls)(_config(yours, **changes)).eval()
    mine.load_state_dict(ref.state_dict())
    return ref, mine


def check_pre_ln(course, yours, case):
    for T in (1, 7):
        with case(f"one pre-LN block, T = {T}", given=f"x = torch.randn(2, {T}, 32) * 3 + 1") as c:
            ref, mine = _twins(course, yours, "Block")
            x = torch.randn(2, T, 32) * 3 + 1
            c.close(mine(x), ref(x), atol=1e-4)
    for T, start in ((1, 0), (9, 0), (16, 0), (4, 5), (1, 15)):
        with case(f"hidden_states of {T} token{'s' * (T > 1)} from position {start}",
                  given=f"idx = torch.randint(0, 29, (2, {T})), start = {start}, 2 blocks") as c:
            ref, mine = _twins(course, yours, "GPT")
            idx = torch.randint(0, 29, (2, T))
            c.close(mine.hidden_states(idx, start=start), ref.hidden_states(idx, start=start), atol=1e-4)
    with case("start + T past block_size is refused", given="5 tokens from position 12, block_size 16") as c:
        _, mine = _twins(course, yours, "GPT")
        try:
            mine.hidden_states(torch.zeros(1, 5, dtype=torch.long), start=12)
        except ValueError:
            pass
        else:
            c.fail("no ValueError for 17 positions in a model of block_size 16")


def check_kv_attention(course, yours, case):
    KVCache = importlib.import_module(f"{CHAPTER}.generate").KVCache
    for fast in (False, True):
        path = "fast (scaled_dot_product_attention)" if fast else "explicit"
        for T in (1, 5, 16):
            with case(f"{path} path, no cache, T = {T}", given=f"x = torch.randn(2, {T}, 32), 4 heads") as c:
                ref, mine = _twins(course, yours, "CausalSelfAttention", fast_attention=fast)
                x = torch.randn(2, T, 32)
                c.close(mine(x), ref(x))
        with case(f"{path} path in eval mode with dropout = 0.5: no dropout at all",
                  given="x = torch.randn(2, 7, 32), model.eval()") as c:
            ref, mine = _twins(course, yours, "CausalSelfAttention", fast_attention=fast, dropout=0.5)
            x = torch.randn(2, 7, 32)
            c.close(mine(x), ref(x))
        for prompt in (5, 1):
            with case(f"{path} path, a prompt of {prompt} through an empty cache, then one token at a time",
                      given=f"x = torch.randn(2, 16, 32): x[:, :{prompt}], then x[:, t:t+1] for t = "
                            f"{prompt}..15; each compared with the full forward pass without a cache") as c:
                ref, mine = _twins(course, yours, "CausalSelfAttention", fast_attention=fast)
                x = torch.randn(2, 16, 32)
                full = ref(x)  # (2, 16, 32): all positions at once, causal, no cache
                mine.cache = KVCache(_config(yours), 2, x.device, x.dtype)  # keys, values: (2, nh, 16, hs)
                c.close(mine(x[:, :prompt]), full[:, :prompt],
                        what=f"the prompt's output (positions 0..{prompt - 1})")
                for t in range(prompt, 16):
                    c.close(mine(x[:, t : t + 1]), full[:, t : t + 1],
                            what=f"the output for the new token at position {t}, after {t} cached positions")
                c.true(mine.cache.length == 16,
                       f"the cache holds {mine.cache.length} positions after 16 tokens; store each new key "
                       "and value with self.cache.append(k, v)")


TOP_K = ("    if top_k is not None:\n"  # filter_logits' top-k lines, for a mistake that moves them
         "        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]"
         "  # (B, 1): the k-th highest score\n"
         "        logits = logits.masked_fill(logits < kth, float(\"-inf\"))\n")


def check_top_p(course, yours, case):
    def same(c, logits, **filters):
        mine, ref = yours.filter_logits(logits, **filters), course.filter_logits(logits, **filters)
        c.true(isinstance(mine, torch.Tensor) and mine.shape == ref.shape,
               f"return the logits, shape {tuple(ref.shape)}, with the dropped tokens at -inf")
        c.equal(mine.isfinite(), ref.isfinite(), "which tokens are kept (True) and dropped (False)")
        c.close(mine, ref, "the kept tokens' logits (they must stay as they were)")

    example = torch.tensor([[0.3, 0.05, 0.5, 0.15], [0.15, 0.5, 0.05, 0.3]]).log()
    for p in (1e-9, 0.4, 0.5 + 1e-4, 0.8 - 1e-4, 0.8 + 1e-4, 0.99):
        with case(f"top_p = {p:g}", given="probabilities 0.3, 0.05, 0.5, 0.15 (row 0) and 0.15, 0.5, 0.05, "
                  f"0.3 (row 1): running sums, likeliest first, 0.5, 0.8, 0.95, 1; top_p = {p:g}") as c:
            same(c, example, top_p=p)
    for p in (0.3, 0.9):
        with case(f"top_p = {p} on random logits", given="logits = torch.randn(4, 50) * 3") as c:
            same(c, torch.randn(4, 50) * 3, top_p=p)
    with case("top_k = 5 alone, then top_k = 99 > V", given="logits = torch.randn(3, 20) * 2") as c:
        logits = torch.randn(3, 20) * 2
        same(c, logits, top_k=5)
        same(c, logits, top_k=99)
    with case("top_k = 10, then top_p = 0.5 of what top-k kept", given="logits = torch.randn(4, 50)") as c:
        same(c, torch.randn(4, 50), top_k=10, top_p=0.5)
    with case("top_p = 1 keeps every token, however unlikely",
              given="logits [[0, -40, -80]]: probabilities 1 - 4e-18, 4e-18, 2e-35") as c:
        same(c, torch.tensor([[0.0, -40.0, -80.0]]), top_p=1.0)
    with case("neither top_k nor top_p: every token kept", given="logits = torch.randn(2, 7)") as c:
        same(c, torch.randn(2, 7))


def _quiet(build):
    """build() without train's progress bar and notes in the middle of the cases."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        return build()


def _hand_made(module, merges):
    """A ByteBPETokenizer of `module` whose merges are `merges`, ranks in that order."""
    vocabulary = [*module.BYTE_TO_CHAR.values(), *(a + b for a, b in merges), module.END_OF_TEXT]
    return module.ByteBPETokenizer({token: i for i, token in enumerate(vocabulary)}, list(merges))


TRAINING_TEXT = ("The café served crème brûlée to naïve visitors. They said: it's the best! The cities are "
                 "large, the café is larger, and the cat sat on the mat. aaaa aaaaaaa banana bananas "
                 "2019 ") * 4
ENCODED = "The cat sat; the larger café served bananas. aaaaa aaa a banana-bandana 20192019 naïvely é😀"


def check_bpe(course, yours, case):
    for symbols, pair in ((list("abab"), ("a", "b")), (list("xaaay"), ("a", "a")), (list("aaaa"), ("a", "a")),
                          (["ab", "c", "ab", "c", "d"], ("ab", "c")), (list("abc"), ("c", "d")),
                          (["a"], ("a", "a")), ([], ("a", "b"))):
        with case(f"_merge_pair({symbols}, {pair})", given=f"symbols = {symbols}, pair = {pair}") as c:
            c.equal(yours._merge_pair(list(symbols), pair), course._merge_pair(list(symbols), pair))
    hand = {
        "the lowest rank first, not the leftmost pair": ([("b", "c"), ("a", "b")], "abc"),
        "a pair that occurs twice": ([("a", "b"), ("ab", "c")], "abcabc"),
        "merges built on merges": ([("a", "a"), ("aa", "aa"), ("aaaa", "a")], "aaaaa"),
        "pairs formed by earlier merges": ([("a", "n"), ("b", "an"), ("an", "a"), ("ban", "ana"),
                                            ("banana", "s")], "bananas"),
        "no merge applies": ([("x", "y")], "abc"),
        "one symbol": ([("a", "b")], "a"),
    }
    for name, (merges, word) in hand.items():
        with case(f"_bpe: {name}", given=f"_bpe({word!r}) with the merges {merges}, in rank order") as c:
            mine, ref = _hand_made(yours, merges), _hand_made(course, merges)
            c.equal(mine._bpe(word), ref._bpe(word))
    with case("encode with a trained vocabulary",
              given=f"about 60 merges learned from a short text; encode({ENCODED!r})") as c:
        ref = _quiet(lambda: course.ByteBPETokenizer.train([TRAINING_TEXT], 320))
        mine = yours.ByteBPETokenizer(ref.encoder, ref.merges)
        for piece in course.PRETOKENIZE.findall(ENCODED):
            symbols = course.to_symbols(piece)
            c.equal(mine._bpe(symbols), ref._bpe(symbols), f"_bpe({symbols!r}), the pre-token {piece!r}")
        c.equal(mine.encode(ENCODED), ref.encode(ENCODED), "the ids")


def check_scaled_init(course, yours, case):
    for n_layer in (1, 4, 12):
        shape = dict(vocab_size=128, block_size=64, n_layer=n_layer, n_head=4, n_embd=64)
        with case(f"{n_layer} layer{'s' * (n_layer > 1)}: each weight's spread",
                  given=f"GPT(GPTConfig({shape}))") as c:
            ref = course.GPT(course.GPTConfig(**shape))
            mine = yours.GPT(yours.GPTConfig(**shape))
            c.true(mine.lm_head.weight is mine.wte.weight, "the head must stay tied to the token embedding")
            theirs = dict(ref.named_parameters())
            for name, p in mine.named_parameters():
                q = theirs[name]
                if name.endswith(NORM_WEIGHTS) or q.dim() == 1:  # LayerNorms at the identity, biases at zero
                    c.equal(p.detach(), q.detach(), name)
                    continue
                # Both are random draws: their stds differ by about 2% by chance, a wrong scale by 30% or more
                mine_std, ref_std = p.std().item(), q.std().item()
                if abs(mine_std / ref_std - 1) > 0.1:
                    c.fail(f"{name} has std {mine_std:.5f}; the course's has {ref_std:.5f} (0.02 / sqrt(2 * "
                           f"{n_layer}) is {0.02 / (2 * n_layer) ** 0.5:.5f})")
                if abs(p.mean().item()) > 5 * ref_std / p.numel() ** 0.5:
                    c.fail(f"{name} has mean {p.mean().item():.5f}; draw it with mean 0")


BPE_TEXT = ("The café served crème brûlée to naïve visitors. They said: \"It's the best!\"\n"
            "In 2019, the model read 40 GB of text; the cities are large, the cities are old.\n"
            "    def square(x):\n        return x ** 2  # the square\n") * 6


def check_bpe_train(course, yours, case):
    corpora = {
        "a paragraph six times over, 400 tokens": ([BPE_TEXT], 400),
        "the same text split into several texts, 330 tokens": (BPE_TEXT.split("\n"), 330),
        "three pairs once each: the tie goes to the pair that sorts first": (["ab cd"], 258),
        "repeated words: each pair counted as often as its word occurs":
            (["the the the the cat cat dog"], 262),
        "a corpus too small for 1,000 tokens: every merge it supports, and no more":
            (["x.x.x y!y! ok ok"], 1000),
        "accents, emoji and CJK as bytes": (["naïve café 😀😀 東京 東京 東京 Zürich Zürich"], 290),
    }
    for name, (texts, vocab_size) in corpora.items():
        with case(name, given=f"{len(texts)} text(s), vocab_size = {vocab_size}") as c:
            with contextlib.redirect_stdout(io.StringIO()):  # the note on a corpus too small
                mine = yours.ByteBPETokenizer.train(texts, vocab_size)
                ref = course.ByteBPETokenizer.train(texts, vocab_size)
            c.equal(list(mine.merges), list(ref.merges), "the merges, in the order they were learned")
            c.equal(mine.encoder, ref.encoder, "the vocabulary (token -> id)")


def check_kv_cache(course, yours, case):
    model = importlib.import_module(f"{CHAPTER}.model")
    config = model.GPTConfig(**SMALL)  # 4 heads of 8, block_size 16
    for prompt in (5, 1, 16):
        steps = min(3, 16 - prompt)
        with case(f"a prompt of {prompt} into an empty cache, then {steps} tokens one at a time",
                  given=f"k, v (2, 4, {prompt}, 8), then (2, 4, 1, 8) each step") as c:
            mine, ref = yours.KVCache(config, 2, "cpu", torch.float32), course.KVCache(config, 2, "cpu",
                                                                                      torch.float32)
            for t, T in enumerate([prompt] + [1] * steps):
                k, v = torch.randn(2, 4, T, 8), torch.randn(2, 4, T, 8)
                out_mine, out_ref = mine.append(k, v), ref.append(k.clone(), v.clone())
                c.true(isinstance(out_mine, tuple) and len(out_mine) == 2, "return (keys, values)")
                c.equal(out_mine[0], out_ref[0], f"the keys of every position after append {t + 1}")
                c.equal(out_mine[1], out_ref[1], f"the values of every position after append {t + 1}")
                c.equal(mine.length, ref.length, f"self.length after append {t + 1}")
    with case("a cache that holds positions refuses several new ones at once", given="a prompt of 4, then "
              "k, v (2, 4, 2, 8)") as c:
        mine = yours.KVCache(config, 2, "cpu", torch.float32)
        mine.append(torch.randn(2, 4, 4, 8), torch.randn(2, 4, 4, 8))
        try:
            mine.append(torch.randn(2, 4, 2, 8), torch.randn(2, 4, 2, 8))
        except ValueError:
            pass
        else:
            c.fail("two new positions were appended after four cached ones; raise ValueError (their queries "
                   "would need an offset into the causal mask each)")


TASKS = [
    Task(
        id="2.pre_ln",
        title="the pre-LN block and the final LayerNorm",
        file=MODEL,
        functions=("Block.forward", "GPT.hidden_states"),
        difficulty=2,
        asks="Block.forward: GPT-2's pre-LN block (§2.3): each sub-block reads a normalised copy of x and\n"
             "adds its output to x itself: attention with self.ln_1, then the MLP with self.ln_2.\n"
             "GPT.hidden_states: token plus position embeddings (the positions start at `start`, which is\n"
             "not 0 after cached tokens), self.drop, the blocks, then the final LayerNorm self.ln_f. Refuse\n"
             "start + T > block_size with a ValueError.",
        hints=(
            "The residual stream x is never normalised itself: LayerNorm only makes the copy each sub-block "
            "reads. That is the whole difference from GPT-1's x = LN(x + f(x)).",
            "A pre-LN stack ends in a raw sum whose scale grows with depth, hence GPT-2's extra LayerNorm "
            "after the last block. idx's tokens sit at positions start .. start + T - 1, not 0 .. T - 1: "
            "after cached tokens the new ones come further on.",
            "Block: x = x + self.attn(self.ln_1(x)), then the same for the MLP with self.ln_2. "
            "hidden_states: the ValueError first; then self.drop of the token embeddings plus "
            "self.wpe(torch.arange(start, start + T)), every block in turn, and self.ln_f at the end.",
        ),
        check=check_pre_ln,
        tests=(TESTS + "test_model.py::test_from_hf_gives_transformers_logits",
               TESTS + "test_model.py::test_changing_token_t_never_changes_earlier_logits",
               TESTS + "test_model.py::test_cached_logits_equal_the_full_forward_pass"),
        mistakes=(
            Mistake("the residual taken after the LayerNorm",
                    (("x = x + self.attn(self.ln_1(x))", "x = self.ln_1(x)\n        x = x + self.attn(x)"),
                     ("x = x + self.mlp(self.ln_2(x))", "x = self.ln_2(x)\n        x = x + self.mlp(x)"))),
            Mistake("GPT-1's post-LN block",
                    (("x = x + self.attn(self.ln_1(x))", "x = self.ln_1(x + self.attn(x))"),
                     ("x = x + self.mlp(self.ln_2(x))", "x = self.ln_2(x + self.mlp(x))"))),
            Mistake("one LayerNorm for both sub-blocks",
                    (("self.mlp(self.ln_2(x))", "self.mlp(self.ln_1(x))"),)),
            Mistake("no final LayerNorm", (("return self.ln_f(x)", "return x"),)),
            Mistake("positions restart at 0 after cached tokens",
                    (("torch.arange(start, start + T, device=idx.device)",
                      "torch.arange(T, device=idx.device)"),)),
        ),
    ),
    Task(
        id="2.kv_cache",
        title="the KV cache: storing each position's keys and values once",
        file="phase1_foundation/project2_gpt2/generate.py",
        functions=("KVCache.append",),
        difficulty=1,
        asks="Store the keys and values (B, nh, T, hs) of T new positions in the preallocated self.k and\n"
             "self.v (B, nh, block_size, hs), from position self.length on, advance self.length, and return\n"
             "the keys and values of every position stored so far. A cache that already holds positions\n"
             "takes one new token at a time: refuse more with ValueError.",
        hints=(
            "The positions live on axis 2: the new ones go to self.k[:, :, self.length : self.length + T].",
            "Return views of the stored part, [:, :, :end] on axis 2: the attention then sees S = end keys, "
            "the new ones last.",
            "end = self.length + T; write k and v there; self.length = end; return self.k[:, :, :end], "
            "self.v[:, :, :end]. The ValueError comes first: if self.length and T != 1.",
        ),
        check=check_kv_cache,
        tests=(TESTS + "test_model.py::test_cached_logits_equal_the_full_forward_pass",
               TESTS + "test_model.py::test_greedy_with_cache_equals_greedy_without"),
        mistakes=(
            Mistake("self.length never advanced: each token overwrites the last",
                    (("self.length = end", "pass"),)),
            Mistake("only the new keys and values returned",
                    (("return self.k[:, :, :end], self.v[:, :, :end]", "return k, v"),)),
            Mistake("the keys stored as values too",
                    (("self.v[:, :, self.length : end] = v", "self.v[:, :, self.length : end] = k"),)),
        ),
    ),
    Task(
        id="2.kv_attention",
        title="causal attention over a KV cache",
        file=MODEL,
        functions=("CausalSelfAttention.forward",),
        difficulty=3,
        asks="Chapter 1's causal multi-head attention, plus a cache: when self.cache is set (while\n"
             "generating), store the new keys and values with self.cache.append(k, v), which returns\n"
             "those of all S positions, and let the T new queries attend over them. The cache takes a whole\n"
             "prompt when empty (S == T: the causal triangle), then one token at a time (T == 1 < S: it\n"
             "sees every key). Both paths: self.fast (F.scaled_dot_product_attention) and the explicit one\n"
             "(self.mask). Dropout: self.attn_dropout on the weights, self.resid_dropout on the output.",
        hints=(
            "Shapes: q, k, v are (B, nh, T, hs) as in chapter 1; after the cache, k and v are (B, nh, S, hs) "
            "and the scores (B, nh, T, S). Append before you attend: the new token must see its own key.",
            "Only two things change from chapter 1: keep what self.cache.append returns (the keys and values "
            "of all S positions, the T new ones last), or the new token sees only itself; and the causal "
            "mask, which must now line up T queries against S keys.",
            "The T queries are the last T of the S positions, so query i is at position S - T + i and may "
            "see keys 0..S - T + i. is_causal=True masks as if both started at 0: right only when S == T.",
            "Fast path: is_causal=(S == T). Explicit path: the rows S - T .. S - 1 and columns 0 .. S - 1 of "
            "self.mask, i.e. ~self.mask[S - T : S, :S] is what masked_fill sets to -inf.",
        ),
        check=check_kv_attention,
        tests=(TESTS + "test_model.py::test_cached_logits_equal_the_full_forward_pass",
               TESTS + "test_model.py::test_greedy_with_cache_equals_greedy_without",
               TESTS + "test_model.py::test_changing_token_t_never_changes_earlier_logits",
               TESTS + "test_model.py::test_attention_paths_agree_in_values_and_gradients",
               TESTS + "test_model.py::test_dropout_acts_in_train_mode_only"),
        mistakes=(
            Mistake("attention dropout on the fast path in eval mode too",
                    (("dropout_p = self.dropout if self.training else 0.0", "dropout_p = self.dropout"),)),
            Mistake("attends before appending: the new token misses its own key",
                    (("k, v = self.cache.append(k, v)",
                      "held = self.cache.length\n            k, v = self.cache.append(k, v)\n"
                      "            k, v = (k[:, :, :held], v[:, :, :held]) if held else (k, v)"),)),
            Mistake("the cache filled but never read: the new token sees only itself",
                    (("k, v = self.cache.append(k, v)", "self.cache.append(k, v)"),)),
            Mistake("a causal mask on the single new query (fast path)",
                    (("is_causal=S == T", "is_causal=True"),)),
            Mistake("the mask's first T rows instead of its last T (explicit path)",
                    (("self.mask[S - T : S, :S]", "self.mask[:T, :S]"),)),
            Mistake("no 1/sqrt(hs) scaling", (("/ math.sqrt(k.size(-1))", ""),)),
        ),
    ),
    Task(
        id="2.top_p",
        title="top-k and nucleus (top-p) filtering",
        file="phase1_foundation/project2_gpt2/generate.py",
        functions=("filter_logits",),
        difficulty=2,
        asks="Return logits (B, V) with every token outside the top_k highest scores, and outside the top_p\n"
             "nucleus, set to -inf (the kept ones unchanged). The nucleus (Holtzman et al. 2019) is the\n"
             "smallest set of tokens, likeliest first, whose probability reaches top_p: the token that\n"
             "crosses top_p is kept. top-k first, then the nucleus of what it kept; top_p >= 1 keeps all.",
        hints=(
            "top-k: the k-th highest score is torch.topk(logits, k).values[:, -1:]; everything below it "
            "goes. top-p: sort the logits in descending order, softmax, cumulative sum.",
            "A token is in the nucleus when the likelier tokens before it do not reach top_p yet. That makes "
            "the likeliest token always kept, and the one that crosses top_p too.",
            "before = probs.cumsum(-1) - probs (the mass of the likelier tokens); drop where before >= "
            "top_p; masked_fill the sorted logits, then scatter them back with the sort's order. Skip all of "
            "it when top_p >= 1: the float cumsum can reach 1 before the last, tiny, tokens.",
        ),
        check=check_top_p,
        tests=(TESTS + "test_model.py::test_top_p_keeps_the_smallest_set_reaching_p",
               TESTS + "test_model.py::test_top_p_1_keeps_every_token_however_unlikely",
               TESTS + "test_model.py::test_top_k_keeps_the_k_highest_scores",
               TESTS + "test_model.py::test_generate_samples_only_from_the_top_k"),
        mistakes=(
            Mistake("drops the token that crosses top_p",
                    (("before = probs.cumsum(dim=-1) - probs", "before = probs.cumsum(dim=-1)"),)),
            Mistake("keeps one token too many",
                    (("before = probs.cumsum(dim=-1) - probs",
                      "before = probs.cumsum(dim=-1) - probs - F.pad(probs, (1, 0))[:, :-1]"),)),
            Mistake("the result left in sorted order (not scattered back)",
                    (("logits = logits.scatter(-1, order, sorted_logits)", "logits = sorted_logits"),)),
            Mistake("the nucleus measured before top-k, on the unfiltered probabilities",
                    ((TOP_K, ""), ("    return logits", TOP_K + "    return logits"))),
            Mistake("top_p = 1 filtered too: rounding drops the least likely tokens",
                    (("if top_p is not None and top_p < 1:", "if top_p is not None:"),)),
        ),
    ),
    Task(
        id="2.bpe",
        title="encoding a word with byte-level BPE",
        file="phase1_foundation/project2_gpt2/tokenizer.py",
        functions=("_merge_pair", "ByteBPETokenizer._bpe"),
        difficulty=2,
        asks="_merge_pair: replace every occurrence of `pair` in `symbols`, left to right, by the two\n"
             "symbols joined (\"a a a\" with (a, a) gives \"aa a\").\n"
             "ByteBPETokenizer._bpe: start from the word's single symbols and, while a neighbouring pair is\n"
             "a learned merge, merge the one learned first (lowest rank, self.ranks) everywhere in the\n"
             "word. Return the list of tokens.",
        hints=(
            "Learned first means the lowest rank in self.ranks ({pair: rank}); a pair that is not there has "
            "no rank, and when no neighbouring pair has one, the word is done.",
            "_merge_pair walks i along the symbols: at a match append the joined pair and step 2, otherwise "
            "append symbols[i] and step 1. Merging the leftmost pair, or one occurrence only, is not the "
            "same.",
            "_bpe: from the list of single symbols, repeatedly take the neighbouring pair of lowest rank, "
            "min(itertools.pairwise(parts), key=lambda p: self.ranks.get(p, len(self.ranks))); stop when "
            "even it is not in self.ranks (or one part is left), else merge it everywhere with _merge_pair.",
        ),
        check=check_bpe,
        tests=(TESTS + "test_tokenizer.py::test_any_bytes_round_trip_without_an_unknown_token",
               TESTS + "test_tokenizer.py::test_training_matches_recounting_every_pair",
               TESTS + "test_tokenizer.py::test_merges_never_cross_pre_tokens",
               TESTS + "test_tokenizer.py::test_released_vocabulary_matches_transformers"),
        mistakes=(
            Mistake("the leftmost learned pair first, not the lowest rank",
                    (("key=lambda p: self.ranks.get(p, len(self.ranks))",
                      "key=lambda p: p not in self.ranks"),)),
            Mistake("the latest-learned merge first",
                    (("min(itertools.pairwise(parts), key=lambda p: self.ranks.get(p, len(self.ranks)))",
                      "max(itertools.pairwise(parts), key=lambda p: self.ranks.get(p, -1))"),)),
            Mistake("a merge applied to its first occurrence only",
                    (("            merged.append(symbols[i] + symbols[i + 1])\n            i += 2",
                      "            return merged + [symbols[i] + symbols[i + 1]] + symbols[i + 2 :]"),)),
            Mistake("a step of 1 after a merge: 'a a a' gives 'aa aa a'", (("i += 2", "i += 1"),)),
            Mistake("no stop when no learned pair is left",
                    (("            if pair not in self.ranks:\n                break\n", ""),)),
        ),
    ),
    Task(
        id="2.bpe_train",
        title="training byte-level BPE: learning the merges",
        file="phase1_foundation/project2_gpt2/tokenizer.py",
        functions=("ByteBPETokenizer.train",),
        difficulty=3,
        asks="Learn vocab_size - 257 merges from `texts`: split each text with PRETOKENIZE (merges\n"
             "never cross pre-tokens), each pre-token as its byte symbols (to_symbols); then, again and\n"
             "again, merge the most frequent pair of neighbouring symbols, counted over the corpus (a word\n"
             "as often as it occurs). Ties go to the pair whose symbol strings sort first (a space is 'Ġ',\n"
             "U+0120, after the letters); a pair whose merged token already exists is passed over; stop\n"
             "early when no pair is left (say so). Return cls(encoder, merges): the 256 byte tokens, then\n"
             "merge k as id 256 + k, then <|endoftext|>. Refuse vocab_size < 257 with CourseError, its\n"
             "message saying \"at least 257\".",
        hints=(
            "Count the pre-tokens first (a Counter of strings): the corpus becomes a table of distinct words "
            "and how often each occurs, each word a list of symbols. Recounting every pair before each merge "
            "is slow but right: start there.",
            "The most frequent pair, ties to the one that sorts first: min(counts, key=lambda p: "
            "(-counts[p], p)). _merge_pair(symbols, pair) rewrites one word; a word's pairs are "
            "itertools.pairwise(word).",
            "The vocabulary is [*BYTE_TO_CHAR.values(), *(left + right for left, right in merges), "
            "END_OF_TEXT], ids in that order. The course's version avoids recounting: it keeps the pair "
            "counts and, after each merge, changes only the words that held the pair (a heap finds the top "
            "pair).",
        ),
        check=check_bpe_train,
        tests=(TESTS + "test_tokenizer.py::test_training_matches_recounting_every_pair",
               TESTS + "test_tokenizer.py::test_training_is_deterministic",
               TESTS + "test_tokenizer.py::test_merges_never_cross_pre_tokens",
               TESTS + "test_tokenizer.py::test_trained_vocabulary_layout",
               TESTS + "test_tokenizer.py::test_train_refuses_a_vocabulary_without_room_for_the_bytes"),
        mistakes=(
            Mistake("each pair counted once per distinct word, not per occurrence",
                    (("pair_counts[pair] += counts[w]", "pair_counts[pair] += 1"),)),
            Mistake("one merge too many (vocab_size - 256)",
                    (("n_merges = vocab_size - 257", "n_merges = vocab_size - 256"),)),
            Mistake("stale counts taken for current ones",
                    (("if pair_counts.get(pair) != -negative_count or pair[0] + pair[1] in tokens:",
                      "if pair[0] + pair[1] in tokens:"),)),
        ),
    ),
    Task(
        id="2.scaled_init",
        title="GPT-2's scaled residual initialisation",
        file=MODEL,
        functions=("GPT._init_weights", "GPT.init_weights"),
        difficulty=1,
        asks="_init_weights(module): every Linear and Embedding weight from N(0, 0.02), every Linear bias\n"
             "at 0 (LayerNorms keep PyTorch's ones and zeros). init_weights: apply that to every module,\n"
             "then redraw the residual projections (each block's attn.c_proj and mlp.c_proj weights) from\n"
             "N(0, 0.02 / sqrt(2 * n_layer)) (GPT-2 §2.3: 1/sqrt(N), two residual layers per block).",
        hints=(
            "self.apply(fn) calls fn on every submodule; nn.init.normal_(w, mean=0.0, std=...) and "
            "nn.init.zeros_(b) draw in place.",
            "Only the layers that add into the residual stream are scaled: each block has two, the "
            "attention's and the MLP's output projections, so N = 2 * n_layer. The trap is the order: the "
            "N(0, 0.02) pass over every module must come first, or it overwrites the scaled draw.",
            "_init_weights: normal_ on the weight of an nn.Linear or nn.Embedding, zeros_ on a Linear's bias "
            "when there is one. init_weights: self.apply(self._init_weights), then redraw each parameter of "
            "self.named_parameters() whose name ends in 'c_proj.weight' with std 0.02 / "
            "math.sqrt(2 * self.config.n_layer).",
        ),
        check=check_scaled_init,
        tests=(TESTS + "test_model.py::test_residual_projections_start_smaller_by_sqrt_of_twice_the_depth",),
        mistakes=(
            Mistake("every Linear scaled, not the residual projections only",
                    (('if name.endswith("c_proj.weight"):',
                      'if name.endswith("weight") and param.dim() == 2:'),)),
            Mistake("only the attention's projection scaled",
                    (('name.endswith("c_proj.weight")', 'name.endswith("attn.c_proj.weight")'),)),
            Mistake("1/sqrt(n_layer): one residual layer per block",
                    (("math.sqrt(2 * self.config.n_layer)", "math.sqrt(self.config.n_layer)"),)),
            Mistake("the scaled draw overwritten by the N(0, 0.02) pass after it",
                    (("        self.apply(self._init_weights)\n", ""),
                     ("std=0.02 / math.sqrt(2 * self.config.n_layer))",
                      "std=0.02 / math.sqrt(2 * self.config.n_layer))\n"
                      "        self.apply(self._init_weights)"))),
            Mistake("biases left at PyTorch's default", (("nn.init.zeros_(module.bias)", "pass"),)),
        ),
    ),
]
