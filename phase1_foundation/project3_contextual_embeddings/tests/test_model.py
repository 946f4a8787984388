"""BERT model tests: parity with transformers' BertForPreTraining, padding, bidirectionality,
the paper's sizes."""

import dataclasses
import json
import math

import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from torch.nn import functional as F

from common.errors import CourseError
from common.training.checkpoint import save_checkpoint
from phase1_foundation.project3_contextual_embeddings.hf_weights import from_hf
from phase1_foundation.project3_contextual_embeddings.model import (
    BERT,
    KIND,
    BertConfig,
    rotary_angles,
    rotate,
)
from phase1_foundation.project3_contextual_embeddings.objectives import pretraining_loss
from phase1_foundation.project3_contextual_embeddings.pretraining_data import IGNORE

SMALL = BertConfig(vocab_size=101, block_size=16, n_layer=2, n_head=4, n_embd=32, dropout=0.0)
HF_SMALL = {"vocab_size": 101, "max_position_embeddings": 16, "num_hidden_layers": 2,
            "num_attention_heads": 4, "hidden_size": 32, "intermediate_size": 128}
PAD_ID = 0


def make(**changes) -> BERT:
    torch.manual_seed(0)
    return BERT(dataclasses.replace(SMALL, **changes)).eval()


def twin(model: BERT, **changes) -> BERT:
    """The same weights under different switches (attention path, dropout)."""
    other = BERT(dataclasses.replace(model.config, **changes))
    other.load_state_dict(model.state_dict())
    return other.train(model.training)


def tokens(batch: int = 3, length: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(5, SMALL.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))


def pair_batch(lengths=(16, 11, 6), seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded sentence pairs: ids, segment ids (A = 0, B = 1, padding 0) and the attention mask (1 = real)."""
    ids = tokens(len(lengths), max(lengths), seed)
    positions = torch.arange(ids.size(1))
    real = positions < torch.tensor(lengths)[:, None]  # (B, T)
    segments = ((positions >= torch.tensor(lengths)[:, None] // 2) & real).long()
    return ids.masked_fill(~real, PAD_ID), segments, real.long()


# ---- parity with transformers.BertForPreTraining --------------------------------------------------------


@pytest.fixture(scope="module")
def hf_model():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(transformers.BertConfig(**HF_SMALL)).eval()
    # tied, like ours
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    with torch.no_grad():  # randomise biases and LayerNorms too: a wrong mapping cannot hide behind 0 and 1
        for name, p in model.named_parameters():
            p.normal_(1.0 if name.endswith("LayerNorm.weight") else 0.0, 0.2)
    return model


def copy_hf_weights(hf, model: BERT, prefix: str = "bert") -> BERT:
    """Written independently of BERT.from_hf: our name <- transformers' name, over the state dicts. `prefix`
    "roformer" reads a RoFormerForMaskedLM: the same names, no position table, and no pooler or NSP head."""
    sd = hf.state_dict()
    ours = {
        "embeddings.token.weight": sd[f"{prefix}.embeddings.word_embeddings.weight"],
        "embeddings.segment.weight": sd[f"{prefix}.embeddings.token_type_embeddings.weight"],
        "mlm_head.decoder.weight": sd[f"{prefix}.embeddings.word_embeddings.weight"],
        "mlm_head.decoder.bias": sd["cls.predictions.bias"],
    }
    if prefix == "bert":
        ours |= {
            "embeddings.position.weight": sd["bert.embeddings.position_embeddings.weight"],
            "pooler.dense.weight": sd["bert.pooler.dense.weight"],
            "pooler.dense.bias": sd["bert.pooler.dense.bias"],
            # transformers' IsNext is row 0, ours row 1
            "nsp_head.weight": sd["cls.seq_relationship.weight"][[1, 0]],
            "nsp_head.bias": sd["cls.seq_relationship.bias"][[1, 0]],
        }
    for kind in ("weight", "bias"):
        ours[f"embeddings.norm.{kind}"] = sd[f"{prefix}.embeddings.LayerNorm.{kind}"]
        ours[f"mlm_head.dense.{kind}"] = sd[f"cls.predictions.transform.dense.{kind}"]
        ours[f"mlm_head.norm.{kind}"] = sd[f"cls.predictions.transform.LayerNorm.{kind}"]
        for i in range(model.config.n_layer):
            hf_layer = f"{prefix}.encoder.layer.{i}."
            qkv = [sd[f"{hf_layer}attention.self.{p}.{kind}"] for p in ("query", "key", "value")]
            ours[f"blocks.{i}.attn.c_attn.{kind}"] = torch.cat(qkv)
            for layer, hf_name in [("attn.c_proj", "attention.output.dense"),
                                   ("ln_1", "attention.output.LayerNorm"),
                                   ("mlp.c_fc", "intermediate.dense"), ("mlp.c_proj", "output.dense"),
                                   ("ln_2", "output.LayerNorm")]:
                ours[f"blocks.{i}.{layer}.{kind}"] = sd[hf_layer + hf_name + "." + kind]
    missing, unexpected = model.load_state_dict(ours, strict=False)
    heads = [] if prefix == "bert" else ["pooler.dense.weight", "pooler.dense.bias", "nsp_head.weight",
                                         "nsp_head.bias"]
    assert (sorted(missing), unexpected) == (sorted(heads), [])  # every other parameter is mapped
    return model


def hf_outputs(hf, ids, segments=None, mask=None):
    with torch.no_grad():
        out = hf(input_ids=ids, token_type_ids=segments, attention_mask=mask)
    return out.prediction_logits, out.seq_relationship_logits.flip(1)  # NSP in our label order


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "full"])
@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_logits_match_transformers(hf_model, fast, padded):
    model = copy_hf_weights(hf_model, make(fast_attention=fast))
    ids, segments, mask = pair_batch() if padded else (tokens(), None, None)
    expected_mlm, expected_nsp = hf_outputs(hf_model, ids, segments, mask)
    with torch.no_grad():
        mlm, nsp = model(ids, segments, mask)
    assert expected_mlm.abs().mean() > 0.5 and expected_nsp.abs().mean() > 0.1  # 1e-5 is a strict tolerance
    torch.testing.assert_close(mlm, expected_mlm, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(nsp, expected_nsp, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def roformer():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(**HF_SMALL, embedding_size=HF_SMALL["hidden_size"],
                                         hidden_act="gelu", layer_norm_eps=1e-12)
    model = transformers.RoFormerForMaskedLM(config).eval()
    with torch.no_grad():  # as for BERT: random biases and LayerNorms (the fixed table of angles stays)
        for name, p in model.named_parameters():
            if "embed_positions" not in name:
                p.normal_(1.0 if name.endswith("LayerNorm.weight") else 0.0, 0.2)
    return model


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "full"])
@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_rotary_positions_match_roformer(roformer, fast, padded):
    """RoFormer (Su et al. 2021) is BERT with rotary positions: the same encoder and MLM head, no position
    table. Our BERT with positions="rotary" gives its hidden states and MLM logits."""
    model = copy_hf_weights(roformer, make(fast_attention=fast, positions="rotary"), prefix="roformer")
    assert "position" not in model.embeddings
    ids, segments, mask = pair_batch() if padded else (tokens(), None, None)
    with torch.no_grad():
        expected = roformer(input_ids=ids, token_type_ids=segments, attention_mask=mask,
                            output_hidden_states=True)
        hidden, (mlm, _) = model.hidden_states(ids, segments, mask), model(ids, segments, mask)
    assert expected.logits.abs().mean() > 0.5  # 1e-5 is a strict tolerance
    torch.testing.assert_close(hidden, expected.hidden_states[-1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mlm, expected.logits, atol=1e-5, rtol=1e-5)


def test_rotary_scores_depend_on_the_offset_only():
    """The reason for rotary positions: q at position m and k at position n score q . k by n - m alone."""
    cos, sin = rotary_angles(64, 8)
    q, k = torch.randn(8), torch.randn(8)

    def score(m, n):
        qm = rotate(q.expand(1, 1, 64, 8), cos, sin)[0, 0, m]
        kn = rotate(k.expand(1, 1, 64, 8), cos, sin)[0, 0, n]
        return (qm @ kn).item()

    assert score(0, 3) == pytest.approx(score(20, 23), abs=1e-5) == pytest.approx(score(57, 60), abs=1e-5)
    assert score(0, 3) != pytest.approx(score(0, 4), abs=1e-3)
    assert score(5, 5) == pytest.approx((q @ k).item(), abs=1e-5)  # no offset: no turn at all


def test_rotary_bert_has_no_position_table_and_counts_the_rest():
    learned, rotary = make(), make(positions="rotary")
    table = SMALL.block_size * SMALL.n_embd
    assert rotary.num_parameters() == learned.num_parameters() - table
    assert rotary.num_parameters(non_embedding=True) == learned.num_parameters(non_embedding=True)
    assert not any("position" in name for name in rotary.state_dict())  # the angles are recomputed, not saved


def test_unknown_positions_or_an_odd_head_size_are_one_line():
    with pytest.raises(CourseError, match="unknown positions 'sinusoidal'; choose learned or rotary"):
        make(positions="sinusoidal")
    with pytest.raises(CourseError, match="head size \\(9\\) must be even"):
        BertConfig(vocab_size=10, n_embd=36, n_head=4, positions="rotary")


def test_pretraining_loss_matches_transformers(hf_model):
    """train.py's loss (objectives.py): MLM on the gathered positions + NSP with 1 = IsNext. transformers
    takes the same labels (IGNORE is its -100 too) with 0 = IsNext."""
    model = copy_hf_weights(hf_model, make())
    ids, segments, mask = pair_batch()
    chosen = (torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.3) & mask.bool()
    is_next = torch.tensor([1, 0, 1])
    labels = ids.masked_fill(~chosen, IGNORE)
    batch = dict(input_ids=ids, segment_ids=segments, attention_mask=mask, mlm_labels=labels,
                 nsp_labels=is_next)
    with torch.no_grad():
        loss, counts = pretraining_loss(model, batch, use_nsp=True)
        expected = hf_model(input_ids=ids, token_type_ids=segments, attention_mask=mask, labels=labels,
                            next_sentence_label=1 - is_next).loss
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    assert counts["mlm_count"] == chosen.sum() and counts["nsp_count"] == 3


def test_from_hf_round_trip_safetensors(hf_model, tmp_path):
    hf_model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    model = from_hf(tmp_path).eval()
    assert dataclasses.astuple(model.config)[:5] == (101, 16, 2, 4, 32)
    assert model.mlm_head.decoder.weight is model.embeddings.token.weight
    ids, segments, mask = pair_batch()
    with torch.no_grad():
        for got, expected in zip(model(ids, segments, mask), hf_outputs(hf_model, ids, segments, mask),
                                 strict=True):
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.state_dict(), copy_hf_weights(hf_model, make()).state_dict(),
                               atol=0, rtol=0)


def test_from_hf_pytorch_bin_with_tensorflow_names(hf_model, tmp_path):
    """Google's bert-base-uncased upload: pytorch_model.bin, LayerNorm gamma/beta, no decoder bias copy."""
    hf_model.config.save_pretrained(tmp_path)
    sd = {name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): t
          for name, t in hf_model.state_dict().items() if name != "cls.predictions.decoder.bias"}
    sd["bert.embeddings.position_ids"] = torch.arange(16)[None]  # old checkpoints stored it; ignored
    torch.save(sd, tmp_path / "pytorch_model.bin")
    model = from_hf(tmp_path).eval()
    ids, segments, mask = pair_batch()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, segments, mask)[0],
                                   hf_outputs(hf_model, ids, segments, mask)[0], atol=1e-5, rtol=1e-5)


def write_config(folder, **changes):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", **HF_SMALL, **changes}))
    return folder


def bad_folders(tmp_path):
    yield "missing", tmp_path / "nowhere", "is not a folder"
    yield "empty", tmp_path, "no config.json"
    yield "no weights", write_config(tmp_path / "a"), "no model.safetensors or pytorch_model.bin"
    yield "roberta", write_config(tmp_path / "b", model_type="roberta"), "holds a 'roberta' model, not 'bert'"
    yield "relu", write_config(tmp_path / "c", hidden_act="relu"), "supports only hidden_act='gelu'"
    yield "ffn", write_config(tmp_path / "d", intermediate_size=100), "supports only intermediate_size=128"
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "config.json").write_text("{not json")
    yield "bad json", tmp_path / "e", "not valid JSON"
    (write_config(tmp_path / "f") / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    yield "corrupt", tmp_path / "f", "cannot read the weights"
    (write_config(tmp_path / "g") / "pytorch_model.bin").write_bytes(b"not a zip")
    yield "corrupt bin", tmp_path / "g", "cannot read the weights"
    save_file({"bert.embeddings.word_embeddings.weight": torch.zeros(101, 32)},
              write_config(tmp_path / "h") / "model.safetensors")
    yield "incomplete", tmp_path / "h", "has no tensor 'bert.embeddings.position_embeddings.weight'"
    save_file({"bert.embeddings.word_embeddings.weight": torch.zeros(7, 32)},
              write_config(tmp_path / "i") / "model.safetensors")
    yield "wrong shape", tmp_path / "i", r"has shape \(7, 32\), config.json implies \(101, 32\)"


def test_from_hf_bad_folders_exit_with_one_line(tmp_path):
    for case, folder, message in bad_folders(tmp_path):
        with pytest.raises(CourseError, match=message) as exit_info:
            from_hf(folder)
        text = str(exit_info.value)
        assert text.startswith("error: ") and "\n" not in text, case


# ---- the paper's models ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("layers", "width", "heads", "count"),
    [(12, 768, 12, 110_106_428), (24, 1024, 16, 336_226_108)],  # PAPER: BERT §3, "110M" and "340M"
    ids=["base", "large"],
)
def test_paper_sizes_have_the_parameter_count_of_transformers(layers, width, heads, count):
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):  # shapes only: no 110M or 340M floats allocated
        ours = BERT(BertConfig(vocab_size=30522, n_layer=layers, n_head=heads, n_embd=width))
        theirs = transformers.BertForPreTraining(transformers.BertConfig(
            vocab_size=30522, num_hidden_layers=layers, hidden_size=width, num_attention_heads=heads,
            intermediate_size=4 * width, max_position_embeddings=512))
    assert ours.num_parameters() == theirs.num_parameters() == count
    per_block = 12 * width**2 + 13 * width  # 12C^2 weights, 9C biases, 4C LayerNorm
    tables = (30522 + 512 + 2) * width
    heads_ = (width**2 + width) + (width**2 + 3 * width + 30522) + (2 * width + 2)  # pooler, MLM head, NSP
    assert ours.num_parameters(non_embedding=True) == layers * per_block + 2 * width + heads_
    assert count == tables + 2 * width + layers * per_block + heads_


def test_post_ln_layout_pooler_and_tied_decoder():
    model = make()
    norms = sum(isinstance(m, nn.LayerNorm) for m in model.modules())
    assert norms == 2 * SMALL.n_layer + 2  # per block 2, the embedding sum, the MLM head; no final one
    assert all(m.eps == 1e-12 for m in model.modules() if isinstance(m, nn.LayerNorm))
    assert model.mlm_head.decoder.weight is model.embeddings.token.weight
    assert model.mlm_head.decoder.bias.shape == (SMALL.vocab_size,)
    names = {name for name, _ in model.named_parameters()}
    assert {"pooler.dense.weight", "nsp_head.weight", "blocks.0.attn.c_attn.bias"} <= names
    ids, segments, mask = pair_batch()
    with torch.no_grad():  # the pooler is trained state, not rebuilt in forward: same NSP logits every call
        assert torch.equal(model(ids, segments, mask)[1], model(ids, segments, mask)[1])


def test_initialisation_gives_uniform_predictions():
    model = make()
    assert 0.018 < model.blocks[0].attn.c_attn.weight.std().item() < 0.022  # N(0, 0.02)
    assert model.blocks[0].mlp.c_fc.bias.abs().max().item() == 0.0
    assert model.mlm_head.decoder.bias.abs().max().item() == 0.0
    ids = tokens()
    mlm, nsp = model(ids)
    targets = tokens(seed=2)  # unrelated to the inputs
    assert abs(F.cross_entropy(mlm.flatten(0, 1), targets.flatten()).item()
               - math.log(SMALL.vocab_size)) < 0.05
    assert abs(F.cross_entropy(nsp, torch.tensor([0, 1, 1])).item() - math.log(2)) < 0.05


def test_bad_head_count_is_one_line():
    with pytest.raises(CourseError, match="n_embd \\(32\\) is not divisible by n_head \\(5\\)"):
        BertConfig(vocab_size=10, n_embd=32, n_head=5)


# ---- forward ---------------------------------------------------------------------------------------------


def test_chosen_positions_gather_the_same_logits_as_full_scoring():
    model = make()
    ids, segments, mask = pair_batch()
    chosen = (torch.rand(ids.shape, generator=torch.Generator().manual_seed(3)) < 0.3) & mask.bool()
    with torch.no_grad():
        full, nsp = model(ids, segments, mask)
        gathered, nsp_gathered = model(ids, segments, mask, chosen=chosen)
    assert gathered.shape == (int(chosen.sum()), SMALL.vocab_size)
    torch.testing.assert_close(gathered, full[chosen], atol=1e-6, rtol=1e-6)
    assert torch.equal(nsp, nsp_gathered)


def test_segments_default_to_sentence_a_and_change_the_output():
    model = make()
    ids = tokens()
    with torch.no_grad():
        assert torch.equal(model(ids)[0], model(ids, torch.zeros_like(ids))[0])
        assert not torch.allclose(model(ids)[0], model(ids, torch.ones_like(ids))[0])


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_padding_never_changes_real_positions(fast):
    model = make(fast_attention=fast)
    ids = tokens(batch=2, length=7)
    segments = torch.tensor([[0, 0, 0, 1, 1, 1, 1]] * 2)
    with torch.no_grad():
        mlm, nsp = model(ids, segments)  # no padding at all
        for pad in (1, 4, 9):
            for value in (PAD_ID, 17):  # the mask decides, not the id written in the padding
                padded = F.pad(ids, (0, pad), value=value)
                mask = F.pad(torch.ones_like(ids), (0, pad))
                padded_mlm, padded_nsp = model(padded, F.pad(segments, (0, pad), value=1), mask)
                torch.testing.assert_close(padded_mlm[:, :7], mlm, atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(padded_nsp, nsp, atol=1e-5, rtol=1e-5)
        # The check can fail: without the mask, the real tokens read the padding.
        assert not torch.allclose(model(F.pad(ids, (0, 4)))[0][:, :7], mlm, atol=1e-3)


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_changing_a_later_token_changes_every_earlier_position(fast):
    """The opposite of GPT's causality test: position 0 sees the last token."""
    model = make(fast_attention=fast)
    ids = tokens(batch=2)
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % SMALL.vocab_size
    with torch.no_grad():
        before, after = model.hidden_states(ids), model.hidden_states(changed)
    assert all(not torch.allclose(before[:, t], after[:, t]) for t in range(ids.size(1)))


def test_attention_paths_agree_in_eval_and_in_train_without_dropout():
    fast = make().train()  # dropout is 0 in SMALL
    explicit = twin(fast, fast_attention=False)
    ids, segments, mask = pair_batch()
    chosen = mask.bool() & (ids % 3 == 0)
    for model in (fast, explicit):
        model.zero_grad()
        mlm, nsp = model(ids, segments, mask, chosen=chosen)
        (F.cross_entropy(mlm, ids[chosen]) + F.cross_entropy(nsp, torch.tensor([1, 0, 1]))).backward()
    for (name, p), q in zip(fast.named_parameters(), explicit.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5, msg=name)
    with torch.no_grad():
        for a, b in zip(fast.eval()(ids, segments, mask), explicit.eval()(ids, segments, mask), strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fast", [True, False], ids=["sdpa", "explicit"])
def test_dropout_acts_in_train_mode_only(fast):
    model = make(fast_attention=fast, dropout=0.5)
    ids, segments, mask = pair_batch()
    with torch.no_grad():
        assert torch.equal(model(ids, segments, mask)[0], model(ids, segments, mask)[0])
        model.train()
        assert not torch.allclose(model(ids, segments, mask)[0], model(ids, segments, mask)[0])


def test_sequence_longer_than_block_size_is_refused():
    with pytest.raises(ValueError, match="longer than block_size 16"):
        make()(tokens(length=17))



# ---- our own checkpoints ----------------------------------------------------------------------------------


def test_from_checkpoint_rebuilds_the_saved_model_and_refuses_another_chapters(tmp_path):
    model = make(fast_attention=False)
    state = {"model": model.state_dict(), "model_config": dataclasses.asdict(model.config), "step": 3}
    save_checkpoint(tmp_path / "bert_iter3_loss1.0000.pt", {"kind": KIND, **state})
    loaded, checkpoint = BERT.from_checkpoint("latest", tmp_path)
    assert loaded.config == model.config and not loaded.training and checkpoint["step"] == 3
    torch.testing.assert_close(loaded.state_dict(), model.state_dict(), atol=0, rtol=0)
    save_checkpoint(tmp_path / "other.pt", {"kind": "project1/gpt", **state})
    with pytest.raises(CourseError, match="written by project1/gpt, not project3/bert"):
        BERT.from_checkpoint(tmp_path / "other.pt")
