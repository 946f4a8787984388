"""GPT-2 model tests: parity with transformers' GPT-2 in both directions, the paper's parameter counts, the
residual initialisation, causality, the KV cache, and sampling."""

import dataclasses
import json
import math

import pytest
import torch
from safetensors.torch import save_file

from common.errors import CourseError
from common.training.checkpoint import save_checkpoint
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.generate import KVCache, filter_logits, generate, new_cache
from phase1_foundation.project2_gpt2.hf_weights import from_hf, to_hf
from phase1_foundation.project2_gpt2.model import GPT, KIND, GPTConfig

SMALL = GPTConfig(vocab_size=101, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)
HF_SMALL = {"vocab_size": 101, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
            "bos_token_id": None, "eos_token_id": None}  # the defaults (50256) are outside this vocabulary
NORM_WEIGHTS = ("ln_1.weight", "ln_2.weight", "ln_f.weight")


def make(**changes) -> GPT:
    torch.manual_seed(0)
    return GPT(dataclasses.replace(SMALL, **changes)).eval()


def spread(model: torch.nn.Module) -> torch.nn.Module:
    """Every weight, bias and LayerNorm drawn at random, larger than at initialisation. A wrong mapping
    cannot hide behind zeros and ones, and the logits lie far apart, so greedy decoding never meets a
    near-tie that rounding could break either way."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(1.0 if name.endswith(NORM_WEIGHTS) else 0.0, 0.2)
    return model


def twin(model: GPT, **changes) -> GPT:
    """The same weights under different switches (attention path, dropout)."""
    other = GPT(dataclasses.replace(model.config, **changes))
    other.load_state_dict(model.state_dict())
    return other.train(model.training)


def tokens(batch: int = 3, length: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(SMALL.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))


def attach_cache(model: GPT, batch: int) -> list[KVCache]:
    """An empty KVCache in every attention layer's slot, as generate() puts them there."""
    caches = new_cache(model, batch)
    for block, cache in zip(model.blocks, caches, strict=True):
        block.attn.cache = cache
    return caches


def greedy_reference(model: GPT, prompt: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy decoding written out plainly: the whole (cropped) context, argmax, n times."""
    out = prompt
    with torch.no_grad():
        for _ in range(n):
            logits, _ = model(out[:, -model.config.block_size :])
            out = torch.cat((out, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    return out


# ---- parity with transformers.GPT2LMHeadModel -----------------------------------------------------------


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_model(transformers):
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**HF_SMALL))
    assert model.lm_head.weight is model.transformer.wte.weight  # tied, like ours
    return spread(model).eval()


@pytest.fixture(scope="module")
def hf_folder(hf_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf")
    hf_model.save_pretrained(folder)
    assert (folder / "model.safetensors").is_file()
    return folder


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_from_hf_gives_transformers_logits(hf_model, hf_folder, fast):
    model = twin(from_hf(hf_folder), fast_attention=fast).eval()
    assert dataclasses.astuple(model.config)[:5] == (101, 16, 2, 4, 32)
    assert model.lm_head.weight is model.wte.weight
    ids = tokens()
    with torch.no_grad():
        expected = hf_model(ids).logits
        logits, _ = model(ids)
    assert expected.abs().mean() > 0.5  # logits of a useful size, so 1e-5 is a strict tolerance
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)


def test_loss_matches_transformers(hf_model, hf_folder):
    """transformers shifts labels inside; our forward takes targets already shifted by one."""
    model = from_hf(hf_folder).eval()
    ids = tokens()
    with torch.no_grad():
        expected = hf_model(ids, labels=ids).loss
        _, loss = model(ids[:, :-1], ids[:, 1:])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)


def test_to_hf_loads_in_transformers_which_computes_and_generates_the_same(transformers, tmp_path):
    model = spread(make())
    folder = to_hf(model, tmp_path / "ours", eos_id=100)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]  # no temp files
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    assert hf.lm_head.weight is hf.transformer.wte.weight  # re-tied from the one stored matrix
    assert hf.config.eos_token_id == hf.config.bos_token_id == 100
    ids = tokens()
    with torch.no_grad():
        torch.testing.assert_close(hf(ids).logits, model(ids)[0], atol=1e-5, rtol=1e-5)
    prompt = ids[:, :4]
    expected = hf.generate(prompt, max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert torch.equal(generate(model, prompt, 10, temperature=0), expected)


def test_to_hf_then_from_hf_is_exact(tmp_path):
    model = spread(make())
    loaded = from_hf(to_hf(model, tmp_path))
    assert loaded.config == model.config
    torch.testing.assert_close(loaded.state_dict(), model.state_dict(), atol=0, rtol=0)
    to_hf(model, tmp_path)  # saving over an earlier save replaces it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]


def test_from_hf_pytorch_bin_without_prefix(hf_model, tmp_path):
    """The original gpt2 upload: pytorch_model.bin, names without "transformer.", mask buffers included."""
    hf_model.config.save_pretrained(tmp_path)
    sd = {name.removeprefix("transformer."): t for name, t in hf_model.state_dict().items()}
    sd["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 16, 16))  # old checkpoints stored the mask; ignored
    sd["h.0.attn.masked_bias"] = torch.tensor(-1e4)
    torch.save(sd, tmp_path / "pytorch_model.bin")
    model = from_hf(tmp_path).eval()
    ids = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], hf_model(ids).logits, atol=1e-5, rtol=1e-5)


def write_config(folder, **changes):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", **HF_SMALL, **changes}))
    return folder


def bad_folders(tmp_path):
    yield "missing", tmp_path / "nowhere", "is not a folder"
    yield "empty", tmp_path, "no config.json"
    yield "bert", write_config(tmp_path / "a", model_type="bert"), "holds a 'bert' model, not 'gpt2'"
    yield "no weights", write_config(tmp_path / "b"), "no model.safetensors or pytorch_model.bin"
    yield "relu", write_config(tmp_path / "c", activation_function="relu"), "only activation_function"
    yield "eps", write_config(tmp_path / "d", layer_norm_epsilon=1e-6), "supports only layer_norm_epsilon"
    yield "untied", write_config(tmp_path / "e", tie_word_embeddings=False), "tie_word_embeddings=True"
    yield "layer scaling", write_config(tmp_path / "f", scale_attn_by_inverse_layer_idx=True), "inverse_layer"
    yield "upcast", write_config(tmp_path / "g", reorder_and_upcast_attn=True), "reorder_and_upcast_attn"
    yield "wide mlp", write_config(tmp_path / "h", n_inner=64), "n_inner=64"
    save_file({"transformer.wte.weight": torch.zeros(101, 32)},
              write_config(tmp_path / "i") / "model.safetensors")
    yield "incomplete", tmp_path / "i", "has no tensor 'wpe.weight'"
    save_file({"wte.weight": torch.zeros(7, 32)}, write_config(tmp_path / "j") / "model.safetensors")
    yield "wrong shape", tmp_path / "j", r"has shape \(7, 32\), config.json implies \(101, 32\)"


def test_from_hf_bad_folders_exit_with_one_line(tmp_path):
    for case, folder, message in bad_folders(tmp_path):
        with pytest.raises(CourseError, match=message) as exit_info:
            from_hf(folder)
        text = str(exit_info.value)
        assert text.startswith("error: ") and "\n" not in text, case


# ---- the paper's models ---------------------------------------------------------------------------------


def paper_model(size: str) -> GPT:
    sizes = {name.lower(): value for name, value in config.GPT2_SIZES[size].items()}
    with torch.device("meta"):  # shapes only: no memory allocated for 1.5B floats
        return GPT(GPTConfig(vocab_size=config.GPT2_VOCAB, block_size=config.GPT2_CONTEXT, **sizes))


@pytest.mark.parametrize("size, count", [("gpt2", 124_439_808), ("gpt2-medium", 354_823_168),
                                         ("gpt2-large", 774_030_080), ("gpt2-xl", 1_557_611_200)])
def test_the_four_sizes_have_the_released_parameter_counts(size, count):
    model = paper_model(size)
    assert model.num_parameters() == count
    L, C = model.config.n_layer, model.config.n_embd
    per_block = 12 * C**2 + 13 * C  # 12C^2 weights, 9C biases, 4C LayerNorm
    assert model.num_parameters(non_embedding=True) == L * per_block + 2 * C  # + the final LayerNorm
    assert count - model.num_parameters(non_embedding=True) == (50257 + 1024) * C  # tied head counted once


def test_default_config_is_gpt2_small():
    assert GPTConfig() == paper_model("gpt2").config


def test_flops_per_token_follows_kaplan_plus_the_head():
    kaplan = 6 * 85_056_000 + 6 * 12 * 1024 * 768  # Table 1: 6N + 6 * n_layer * n_ctx * d_model
    head = 6 * 50_257 * 768  # the tied head's V x C matmul, which Kaplan leave out
    assert paper_model("gpt2").flops_per_token() == kaplan + head


def test_residual_projections_start_smaller_by_sqrt_of_twice_the_depth():
    torch.manual_seed(0)
    model = GPT(dataclasses.replace(SMALL, n_layer=24, n_embd=64))
    scaled = 0.02 / math.sqrt(2 * 24)  # PAPER: GPT-2 §2.3, 1/sqrt(N), counting 2 residual layers per block
    for name, p in model.named_parameters():
        if name.endswith("c_proj.weight"):
            expected = scaled
        elif name.endswith("weight") and p.dim() == 2:
            expected = 0.02
        elif name.endswith(NORM_WEIGHTS):
            assert torch.equal(p, torch.ones_like(p)), name
            continue
        else:  # biases, LayerNorms' shifts
            assert torch.equal(p, torch.zeros_like(p)), name
            continue
        assert abs(p.std().item() / expected - 1) < 0.05, name
    with torch.no_grad():  # an untrained model predicts every token about equally
        _, loss = model.eval()(tokens(seed=1), tokens(seed=2))
    assert abs(loss.item() - math.log(SMALL.vocab_size)) < 0.05


# ---- attention ------------------------------------------------------------------------------------------


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


def test_attention_paths_agree_in_values_and_gradients():
    fast = spread(make()).train()  # dropout is 0 in SMALL
    explicit = twin(fast, fast_attention=False)
    ids = tokens()
    for model in (fast, explicit):
        model.zero_grad()
        model(ids, ids)[1].backward()
    torch.testing.assert_close(fast(ids)[0], explicit(ids)[0], atol=1e-5, rtol=1e-5)
    for (name, p), q in zip(fast.named_parameters(), explicit.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_dropout_acts_in_train_mode_only(fast):
    model = make(fast_attention=fast, dropout=0.5)
    ids = tokens()
    with torch.no_grad():
        assert torch.equal(model(ids)[0], model(ids)[0])
        model.train()
        assert not torch.allclose(model(ids)[0], model(ids)[0])


def test_sequence_longer_than_block_size_is_refused():
    model = make()
    with pytest.raises(ValueError, match="sequence of 17 tokens is longer than block_size 16"):
        model(tokens(length=17))
    with pytest.raises(ValueError, match="sequence of 17 tokens is longer than block_size 16"):
        model.hidden_states(tokens(length=5), start=12)  # after 12 cached positions


# ---- the KV cache ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_cached_logits_equal_the_full_forward_pass(fast):
    model = spread(make(fast_attention=fast))
    ids = tokens()  # (3, 16): a full context
    with torch.no_grad():
        full, _ = twin(model, fast_attention=True)(ids)  # (3, 16, V): the fused path, without a cache
        caches = attach_cache(model, 3)
        prefill, _ = model(ids[:, :5])  # the prompt at once, causal within it
        torch.testing.assert_close(prefill, full[:, :5], atol=1e-5, rtol=1e-5)
        for t in range(5, 16):  # then one token at a time, attending over all cached keys
            logits = model.lm_head(model.hidden_states(ids[:, t : t + 1], start=t))  # (3, 1, V)
            torch.testing.assert_close(logits, full[:, t : t + 1], atol=1e-5, rtol=1e-5)
        assert [cache.length for cache in caches] == [16] * SMALL.n_layer


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_a_cache_that_holds_positions_takes_one_new_token_at_a_time(fast):
    """Several new queries after cached keys would need an offset mask that the fused path is not given."""
    model = make(fast_attention=fast)
    ids = tokens()
    caches = attach_cache(model, 3)
    with torch.no_grad():
        model(ids[:, :4])
        with pytest.raises(ValueError, match=r"holds positions \(4\) takes one new token at a time, not 5"):
            model.hidden_states(ids[:, 4:9], start=4)
    assert caches[0].length == 4  # the refused tokens were not stored


def test_generate_takes_its_caches_out_of_the_model_even_when_it_raises():
    """Training after generating must run without a cache: a forgotten one would grow with every batch."""
    model = spread(make())
    generate(model, tokens(batch=1, length=5), 20, use_cache=True)
    assert all(block.attn.cache is None for block in model.blocks)

    def stop(new: torch.Tensor) -> bool:
        assert all(isinstance(block.attn.cache, KVCache) for block in model.blocks)  # attached while it runs
        if new.size(1) == 3:
            raise RuntimeError("the caller's stop test failed")
        return False

    with pytest.raises(RuntimeError, match="stop test failed"):
        generate(model, tokens(batch=1, length=5), 20, stop=stop, use_cache=True)
    assert all(block.attn.cache is None for block in model.blocks)
    model(tokens())  # a full batch, as training feeds it, goes through with no cache to refuse it


@pytest.mark.parametrize("prompt_length", [5, 20], ids=["fills-then-slides", "longer-than-context"])
@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_greedy_with_cache_equals_greedy_without(fast, prompt_length):
    """64 tokens with a 16-token context: the window slides 50+ times, and the cache is refilled each time."""
    model = spread(make(fast_attention=fast))
    prompt = tokens(batch=2, length=prompt_length)
    expected = greedy_reference(model, prompt, 64)
    assert torch.equal(generate(model, prompt, 64, temperature=0, use_cache=True), expected)
    assert torch.equal(generate(model, prompt, 64, temperature=0, use_cache=False), expected)


def test_cache_feeds_the_prompt_then_one_token_until_the_context_is_full():
    model = spread(make())
    fed, scored = [], []  # tokens per forward pass; the input shape of each use of the output head
    model.wte.register_forward_hook(lambda module, inputs, output: fed.append(inputs[0].size(1)))
    model.lm_head.register_forward_hook(lambda module, inputs, output: scored.append(tuple(inputs[0].shape)))
    generate(model, tokens(batch=1, length=5), 20, use_cache=True)
    # 5 prompt tokens, then 1 per step until 16 are cached; then the window slides and positions shift
    assert fed == [5] + [1] * 11 + [16] * 8
    fed.clear()
    generate(model, tokens(batch=1, length=5), 20, use_cache=False)
    assert fed == list(range(5, 17)) + [16] * 8
    # Either way the head scores the last position alone, once per step: (B, C), never (B, T, C).
    assert scored == [(1, SMALL.n_embd)] * 40


# ---- sampling -------------------------------------------------------------------------------------------


def kept(logits: torch.Tensor, **filters) -> list[set[int]]:
    """The tokens filter_logits leaves drawable in each row, checking that it leaves their scores alone."""
    out = filter_logits(logits, **filters)
    finite = out.isfinite()
    assert torch.equal(out[finite], logits[finite])
    return [set(row.nonzero().flatten().tolist()) for row in finite]


def test_top_p_keeps_the_smallest_set_reaching_p():
    # probabilities 0.5, 0.3, 0.15, 0.05 for tokens 2, 0, 3, 1 (row 0) and 1, 3, 0, 2 (row 1)
    logits = torch.tensor([[0.3, 0.05, 0.5, 0.15], [0.15, 0.5, 0.05, 0.3]]).log()
    assert kept(logits, top_p=1e-9) == [{2}, {1}]  # the likeliest token is always kept
    assert kept(logits, top_p=0.4) == [{2}, {1}]  # 0.5 crosses 0.4: kept, and enough
    assert kept(logits, top_p=0.5 - 1e-4) == [{2}, {1}]
    assert kept(logits, top_p=0.5 + 1e-4) == [{2, 0}, {1, 3}]  # 0.5 falls short: the 0.3 token crosses
    assert kept(logits, top_p=0.8 - 1e-4) == [{2, 0}, {1, 3}]
    assert kept(logits, top_p=0.8 + 1e-4) == [{2, 0, 3}, {1, 3, 0}]
    assert kept(logits, top_p=0.99) == [{0, 1, 2, 3}] * 2  # 0.95 falls short: the last token crosses
    assert kept(logits, top_p=0.99, top_k=2) == [{2, 0}, {1, 3}]  # top-k first, then the nucleus


def test_top_p_1_keeps_every_token_however_unlikely():
    logits = torch.tensor([[0.0, -40.0, -80.0]])  # probabilities 1 - 4e-18, 4e-18, 2e-35
    assert kept(logits, top_p=1.0) == [{0, 1, 2}]
    assert kept(logits, top_p=0.999) == [{0}]


def test_top_k_keeps_the_k_highest_scores():
    logits = torch.tensor([[0.1, 2.0, -1.0, 3.0, 0.5]])
    assert kept(logits, top_k=1) == [{3}]
    assert kept(logits, top_k=3) == [{3, 1, 4}]
    assert kept(logits, top_k=99) == [{0, 1, 2, 3, 4}]


def test_top_k_1_and_temperature_0_are_greedy():
    model = spread(make())
    prompt = tokens(batch=2, length=3)
    expected = greedy_reference(model, prompt, 20)
    assert torch.equal(generate(model, prompt, 20, temperature=0.7, top_k=1), expected)
    assert torch.equal(generate(model, prompt, 20, temperature=0), expected)


def test_generate_samples_only_from_the_top_k():
    model = spread(make())
    prompt = tokens(batch=64, length=4)
    with torch.no_grad():
        allowed = model(prompt)[0][:, -1].topk(3).indices  # (64, 3)
    out = generate(model, prompt, 1, temperature=2.0, top_k=3, generator=torch.Generator().manual_seed(0))
    assert out.shape == (64, 5) and torch.equal(out[:, :4], prompt)
    assert (out[:, -1:] == allowed).any(dim=1).all()


def test_a_seeded_generator_repeats_a_sample():
    model = spread(make())
    prompt = tokens(batch=4, length=3)

    def sample(seed):
        return generate(model, prompt, 20, top_p=0.9, generator=torch.Generator().manual_seed(seed))

    assert torch.equal(sample(1), sample(1))
    assert not torch.equal(sample(1), sample(2))


def test_generation_stops_when_every_row_has_emitted_eos():
    model = spread(make())
    prompt = tokens(batch=3, length=4)
    free = greedy_reference(model, prompt, 30)[:, 4:]  # (3, 30) without stopping
    eos = free[0, 2].item()  # row 0 emits it at its third token; the others later or never
    firsts = [row.tolist().index(eos) if eos in row else 30 for row in free]
    out = generate(model, prompt, 30, temperature=0, eos_id=eos)[:, 4:]
    assert out.size(1) == min(max(firsts) + 1, 30)  # ends with the step the last row finished
    for row, generated, first in zip(free, out, firsts, strict=True):
        n = min(first + 1, out.size(1))
        assert torch.equal(generated[:n], row[:n])  # as without eos_id, up to the row's eos
        assert (generated[n:] == eos).all()  # a finished row keeps emitting eos
    one_row = generate(model, prompt[:1], 30, temperature=0, eos_id=eos)
    assert one_row.size(1) == 4 + 3 and one_row[0, -1] == eos


def test_generation_stops_when_stop_says_so():
    model = spread(make())
    seen = []

    def stop(new):
        seen.append(tuple(new.shape))
        return new.size(1) == 5

    out = generate(model, tokens(batch=2, length=4), 30, stop=stop)
    assert out.shape == (2, 4 + 5)
    assert seen == [(2, n) for n in range(1, 6)]  # only the generated tokens, never the prompt


def test_generate_refuses_an_empty_prompt_and_settings_that_leave_no_token():
    model = make()
    with pytest.raises(ValueError, match="prompt is empty"):
        generate(model, tokens(length=0), 5)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        generate(model, tokens(length=3), 5, temperature=-1.0)
    for filters in (dict(top_k=0), dict(top_p=0.0)):
        with pytest.raises(ValueError, match="top_k must be >= 1 and top_p > 0"):
            generate(model, tokens(length=3), 5, **filters)


# ---- our own checkpoints ----------------------------------------------------------------------------------


def test_from_checkpoint_rebuilds_the_saved_model_and_refuses_another_chapters(tmp_path):
    model = make(fast_attention=False)
    state = {"model": model.state_dict(), "model_config": dataclasses.asdict(model.config), "step": 3}
    save_checkpoint(tmp_path / "gpt2_iter3_loss1.0000.pt", {"kind": KIND, **state})
    loaded, checkpoint = GPT.from_checkpoint("latest", tmp_path)
    assert loaded.config == model.config and not loaded.training and checkpoint["step"] == 3
    torch.testing.assert_close(loaded.state_dict(), model.state_dict(), atol=0, rtol=0)
    save_checkpoint(tmp_path / "other.pt", {"kind": "project1/gpt", **state})
    with pytest.raises(CourseError, match="written by project1/gpt, not project2/gpt2"):
        GPT.from_checkpoint(tmp_path / "other.pt")
