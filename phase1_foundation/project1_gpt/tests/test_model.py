"""GPT-1 model tests: parity with transformers' OpenAIGPT, the paper's parameter count,
causality, sampling."""

import dataclasses
import json
import math

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from common.errors import CourseError
from common.training.checkpoint import save_checkpoint
from phase1_foundation.project1_gpt.generate import generate
from phase1_foundation.project1_gpt.hf_weights import from_hf
from phase1_foundation.project1_gpt.model import GPT, KIND, GPTConfig

SMALL = GPTConfig(vocab_size=101, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)
HF_SMALL = {"vocab_size": 101, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4}


def make(**changes) -> GPT:
    torch.manual_seed(0)
    return GPT(dataclasses.replace(SMALL, **changes)).eval()


def twin(model: GPT, **changes) -> GPT:
    """The same weights under different switches (attention path, dropout)."""
    other = GPT(dataclasses.replace(model.config, **changes))
    other.load_state_dict(model.state_dict())
    return other.train(model.training)


def tokens(batch: int = 3, length: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(SMALL.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---- parity with transformers.OpenAIGPTLMHeadModel ------------------------------------------------------


@pytest.fixture(scope="module")
def hf_model():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.OpenAIGPTLMHeadModel(transformers.OpenAIGPTConfig(**HF_SMALL)).eval()
    assert model.lm_head.weight is model.transformer.tokens_embed.weight  # tied, like ours
    with torch.no_grad():  # randomise biases and LayerNorms too: a wrong mapping cannot hide behind 0 and 1
        for name, p in model.named_parameters():
            p.normal_(1.0 if name.endswith(("ln_1.weight", "ln_2.weight")) else 0.0, 0.2)
    return model


def copy_hf_weights(hf, model: GPT) -> GPT:
    """Written independently of from_hf. transformers' Conv1D stores (in, out), nn.Linear (out, in)."""
    sd = hf.transformer.state_dict()
    ours = {name: sd[hf_name] for name, hf_name in
            [("wte.weight", "tokens_embed.weight"), ("wpe.weight", "positions_embed.weight"),
             ("lm_head.weight", "tokens_embed.weight")]}
    for i in range(model.config.n_layer):
        for layer in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
            ours[f"blocks.{i}.{layer}.weight"] = sd[f"h.{i}.{layer}.weight"].t()
            ours[f"blocks.{i}.{layer}.bias"] = sd[f"h.{i}.{layer}.bias"]
        for norm in ("ln_1", "ln_2"):
            for kind in ("weight", "bias"):
                ours[f"blocks.{i}.{norm}.{kind}"] = sd[f"h.{i}.{norm}.{kind}"]
    model.load_state_dict(ours)  # strict: every parameter is mapped
    return model


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_logits_match_transformers(hf_model, fast):
    model = copy_hf_weights(hf_model, make(fast_attention=fast))
    ids = tokens()
    with torch.no_grad():
        expected = hf_model(ids).logits
        logits, _ = model(ids)
    assert expected.abs().mean() > 0.5  # logits of a useful size, so 1e-5 is a strict tolerance
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)


def test_loss_matches_transformers(hf_model):
    """transformers shifts labels inside; our forward takes targets already shifted by one."""
    model = copy_hf_weights(hf_model, make())
    ids = tokens()
    with torch.no_grad():
        expected = hf_model(ids, labels=ids).loss
        _, loss = model(ids[:, :-1], ids[:, 1:])
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)


def test_from_hf_round_trip_safetensors(hf_model, tmp_path):
    hf_model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    model = from_hf(tmp_path).eval()
    assert dataclasses.astuple(model.config)[:5] == (101, 16, 2, 4, 32)
    assert not model.config.pre_ln and model.lm_head.weight is model.wte.weight
    ids = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], hf_model(ids).logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.state_dict(), copy_hf_weights(hf_model, make()).state_dict(),
                               atol=0, rtol=0)


def test_from_hf_pytorch_bin_without_prefix(hf_model, tmp_path):
    """The original openai-gpt upload: pytorch_model.bin, names without "transformer.",
    mask buffers included."""
    hf_model.config.save_pretrained(tmp_path)
    sd = {name.removeprefix("transformer."): t for name, t in hf_model.state_dict().items()}
    sd["h.0.attn.bias"] = torch.tril(torch.ones(1, 1, 16, 16))  # old checkpoints stored the mask; ignored
    torch.save(sd, tmp_path / "pytorch_model.bin")
    model = from_hf(tmp_path).eval()
    ids = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], hf_model(ids).logits, atol=1e-5, rtol=1e-5)


def write_config(folder, **changes):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "openai-gpt", **HF_SMALL, **changes}))
    return folder


def bad_folders(tmp_path):
    yield "missing", tmp_path / "nowhere", "is not a folder"
    yield "empty", tmp_path, "no config.json"
    yield "no weights", write_config(tmp_path / "a"), "no model.safetensors or pytorch_model.bin"
    yield "gpt2", write_config(tmp_path / "b", model_type="gpt2"), "holds a 'gpt2' model"
    yield "relu", write_config(tmp_path / "c", afn="relu"), "supports only afn='gelu'"
    yield "untied", write_config(tmp_path / "d", tie_word_embeddings=False), "untied output head"
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "config.json").write_text("{not json")
    yield "bad json", tmp_path / "e", "not valid JSON"
    (write_config(tmp_path / "f") / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    yield "corrupt", tmp_path / "f", "cannot read the weights"
    (write_config(tmp_path / "g") / "pytorch_model.bin").write_bytes(b"not a zip")
    yield "corrupt bin", tmp_path / "g", "cannot read the weights"
    save_file({"tokens_embed.weight": torch.zeros(101, 32)},
              write_config(tmp_path / "h") / "model.safetensors")
    yield "incomplete", tmp_path / "h", "has no tensor 'positions_embed.weight'"
    save_file({"tokens_embed.weight": torch.zeros(7, 32)}, write_config(tmp_path / "i") / "model.safetensors")
    yield "wrong shape", tmp_path / "i", r"has shape \(7, 32\), config.json implies \(101, 32\)"


def test_from_hf_bad_folders_exit_with_one_line(tmp_path):
    for case, folder, message in bad_folders(tmp_path):
        with pytest.raises(CourseError, match=message) as exit_info:
            from_hf(folder)
        text = str(exit_info.value)
        assert text.startswith("error: ") and "\n" not in text, case


# ---- the paper's model ----------------------------------------------------------------------------------


def paper_model(**changes) -> GPT:
    with torch.device("meta"):  # shapes only: no 116M floats allocated
        return GPT(GPTConfig(vocab_size=40478, **changes))


def test_paper_configuration_has_the_released_parameter_count():
    model = paper_model()
    assert ((model.config.block_size, model.config.n_layer, model.config.n_head, model.config.n_embd)
            == (512, 12, 12, 768))
    assert model.num_parameters() == 116_534_784  # PAPER: released GPT-1 checkpoint
    per_block = 12 * 768**2 + 13 * 768  # 12C^2 weights, 9C biases, 4C LayerNorm
    assert model.num_parameters(non_embedding=True) == 12 * per_block == 85_054_464
    assert model.num_parameters() - model.num_parameters(non_embedding=True) == (40478 + 512) * 768


def test_flops_per_token_follows_kaplan_plus_the_head():
    kaplan = 6 * 85_054_464 + 6 * 12 * 512 * 768  # Table 1: 6N + 6 * n_layer * n_ctx * d_model
    head = 6 * 40_478 * 768  # the tied head's V x C matmul, which Kaplan leave out
    assert paper_model().flops_per_token() == kaplan + head == 725_160_960


def test_untied_head_is_counted_and_excluded_from_non_embedding():
    model = make()
    total, non_embedding = model.num_parameters(), model.num_parameters(non_embedding=True)
    model.lm_head.weight = nn.Parameter(model.wte.weight.detach().clone())
    assert model.num_parameters() == total + SMALL.vocab_size * SMALL.n_embd
    assert model.num_parameters(non_embedding=True) == non_embedding


def test_post_ln_has_no_final_layernorm_and_pre_ln_adds_one():
    def norms(model):
        return sum(isinstance(m, nn.LayerNorm) for m in model.modules())

    post, pre = make(), make(pre_ln=True)
    assert norms(post) == 2 * SMALL.n_layer and isinstance(post.ln_f, nn.Identity)
    assert norms(pre) == 2 * SMALL.n_layer + 1
    assert pre.num_parameters() == post.num_parameters() + 2 * SMALL.n_embd


def test_initialisation_gives_uniform_predictions():
    model = make()
    assert 0.018 < model.blocks[0].attn.c_attn.weight.std().item() < 0.022  # N(0, 0.02)
    assert model.blocks[0].mlp.c_fc.bias.abs().max().item() == 0.0
    _, loss = model(tokens(seed=1), tokens(seed=2))  # targets unrelated to the inputs
    assert abs(loss.item() - math.log(SMALL.vocab_size)) < 0.05


# ---- attention ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pre_ln", [False, True], ids=["post-ln", "pre-ln"])
@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_changing_token_t_never_changes_earlier_logits(fast, pre_ln):
    model = make(fast_attention=fast, pre_ln=pre_ln)
    ids = tokens(batch=2)
    with torch.no_grad():
        base, _ = model(ids)
        for t in range(ids.size(1)):
            changed = ids.clone()
            changed[:, t] = (changed[:, t] + 1) % SMALL.vocab_size
            logits, _ = model(changed)
            assert torch.equal(logits[:, :t], base[:, :t]), f"position < {t} saw token {t}"
            assert not torch.allclose(logits[:, t], base[:, t])  # the change itself is visible


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_causality_check_fails_without_the_mask(fast):
    """The check above can fail: with causal=False (exercise 2) both paths read the future, and agree."""
    model = make(fast_attention=fast, causal=False)
    ids = tokens(batch=2)
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % SMALL.vocab_size
    with torch.no_grad():
        assert not torch.allclose(model(changed)[0][:, 0], model(ids)[0][:, 0])
        torch.testing.assert_close(model(ids)[0], twin(model, fast_attention=not fast)(ids)[0],
                                   atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pre_ln", [False, True], ids=["post-ln", "pre-ln"])
def test_attention_paths_agree_in_eval_and_in_train_without_dropout(pre_ln):
    fast = make(pre_ln=pre_ln).train()  # dropout is 0 in SMALL
    explicit = twin(fast, fast_attention=False)
    ids = tokens()
    for model in (fast, explicit):
        model.zero_grad()
        model(ids, ids)[1].backward()
    torch.testing.assert_close(fast(ids)[0], explicit(ids)[0], atol=1e-5, rtol=1e-5)
    for (name, p), q in zip(fast.named_parameters(), explicit.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(fast.eval()(ids)[0], explicit.eval()(ids)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_dropout_acts_in_train_mode_only(fast):
    model = make(fast_attention=fast, dropout=0.5)
    ids = tokens()
    with torch.no_grad():
        assert torch.equal(model(ids)[0], model(ids)[0])
        model.train()
        assert not torch.allclose(model(ids)[0], model(ids)[0])


def test_sequence_longer_than_block_size_is_refused():
    with pytest.raises(ValueError, match="longer than block_size 16"):
        make()(tokens(length=17))


# ---- sampling -------------------------------------------------------------------------------------------


def test_generate_top_k_1_is_greedy_decoding():
    model = make()
    prompt = tokens(batch=2, length=3)
    expected = prompt
    with torch.no_grad():
        for _ in range(20):  # more than block_size: the context window slides
            logits, _ = model(expected[:, -SMALL.block_size :])
            expected = torch.cat((expected, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    out = generate(model, prompt, max_new_tokens=20, temperature=0.7, top_k=1)
    assert torch.equal(out, expected)


def test_generate_samples_only_from_the_top_k():
    model = make()
    prompt = tokens(batch=64, length=4)
    with torch.no_grad():
        allowed = model(prompt)[0][:, -1].topk(3).indices  # (64, 3)
    torch.manual_seed(0)
    out = generate(model, prompt, max_new_tokens=1, temperature=2.0, top_k=3)
    assert out.shape == (64, 5) and torch.equal(out[:, :4], prompt)
    assert (out[:, -1:] == allowed).any(dim=1).all()


# ---- our own checkpoints ----------------------------------------------------------------------------------


def test_from_checkpoint_rebuilds_the_saved_model_and_refuses_another_chapters(tmp_path):
    model = make(pre_ln=True, causal=False)
    state = {"model": model.state_dict(), "model_config": dataclasses.asdict(model.config), "step": 3}
    save_checkpoint(tmp_path / "gpt_iter3_loss1.0000.pt", {"kind": KIND, **state})
    loaded, checkpoint = GPT.from_checkpoint("latest", tmp_path)
    assert loaded.config == model.config and not loaded.training and checkpoint["step"] == 3
    torch.testing.assert_close(loaded.state_dict(), model.state_dict(), atol=0, rtol=0)
    save_checkpoint(tmp_path / "other.pt", {"kind": "project3/bert", **state})
    with pytest.raises(CourseError, match="written by project3/bert, not project1/gpt"):
        GPT.from_checkpoint(tmp_path / "other.pt")
