"""Build it yourself: chapter 1's functions for you to write, and how `uv run learn check` tests them.

Each check builds the course's version and yours from the same random weights, runs both on the same
random inputs (several shapes, T = 1 included) and compares. `uv run learn list` shows the tasks.
"""

import contextlib
import copy
import importlib
import io
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from common.course.learn.check import Mistake, Task
from common.data.tokenizers import CharTokenizer

CHAPTER = "phase1_foundation.project1_gpt"
TESTS = "phase1_foundation/project1_gpt/tests/"
SMALL = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)


def _config(module, **changes):
    """A small GPTConfig from `module` (model.py, the course's or yours)."""
    return module.GPTConfig(**{**SMALL, **changes})


def check_attention(course, yours, case):
    for fast in (False, True):
        path = "fast (scaled_dot_product_attention)" if fast else "explicit"
        for T in (1, 5, 16):
            with case(f"{path} path, T = {T}", given=f"x = torch.randn(2, {T}, 32), 4 heads") as c:
                ref = course.CausalSelfAttention(_config(course, fast_attention=fast)).eval()
                mine = yours.CausalSelfAttention(_config(yours, fast_attention=fast)).eval()
                mine.load_state_dict(ref.state_dict())
                x = torch.randn(2, T, 32)
                c.close(mine(x), ref(x))
    for fast in (False, True):
        path = "fast" if fast else "explicit"
        with case(f"{path} path without the mask (causal=False)", given="x = torch.randn(2, 9, 32)") as c:
            ref = course.CausalSelfAttention(_config(course, fast_attention=fast, causal=False)).eval()
            mine = yours.CausalSelfAttention(_config(yours, fast_attention=fast, causal=False)).eval()
            mine.load_state_dict(ref.state_dict())
            x = torch.randn(2, 9, 32)
            c.close(mine(x), ref(x))
        with case(f"{path} path in eval mode with dropout = 0.5: no dropout at all",
                  given="x = torch.randn(2, 7, 32), model.eval()") as c:
            ref = course.CausalSelfAttention(_config(course, fast_attention=fast, dropout=0.5)).eval()
            mine = yours.CausalSelfAttention(_config(yours, fast_attention=fast, dropout=0.5)).eval()
            mine.load_state_dict(ref.state_dict())
            x = torch.randn(2, 7, 32)
            c.close(mine(x), ref(x))
    with case("gradients flow back to the input", given="x = torch.randn(1, 6, 32), explicit path") as c:
        ref = course.CausalSelfAttention(_config(course, fast_attention=False)).eval()
        mine = yours.CausalSelfAttention(_config(yours, fast_attention=False)).eval()
        mine.load_state_dict(ref.state_dict())
        x1 = torch.randn(1, 6, 32, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_()
        (ref(x1) ** 2).sum().backward()
        (mine(x2) ** 2).sum().backward()
        c.close(x2.grad, x1.grad, "the input's gradient")


def check_block(course, yours, case):
    for pre_ln, name in ((False, "post-LN (GPT-1)"), (True, "pre-LN (GPT-2)")):
        for T in (1, 7):
            with case(f"{name}, T = {T}", given=f"x = torch.randn(2, {T}, 32) * 3 + 1") as c:
                ref = course.Block(_config(course, pre_ln=pre_ln)).eval()
                mine = yours.Block(_config(yours, pre_ln=pre_ln)).eval()
                for p in ref.parameters():  # LayerNorms away from the identity, so that each one counts
                    torch.nn.init.normal_(p, 0.5, 0.5)
                mine.load_state_dict(ref.state_dict())
                x = torch.randn(2, T, 32) * 3 + 1
                c.close(mine(x), ref(x), atol=1e-4)


def check_forward(course, yours, case):
    for pre_ln, name in ((False, "post-LN (GPT-1)"), (True, "pre-LN (GPT-2)")):
        for T in (1, 9, 16):
            with case(f"{name}, T = {T}: logits and the mean loss", given=f"idx, targets (3, {T}) random ids "
                      "below 23, some targets IGNORE") as c:
                ref = course.GPT(_config(course, pre_ln=pre_ln)).eval()
                for p in ref.parameters():  # LayerNorms away from the identity, so that each one counts
                    torch.nn.init.normal_(p, 0.2, 0.5)
                mine = yours.GPT(_config(yours, pre_ln=pre_ln)).eval()
                mine.load_state_dict(ref.state_dict())
                idx, targets = torch.randint(0, 23, (3, T)), torch.randint(0, 23, (3, T))
                targets[0, : T // 2] = course.IGNORE
                mine_out, ref_out = mine(idx, targets), ref(idx, targets)
                c.true(isinstance(mine_out, tuple) and len(mine_out) == 2, "return (logits, loss)")
                c.close(mine_out[0], ref_out[0], "the logits (B, T, V)", atol=1e-4)
                c.close(mine_out[1], ref_out[1], "the loss", atol=1e-5)
                c.true(mine(idx)[1] is None, "without targets the loss is None")
    with case("train mode, dropout 0.3: the embeddings' dropout where the course has it",
              given="idx (2, 6), model.train(), the same seed before each forward pass") as c:
        ref = course.GPT(_config(course, dropout=0.3)).train()
        mine = yours.GPT(_config(yours, dropout=0.3)).train()
        mine.load_state_dict(ref.state_dict())
        idx = torch.randint(0, 23, (2, 6))
        torch.manual_seed(5)
        ref_logits = ref(idx)[0]
        torch.manual_seed(5)
        c.close(mine(idx)[0], ref_logits, "the logits in train mode", atol=1e-4)
    with case("the head is the token table: its gradient reaches wte", given="idx, targets (2, 5)") as c:
        ref, mine = course.GPT(_config(course)).eval(), yours.GPT(_config(yours)).eval()
        mine.load_state_dict(ref.state_dict())
        idx, targets = torch.randint(0, 23, (2, 5)), torch.randint(0, 23, (2, 5))
        ref(idx, targets)[1].backward()
        mine(idx, targets)[1].backward()
        c.close(mine.wte.weight.grad, ref.wte.weight.grad, "the token table's gradient")
        c.close(mine.wpe.weight.grad, ref.wpe.weight.grad, "the position table's gradient")
    with case("a sequence longer than block_size (16) is refused with ValueError", given="idx (1, 17)") as c:
        try:
            yours.GPT(_config(yours)).eval()(torch.randint(0, 23, (1, 17)))
        except ValueError:
            pass
        else:
            c.fail("17 tokens went through a model of block_size 16; raise ValueError (a position table of "
                   "16 rows has no row for position 16)")


def _questions(data, n: int = 5):
    """n small multiple-choice questions, two or three candidates each, and a character tokenizer for them."""
    tokenizer = CharTokenizer.train(["abcdefgh xyz. river city"], data.SPECIAL_TOKENS)
    contexts = ("abc", "the river", "city of", "xyz", "fade")
    questions = [data.Question(contexts[i % 5], ["ab", "cd e", "xy"][: 2 + i % 2], i % 2) for i in range(n)]
    return tokenizer, questions


def check_finetune(course, yours, case):
    data = importlib.import_module(f"{CHAPTER}.download_data")
    model_module = importlib.import_module(f"{CHAPTER}.model")
    tokenizer, questions = _questions(data)
    settings = dict(FT_BATCH_SIZE=2, FT_LEARNING_RATE=3e-3, WEIGHT_DECAY=0.1, BETAS=(0.9, 0.99),
                    FT_WARMUP_RATIO=0.3, GRAD_CLIP=0.05)
    for lm_weight, steps in ((0.5, 7), (0.0, 4)):
        with case(f"{steps} steps, the LM loss weighted {lm_weight}: the same weights after as the course's",
                  given=f"5 questions in batches of 2 (epochs repeat), lr 3e-3, warmup 30%, clipping at "
                        f"0.05, FT_LM_WEIGHT = {lm_weight}") as c:
            cfg = SimpleNamespace(**settings, FT_LM_WEIGHT=lm_weight)
            encoded = course.encode(questions, tokenizer, 16)
            torch.manual_seed(1)
            gpt = model_module.GPT(model_module.GPTConfig(vocab_size=tokenizer.vocab_size, block_size=16,
                                                          n_layer=1, n_head=2, n_embd=16, dropout=0.0))
            start = course.MultipleChoiceGPT(gpt, dropout=0.0)
            ref, mine = copy.deepcopy(start), copy.deepcopy(start)
            with contextlib.redirect_stderr(io.StringIO()):  # the progress bars
                course.finetune(ref, encoded, steps, cfg, torch.device("cpu"), seed=3, desc="course")
                yours.finetune(mine, encoded, steps, cfg, torch.device("cpu"), seed=3, desc="yours")
            # Compared by what the loss sees, not weight by weight: a shift of every candidate's score
            # (the head's bias, the last LayerNorm's) has no gradient, and Adam turns its rounding noise
            # into steps of the learning rate's size, whichever way a correct loop rounds.
            x = course.trim(*encoded[:2])
            with torch.no_grad():
                (mine_scores, mine_logits), (ref_scores, ref_logits) = (model.eval()(x, encoded[1])
                                                                        for model in (mine, ref))
            c.close(F.log_softmax(mine_scores, -1), F.log_softmax(ref_scores, -1),
                    "each question's candidate log-probabilities after fine-tuning", atol=1e-4, rtol=1e-3)
            if lm_weight:
                c.close(course.lm_loss(mine_logits, x, encoded[1]), course.lm_loss(ref_logits, x, encoded[1]),
                        "the auxiliary LM loss after fine-tuning", atol=1e-4, rtol=1e-3)


def check_lm_loss(course, yours, case):
    for B, K, T, V in ((2, 1, 6, 12), (3, 2, 9, 17), (1, 3, 2, 5)):
        with case(f"{B * K} sequences of {T} tokens", given=f"ids (B={B}, K={K}, T={T}), random <|extract|> "
                  "positions, the padding after them random too") as c:
            ids = torch.randint(0, V, (B, K, T))
            extract_at = torch.randint(1, T, (B, K))
            logits = torch.randn(B * K, T, V)
            c.close(yours.lm_loss(logits, ids, extract_at), course.lm_loss(logits, ids, extract_at))
    with case("<|extract|> at the last position (no padding)", given="ids (2, 1, 5), extract_at = 4") as c:
        ids, extract_at, logits = torch.randint(0, 9, (2, 1, 5)), torch.full((2, 1), 4), torch.randn(2, 5, 9)
        c.close(yours.lm_loss(logits, ids, extract_at), course.lm_loss(logits, ids, extract_at))


def _tiny_gpt(seed: int):
    """A small GPT whose next-token distribution is far from uniform (the likeliest token about 1/3)."""
    model_module = importlib.import_module(f"{CHAPTER}.model")
    torch.manual_seed(seed)
    model = model_module.GPT(model_module.GPTConfig(vocab_size=12, block_size=8, n_layer=1, n_head=2,
                                                    n_embd=16, dropout=0.0)).eval()
    with torch.no_grad():
        model.wte.weight.normal_(0, 0.15)
    return model


def _contexts_fed(module, prompt: torch.Tensor) -> list[torch.Tensor]:
    """The contexts a greedy generate() of `module` feeds the model, step by step, whichever of the model's
    entry points it calls (model(...) or model.hidden_states(...))."""
    model, seen = _tiny_gpt(0), []
    for name in ("forward", "hidden_states"):
        original = getattr(model, name)

        def spy(context, *args, _original=original, **kwargs):
            if not seen or seen[-1] is not context:
                seen.append(context)
            return _original(context, *args, **kwargs)

        setattr(model, name, spy)
    module.generate(model, prompt, 3, top_k=1)
    return [context.clone() for context in seen]


def check_generate(course, yours, case):
    model = _tiny_gpt(0)
    prompt = torch.randint(0, 12, (3, 5))
    with case("top_k = 1 is greedy: the same tokens as the course", given="3 prompts of 5 tokens") as c:
        c.equal(yours.generate(model, prompt, 12, temperature=0.8, top_k=1),
                course.generate(model, prompt, 12, temperature=0.8, top_k=1))
    with case("a prompt longer than block_size (8) slides the window", given="prompt of 11 tokens") as c:
        long = torch.randint(0, 12, (2, 11))
        out = yours.generate(model, long, 3, top_k=1)
        c.equal(out, course.generate(model, long, 3, top_k=1))
    with case("the model is fed exactly the last block_size (8) tokens at every step",
              given="prompt of 11 tokens, 3 new ones: the contexts the model's forward receives") as c:
        long = torch.randint(0, 12, (2, 11))
        fed = {name: _contexts_fed(module, long) for name, module in (("yours", yours), ("course", course))}
        c.equal([t.shape[1] for t in fed["yours"]], [t.shape[1] for t in fed["course"]],
                "the context length fed to the model at each step")
        for step, (mine, ref) in enumerate(zip(fed["yours"], fed["course"], strict=True)):
            c.equal(mine, ref, f"the context fed at step {step}")
    N = 6000
    one = torch.randint(0, 12, (1, 4))
    with torch.no_grad():
        logits = model(one)[0][0, -1]  # (V,)
    for temperature, top_k in ((1.0, None), (0.5, None), (1.5, 4)):
        scaled = logits / temperature
        if top_k is not None:
            scaled = scaled.masked_fill(scaled < scaled.topk(top_k).values[-1], float("-inf"))
        expected = F.softmax(scaled, dim=-1)
        with case(f"{N:,} samples at temperature {temperature}, top_k {top_k}: the right frequencies",
                  given=f"one prompt repeated {N:,} times, one new token each") as c:
            out = yours.generate(model, one.expand(N, -1), 1, temperature=temperature, top_k=top_k)
            c.true(out.shape == (N, 5), f"returned shape {tuple(out.shape)}; expected ({N}, 5)")
            seen = torch.bincount(out[:, -1], minlength=12).double() / N
            never = (expected == 0) & (seen > 0)
            if never.any():
                c.fail(f"token {never.nonzero()[0].item()} was sampled, outside the top {top_k}")
            # 5 standard errors of a frequency, plus a little: a correct sampler fails about once in a million
            margin = 5 * (expected * (1 - expected) / N).sqrt() + 0.002
            off = (seen - expected).abs() > margin
            if off.any():
                t = off.nonzero()[0].item()
                c.fail(f"token {t} came {seen[t]:.3f} of the time; softmax(logits / temperature) gives it "
                       f"{expected[t]:.3f}")


def check_encode(course, yours, case):
    data = importlib.import_module(f"{CHAPTER}.download_data")
    tokenizer, question = CharTokenizer.train(["abcdefgh xyz."], data.SPECIAL_TOKENS), data.Question
    sets = {
        "two questions of two candidates":
            ([question("abc", ["xy", "z."], 1), question("de", ["f", "gh"], 0)], 32),
        "a context too long for block_size 16 (cut from the left)":
            ([question("abcdefgh hgf edc" * 2, ["xyz."], 0)], 16),
        "an ending longer than half of block_size 12": ([question("ab", ["abcdefghabcdefgh", "x"], 1)], 12),
        "three candidates of different lengths": ([question("hgf", ["a", "bb b", "ccc."], 2)], 20),
    }
    for name, (questions, block_size) in sets.items():
        with case(name, given=f"block_size = {block_size}") as c:
            mine, ref = yours.encode(questions, tokenizer, block_size), course.encode(questions, tokenizer,
                                                                                       block_size)
            c.true(isinstance(mine, tuple) and len(mine) == 3, "return (ids, extract_at, answers)")
            for what, a, b in zip(("ids (N, K, T)", "extract_at (N, K)", "answers (N,)"), mine, ref,
                                  strict=True):
                c.equal(a, b, what)


TASKS = [
    Task(
        id="1.attention",
        title="causal multi-head self-attention",
        file="phase1_foundation/project1_gpt/model.py",
        functions=("CausalSelfAttention.forward",),
        difficulty=2,
        asks="Project x to queries, keys and values, split them into n_head heads, score every query\n"
             "against every key scaled by 1/sqrt(head size), hide the future (self.causal), softmax, mix\n"
             "the values, join the heads and project. Two paths: self.fast uses\n"
             "F.scaled_dot_product_attention, the other builds the (T, T) scores itself with self.mask.\n"
             "Dropout: self.attn_dropout on the weights, self.resid_dropout on the output.",
        hints=(
            "Shapes: x is (B, T, C); self.c_attn(x) is (B, T, 3C); each head sees hs = C // n_head dims, so "
            "q, k and v become (B, nh, T, hs) with .view(B, T, nh, hs).transpose(1, 2).",
            "Every query against every key, scaled by 1/sqrt(hs): scores (B, nh, T, T), row i for query i. "
            "The mask self.mask[:T, :T] is True where query i may see key j (j <= i); fill the rest with "
            "-inf before the softmax over the last axis (the keys), not the queries'.",
            "After att @ v, (B, nh, T, hs) -> .transpose(1, 2).contiguous().view(B, T, C) puts the heads "
            "side by side again; on the fast path pass dropout_p only in training and is_causal=self.causal.",
        ),
        check=check_attention,
        tests=(TESTS + "test_model.py::test_logits_match_transformers",
               TESTS + "test_model.py::test_changing_token_t_never_changes_earlier_logits",
               TESTS + "test_model.py::test_attention_paths_agree_in_eval_and_in_train_without_dropout",
               TESTS + "test_model.py::test_dropout_acts_in_train_mode_only",
               TESTS + "test_model.py::test_causality_check_fails_without_the_mask"),
        mistakes=(
            Mistake("no 1/sqrt(hs) scaling", (("/ math.sqrt(k.size(-1))", ""),)),
            Mistake("the fast path always causal, whatever self.causal says",
                    (("is_causal=self.causal", "is_causal=True"),)),
            Mistake("attention dropout on the fast path in eval mode too",
                    (("dropout_p = self.dropout if self.training else 0.0", "dropout_p = self.dropout"),)),
            Mistake("the mask off by one: each query also sees the next key",
                    (("~self.mask[:T, :T]", "~torch.ones_like(self.mask[:T, :T]).tril(1)"),)),
            Mistake("softmax over the queries' axis instead of the keys'",
                    (("F.softmax(att, dim=-1)", "F.softmax(att, dim=-2)"),)),
            Mistake("heads split with view alone, without the transpose",
                    ((".view(B, T, self.n_head, C // self.n_head).transpose(1, 2)",
                      ".view(B, self.n_head, T, C // self.n_head)"),)),
            Mistake("heads joined without transposing back",
                    (("y.transpose(1, 2).contiguous().view(B, T, C)", "y.contiguous().view(B, T, C)"),)),
        ),
    ),
    Task(
        id="1.block",
        title="the decoder block, post-LN and pre-LN",
        file="phase1_foundation/project1_gpt/model.py",
        functions=("Block.forward",),
        difficulty=1,
        asks="Attention, then the MLP, each inside a residual connection. GPT-1 (post-LN) normalises the\n"
             "sum after each residual addition; GPT-2 (self.pre_ln) normalises only what each sub-block\n"
             "reads and adds its output to x unnormalised. Use self.ln_1 around attention and self.ln_2\n"
             "around the MLP.",
        hints=(
            "Two lines per branch: one for self.attn with self.ln_1, one for self.mlp with self.ln_2. x is "
            "(B, T, C) in and out, and so is every sub-block and LayerNorm.",
            "The branches differ only in where the LayerNorm sits: on the residual sum (post-LN), or on the "
            "sub-block's input alone, the stream x never normalised (pre-LN). Classic slips: normalising in "
            "both places, dropping a residual, or reusing ln_1 for the MLP.",
            "post-LN: x = self.ln_1(x + self.attn(x)), then the same for the MLP with ln_2. pre-LN: the "
            "attention reads self.ln_1(x) and its output is added to x, then the same for the MLP with ln_2.",
        ),
        check=check_block,
        tests=(TESTS + "test_model.py::test_logits_match_transformers",
               TESTS + "test_model.py::test_changing_token_t_never_changes_earlier_logits"),
        mistakes=(
            Mistake("GPT-1 written as pre-LN",
                    (("x = self.ln_1(x + self.attn(x))", "x = x + self.attn(self.ln_1(x))"),
                     ("x = self.ln_2(x + self.mlp(x))", "x = x + self.mlp(self.ln_2(x))"))),
            Mistake("the MLP's residual connection left out",
                    (("x = self.ln_2(x + self.mlp(x))", "x = self.ln_2(self.mlp(x))"),)),
            Mistake("pre-LN normalising the sum as well",
                    (("x = x + self.mlp(self.ln_2(x))", "x = self.ln_2(x + self.mlp(self.ln_2(x)))"),)),
            Mistake("both sub-blocks share one LayerNorm",
                    (("x = self.ln_2(x + self.mlp(x))", "x = self.ln_1(x + self.mlp(x))"),)),
        ),
    ),
    Task(
        id="1.forward",
        title="the GPT forward pass: embeddings, blocks, the tied head, the loss",
        file="phase1_foundation/project1_gpt/model.py",
        functions=("GPT.hidden_states", "GPT.forward"),
        difficulty=2,
        asks="hidden_states(idx): a sequence longer than block_size raises ValueError(\"... longer\n"
             "than block_size N\"); add each token's embedding (self.wte) to its position's (self.wpe,\n"
             "positions 0..T-1), dropout (self.drop), every block in turn, then self.ln_f.\n"
             "forward(idx, targets=None): the logits of self.lm_head (tied to wte), and with targets the\n"
             "mean cross-entropy over every target that is not IGNORE.",
        hints=(
            "Shapes: idx (B, T) ids; self.wte(idx) is (B, T, C); self.wpe(torch.arange(T)) is (T, C) and "
            "broadcasts over the batch. The blocks map (B, T, C) to (B, T, C); the head gives (B, T, V).",
            "The positions start at 0 and live on idx's device. self.ln_f is the identity for GPT-1 "
            "(post-LN) and a LayerNorm for GPT-2: apply it either way. F.cross_entropy wants (N, V) logits "
            "and (N,) targets.",
            "loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE); return "
            "(logits, None) without targets.",
        ),
        check=check_forward,
        tests=(TESTS + "test_model.py::test_logits_match_transformers",
               TESTS + "test_model.py::test_loss_matches_transformers",
               TESTS + "test_model.py::test_sequence_longer_than_block_size_is_refused",
               TESTS + "test_model.py::test_post_ln_has_no_final_layernorm_and_pre_ln_adds_one"),
        mistakes=(
            Mistake("positions counted from 1", (("torch.arange(T, device=idx.device)",
                                                  "torch.arange(1, T + 1, device=idx.device)"),)),
            Mistake("the final LayerNorm left out", (("return self.ln_f(x)", "return x"),)),
            Mistake("the loss summed over the targets, not averaged",
                    (("ignore_index=IGNORE)", "ignore_index=IGNORE, reduction='sum')"),)),
            Mistake("no position embedding", (("self.wte(idx) + self.wpe(pos)", "self.wte(idx)"),)),
            Mistake("no dropout on the embeddings",
                    (("x = self.drop(self.wte(idx) + self.wpe(pos))", "x = self.wte(idx) + self.wpe(pos)"),)),
        ),
    ),
    Task(
        id="1.loss",
        title="the shifted next-token loss up to <|extract|>",
        file="phase1_foundation/project1_gpt/finetune.py",
        functions=("lm_loss",),
        difficulty=2,
        asks="The auxiliary language-modelling loss of fine-tuning (GPT-1 §3.2): the logit at position t\n"
             "predicts the token at t + 1. Each sequence's targets stop at its <|extract|> token\n"
             "(extract_at); the padding after it is never a target (IGNORE). The mean over the targets kept.",
        hints=(
            "logits is (B*K, T, V); ids is (B, K, T). Flatten ids to (B*K, T). Which logits have a next "
            "token to predict, and which ids are those next tokens?",
            "Shift by one: the logits at positions 0 .. T-2 are scored against the ids at 1 .. T-1, so the "
            "last logits have no target. The <|extract|> token itself is still a target (the last one); the "
            "padding after it never is, and the first pad right after <|extract|> is the one that slips in.",
            "Targets are ids[:, 1:] against logits[:, :-1]. Target index p is ids[p + 1]: it is a real "
            "token while p < extract_at. Set the others to IGNORE and pass ignore_index=IGNORE to "
            "F.cross_entropy.",
        ),
        check=check_lm_loss,
        tests=(TESTS + "test_finetune.py::test_lm_loss_predicts_each_next_token_up_to_extract_and_ignores_the"
                       "_padding",),
        mistakes=(
            Mistake("the targets not shifted",
                    (("[:, 1:].clone()", ".clone()"), ("logits[:, :-1]", "logits"))),
            Mistake("the padding after <|extract|> counted as targets",
                    (("targets[positions >= extract_at.view(-1, 1)] = IGNORE", "pass"),)),
            Mistake("one target too many: the token after <|extract|>",
                    (("positions >= extract_at", "positions > extract_at"),)),
        ),
    ),
    Task(
        id="1.train_step",
        title="the training step: the schedule, the combined loss, backward, clipping, AdamW",
        file="phase1_foundation/project1_gpt/finetune.py",
        functions=("finetune",),
        difficulty=3,
        asks="GPT-1's fine-tuning loop (§3.2, §4.1), one optimisation step after another: AdamW\n"
             "through adamw() (decay on matrices only), the questions shuffled anew each epoch by a\n"
             "generator seeded with `seed`, batches of FT_BATCH_SIZE, the learning rate of warmup_linear\n"
             "(warmup over FT_WARMUP_RATIO of the steps, at least one) set before each step, the loss\n"
             "L2 + FT_LM_WEIGHT * L1 (the task's cross-entropy on the scores, plus lm_loss when the weight\n"
             "is not 0), backward, the gradients clipped to GRAD_CLIP, the optimizer's step, the gradients\n"
             "zeroed.",
        hints=(
            "Before the loop: ids, extract_at, answers = data; the optimizer; "
            "torch.Generator().manual_seed(seed) for the order; model.train(). Each epoch is "
            "ceil(len(answers) / FT_BATCH_SIZE) steps: draw a new torch.randperm with that generator at each "
            "epoch's first step.",
            "A batch: trim(ids[batch], extract_at[batch]) (the padding no candidate needs), moved to the "
            "device. model(x, e) gives (scores, logits); F.cross_entropy(scores, y) is L2, lm_loss(logits, "
            "x, e) is L1. Set the learning rate with set_lr before the forward pass.",
            "loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP); "
            "optimizer.step(); optimizer.zero_grad(set_to_none=True). Warmup: max(1, "
            "round(FT_WARMUP_RATIO * steps)) steps of warmup_linear, total_steps = steps.",
        ),
        check=check_finetune,
        tests=(TESTS + "test_exercises.py::test_ex5_finetunes_one_checkpoint_with_and_without_the_auxiliary"
                       "_loss",),
        mistakes=(
            Mistake("no gradient clipping",
                    (("torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)", "pass"),)),
            Mistake("the auxiliary LM loss left out",
                    (("loss = task + cfg.FT_LM_WEIGHT * lm_loss(logits, x, e) if cfg.FT_LM_WEIGHT else task",
                      "loss = task"),)),
            Mistake("the gradients never zeroed: they pile up step after step",
                    (("optimizer.zero_grad(set_to_none=True)", "pass"),)),
            Mistake("the questions shuffled once, not each epoch",
                    (("if step % steps_per_epoch == 0:", "if step == 0:"),)),
            Mistake("the learning rate never scheduled: the peak from the first step",
                    (("set_lr(optimizer, warmup_linear(",
                      "(lambda optimizer, lr: None)(optimizer, warmup_linear("),)),
        ),
    ),
    Task(
        id="1.sampling",
        title="sampling with temperature and top-k",
        file="phase1_foundation/project1_gpt/generate.py",
        functions=("generate",),
        difficulty=2,
        asks="Append max_new_tokens tokens one at a time: crop the context to the last block_size tokens,\n"
             "take the last position's logits, divide by temperature, keep only the top_k largest (when\n"
             "top_k is given), sample from the softmax with torch.multinomial, and append.",
        hints=(
            "model.lm_head(model.hidden_states(context)[:, -1]) is the (B, V) logits of the last position "
            "only; model(context)[0][:, -1] gives the same.",
            "The model knows only block_size positions: crop the context every step, not once. Temperature "
            "divides the logits before the softmax, not the probabilities; top-k sets the rest to -inf, so "
            "the softmax gives them exactly 0. Sample; argmax would be greedy.",
            "top-k: the k-th largest value is torch.topk(logits, min(top_k, V)).values[:, -1:], (B, 1); "
            "masked_fill everything below it with -inf. torch.multinomial on the softmax draws one id per "
            "row, (B, 1), to torch.cat onto idx along dim 1.",
        ),
        check=check_generate,
        tests=(TESTS + "test_model.py::test_generate_top_k_1_is_greedy_decoding",
               TESTS + "test_model.py::test_generate_samples_only_from_the_top_k"),
        mistakes=(
            Mistake("temperature multiplies instead of divides", (("/ temperature", "* temperature"),)),
            Mistake("top-k keeps k + 1 tokens",
                    (("min(top_k, logits.size(-1))", "min(top_k + 1, logits.size(-1))"),)),
            Mistake("the context not cropped to block_size",
                    (("idx[:, -model.config.block_size :]", "idx"),)),
            Mistake("the context cropped to block_size - 1",
                    (("idx[:, -model.config.block_size :]", "idx[:, -model.config.block_size + 1 :]"),)),
            Mistake("always the likeliest token, never a sample",
                    (("torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)",
                      "logits.argmax(-1, keepdim=True)"),)),
        ),
    ),
    Task(
        id="1.input_transform",
        title="fine-tuning's input transformation (§3.3)",
        file="phase1_foundation/project1_gpt/finetune.py",
        functions=("encode",),
        difficulty=2,
        asks="Each candidate becomes <|start|> context <|delim|> candidate <|extract|>: the candidate\n"
             "(encoded with a leading space) is cut to block_size // 2 tokens, and the context is cut from\n"
             "the left to fit block_size. Return the ids (N, K, T) zero-padded at the end, the position of\n"
             "each <|extract|> (N, K), and the answers (N,).",
        hints=(
            "One sequence per candidate, question by question: N·K lists of ids, then one (N·K, T) tensor "
            "viewed as (N, K, T). The three special ids come from tokenizer.token_to_id('<|start|>') and the "
            "like.",
            "Cut the candidate first (to block_size // 2 tokens), then give the context whatever room is "
            "left after the candidate and the 3 special tokens. The context loses its beginning, not its "
            "end: the end is what the candidate continues.",
            "room = block_size - len(ending) - 3, and context[-room:] keeps the context's end. T is the "
            "longest sequence, the others zero-padded at the end; extract_at is len(sequence) - 1.",
        ),
        check=check_encode,
        tests=(TESTS + "test_finetune.py::test_each_candidate_becomes_start_context_delim_candidate_extract",
               TESTS + "test_finetune.py::test_a_long_context_is_cut_from_the_left_so_the_ending_and_extract"
                       "_survive"),
        mistakes=(
            Mistake("the context cut from the right", (("*context[-room:]", "*context[:room]"),)),
            Mistake("extract_at one past the <|extract|> token",
                    (("len(seq) - 1 for seq", "len(seq) for seq"),)),
            Mistake("the candidate without its leading space",
                    (('tokenizer.encode(" " + candidate)', "tokenizer.encode(candidate)"),)),
            Mistake("no <|delim|> between context and candidate", (("delim, *ending", "*ending"),)),
        ),
    ),
]
