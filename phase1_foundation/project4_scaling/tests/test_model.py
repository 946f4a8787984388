"""The scaling sweep's GPT and its counters: parity with transformers' GPT-2, the two attention paths and
causality, the parameter counts against GPT-2 small's released size, the FLOP counts against a hand count of
Chinchilla's Appendix F and against the multiply-adds PyTorch measures, greedy decoding, and the config's
check."""

import dataclasses
import random

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from common.errors import CourseError
from phase1_foundation.project4_scaling.model import (
    GPT,
    GPTConfig,
    flops_per_token,
    non_embedding_parameters,
    total_parameters,
)

SMALL = GPTConfig(vocab_size=101, block_size=16, n_layer=2, n_head=4, n_embd=32)
HF_SMALL = {"vocab_size": 101, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
            "bos_token_id": None, "eos_token_id": None,  # the defaults (50256) are outside this vocabulary
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
            "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}  # gelu_new: GELU, tanh form
NORM_WEIGHTS = ("ln_1.weight", "ln_2.weight", "ln_f.weight")
CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def make(**changes) -> GPT:
    torch.manual_seed(0)
    return GPT(dataclasses.replace(SMALL, **changes)).eval()


def spread(model: torch.nn.Module) -> torch.nn.Module:
    """Every weight, bias and LayerNorm drawn from N(0, 0.2) (LayerNorm gains around 1): a wrong mapping
    cannot hide behind zeros and ones, and the logits lie far apart, so argmax meets no near-ties."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if name.endswith(NORM_WEIGHTS) else 0.0, 0.2)
    return model


def twin(model: GPT, **changes) -> GPT:
    """The same weights under different switches (the attention path)."""
    other = GPT(dataclasses.replace(model.config, **changes))
    other.load_state_dict(model.state_dict())
    return other.eval()


def tokens(batch: int = 3, length: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(SMALL.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))


def gpt2_small() -> GPT:
    with torch.device("meta"):  # shapes only: no memory allocated, no time spent drawing 124M numbers
        return GPT(GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768))


# ---- parity with transformers.GPT2LMHeadModel -----------------------------------------------------------


def hf_name(name: str) -> str:
    """GPT2LMHeadModel's name for our parameter `name`: blocks.i -> transformer.h.i, the rest under
    transformer. (the tied head is yielded once, as wte.weight, by both models)."""
    if name.startswith("blocks."):
        return "transformer.h." + name.removeprefix("blocks.")
    return "transformer." + name


def copy_into_hf(model: GPT, hf: torch.nn.Module) -> None:
    """Our weights into transformers' model. GPT-2 there uses Conv1D, which stores (in, out): the transpose of
    nn.Linear's (out, in)."""
    theirs = dict(hf.named_parameters())
    ours = {hf_name(name): (name, p) for name, p in model.named_parameters()}
    assert sorted(ours) == sorted(theirs)  # every parameter mapped, none left over
    with torch.no_grad():
        for key, (name, p) in ours.items():
            theirs[key].copy_(p.t() if name.endswith(CONV1D_WEIGHTS) else p)


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_logits_equal_transformers_gpt2(transformers, fast):
    model = spread(make(fast_attention=fast))
    torch.manual_seed(1)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**HF_SMALL)).eval()  # random weights
    assert hf.lm_head.weight is hf.transformer.wte.weight  # tied, like ours
    copy_into_hf(model, hf)
    ids = tokens()
    with torch.no_grad():
        expected = hf(ids).logits
        logits, _ = model(ids)
    assert expected.abs().mean() > 0.5  # logits of a useful size, so 1e-5 is a strict tolerance
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)


# ---- attention ------------------------------------------------------------------------------------------


def test_attention_paths_agree():
    fast = spread(make())
    explicit = twin(fast, fast_attention=False)
    ids = tokens()
    with torch.no_grad():
        a, b = fast(ids)[0], explicit(ids)[0]
        assert a.abs().mean() > 0.5
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-6)
        # in double precision the two paths are the same arithmetic up to rounding
        a64, b64 = fast.double()(ids)[0], explicit.double()(ids)[0]
        torch.testing.assert_close(a64, b64, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_changing_token_t_never_changes_earlier_logits(fast):
    model = spread(make(fast_attention=fast))
    ids = tokens(batch=2)
    with torch.no_grad():
        base, _ = model(ids)
        for t in range(ids.size(1)):
            changed = ids.clone()
            changed[:, t] = (changed[:, t] + 1) % SMALL.vocab_size
            logits, _ = model(changed)
            assert torch.equal(logits[:, :t], base[:, :t]), f"position < {t} saw token {t}"
            assert not torch.allclose(logits[:, t], base[:, t])  # the change itself is visible


# ---- parameter counts -----------------------------------------------------------------------------------


def test_gpt2_small_has_the_released_parameter_count():
    model = gpt2_small()
    assert model.num_parameters() == total_parameters(model.config) == 124_439_808
    assert model.num_parameters(non_embedding=True) == non_embedding_parameters(12, 768) == 85_056_000
    kaplan = 12 * 12 * 768**2  # PAPER: Kaplan et al. 2020, Eq. 2.1: N ≈ 12·n_layer·d_model², 84,934,656
    assert abs(kaplan / 85_056_000 - 1) < 0.01


def test_counts_match_the_formulas_for_random_shapes():
    rng = random.Random(0)
    for _ in range(8):
        n_head = rng.randint(1, 4)
        config = GPTConfig(vocab_size=rng.randint(5, 300), block_size=rng.randint(1, 64),
                           n_layer=rng.randint(1, 4), n_head=n_head, n_embd=n_head * rng.randint(1, 12))
        model = GPT(config)
        assert model.num_parameters() == total_parameters(config), config
        assert model.num_parameters(non_embedding=True) == non_embedding_parameters(
            config.n_layer, config.n_embd), config
        layers = ("blocks.", "ln_f.")
        by_hand = sum(p.numel() for name, p in model.named_parameters() if name.startswith(layers))
        assert model.num_parameters(non_embedding=True) == by_hand, config


def test_an_untied_head_counts_as_a_table():
    model = make()
    V, d = SMALL.vocab_size, SMALL.n_embd
    before, before_non_embedding = model.num_parameters(), model.num_parameters(non_embedding=True)
    model.lm_head.weight = torch.nn.Parameter(torch.randn(V, d))
    assert model.lm_head.weight is not model.wte.weight
    assert model.num_parameters(non_embedding=True) == before_non_embedding
    assert model.num_parameters() == before + V * d


# ---- FLOPs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(101, 16, 2, 4, 32), (50257, 1024, 12, 12, 768), (7, 3, 1, 1, 5)])
def test_6n_and_kaplan(shape):
    config = GPTConfig(*shape)
    V, T, L, nh, d = shape
    N = non_embedding_parameters(L, d)
    assert flops_per_token(config) == flops_per_token(config, "6N") == 6 * N
    assert flops_per_token(config, "kaplan") == 3 * (2 * N + 2 * L * T * d)  # PAPER: Kaplan Table 1


def test_chinchilla_against_a_hand_count_of_appendix_f():
    # vocab V = 10, seq_len T = 4, n_layer = 1, heads = 2, d_model = 8: key_size = 4, key_size·heads = 8,
    # ffw_size = 4·8 = 32
    embeddings = 640  # 2·T·V·d = 2·4·10·8
    qkv = 1536  # 2·3·T·d·(key_size·heads) = 2·3·4·8·8
    logits = 256  # 2·T·T·(key_size·heads) = 2·4·4·8
    softmax = 96  # 3·heads·T·T = 3·2·4·4
    values = 256  # 2·T·T·(key_size·heads) = 2·4·4·8
    output = 512  # 2·T·(key_size·heads)·d = 2·4·8·8
    attention = 2656  # 1536 + 256 + 96 + 256 + 512
    dense = 4096  # 2·T·(d·ffw + ffw·d) = 2·4·(8·32 + 32·8) = 8·512
    final_logits = 640  # 2·T·d·V = 2·4·8·10
    assert qkv + logits + softmax + values + output == attention
    forward = 8032  # embeddings + 1·(attention + dense) + final logits = 640 + 6752 + 640
    assert embeddings + 1 * (attention + dense) + final_logits == forward
    # per token: 8032 / 4 = 2008; training, 3 x the forward pass: 6024
    assert flops_per_token(GPTConfig(vocab_size=10, block_size=4, n_layer=1, n_head=2, n_embd=8),
                           "chinchilla") == 6024
    # two layers: 640 + 2·6752 + 640 = 14784 per sequence, 3696 per token, 11088 to train
    assert flops_per_token(GPTConfig(vocab_size=10, block_size=4, n_layer=2, n_head=2, n_embd=8),
                           "chinchilla") == 11088


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method must be"):
        flops_per_token(SMALL, "6ND")


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_measured_forward_flops_relate_to_kaplan_and_chinchilla(fast):
    """FlopCounterMode counts 2·m·n·k per matmul (the attention kernel as its two T x T products): of a
    forward pass it sees the matmuls, and neither the embedding lookups, biases, LayerNorms, GELU, nor the
    softmax."""
    config = GPTConfig(vocab_size=37, block_size=12, n_layer=3, n_head=2, n_embd=16, fast_attention=fast)
    V, T, L, nh, d, B = 37, 12, 3, 2, 16, 2
    model = GPT(config).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.zeros(B, T, dtype=torch.long))
    measured = counter.get_total_flops()

    weights = L * 12 * d * d  # the blocks' weight matrices; the rest of N is biases and LayerNorms
    attention = L * 2 * (2 * T * T * d)  # q·kᵀ and att·v, every query against all T keys, mask or not
    head = 2 * T * d * V
    assert measured == B * (2 * weights * T + attention + head)

    # Kaplan's forward per token is 2N + 2·L·n_ctx·d: it counts the biases and LayerNorms as weights, halves
    # the attention (a causal query sees n_ctx / 2 keys on average) and leaves out the head
    N = non_embedding_parameters(L, d)
    kaplan_forward = flops_per_token(config, "kaplan") / 3
    assert measured / (B * T) == kaplan_forward - 2 * (N - weights) + 2 * L * T * d + 2 * d * V

    # Chinchilla's forward pass counts the same matmuls plus the embedding lookup as a matmul and the softmax
    chinchilla_forward = flops_per_token(config, "chinchilla") * T / 3
    assert measured / B == chinchilla_forward - 2 * T * V * d - L * 3 * nh * T * T


# ---- greedy decoding ------------------------------------------------------------------------------------


def greedy_reference(model: GPT, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy decoding written out plainly: the whole (cropped) context, argmax, n times."""
    out = prompt
    with torch.no_grad():
        for _ in range(n):
            logits, _ = model(out[:, -model.config.block_size :])
            out = torch.cat((out, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    return out


@pytest.mark.parametrize("prompt_length", [5, 20], ids=["fills-then-slides", "longer-than-context"])
def test_greedy_returns_the_new_tokens_of_an_argmax_loop(prompt_length):
    model = spread(make())
    prompt = tokens(batch=2, length=prompt_length)
    new = model.greedy(prompt, 24)  # 16-token context: the window slides
    assert new.shape == (2, 24)
    expected = greedy_reference(model, prompt, 24)
    assert torch.equal(new, expected[:, prompt_length:])
    assert len(set(new.flatten().tolist())) > 1  # not one token repeated, which a broken loop could match


def test_sequence_longer_than_block_size_is_refused():
    model = make()
    model(tokens(length=16))  # a full context is fine
    with pytest.raises(ValueError, match="sequence of 17 tokens is longer than block_size 16"):
        model(tokens(length=17))


# ---- the config ----------------------------------------------------------------------------------------


def test_width_not_divisible_by_heads_exits_with_one_line():
    with pytest.raises(CourseError, match=r"n_embd \(30\) is not divisible by n_head \(4\)") as exit_info:
        GPTConfig(vocab_size=10, n_embd=30, n_head=4)
    text = str(exit_info.value)
    assert text.startswith("error: ") and "\n" not in text
