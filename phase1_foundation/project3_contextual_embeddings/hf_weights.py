"""Google's released BERT in our model: loading a folder in the Hugging Face transformers layout.

transformers keeps google-research/bert's names (bert.embeddings.word_embeddings,
bert.encoder.layer.{i}.attention.self.query, ..., cls.predictions, cls.seq_relationship). Query, key and
value are three layers there and one (c_attn) here; and transformers' NSP class 0 is IsNext, ours is 1, so
the NSP head's two rows swap places. Everything else maps one to one.
"""

from pathlib import Path

import torch
from torch import Tensor

from common.errors import CourseError
from common.training.hf import read_hf_config, read_hf_weights
from phase1_foundation.project3_contextual_embeddings.model import BERT, LN_EPS, BertConfig

_HF_NAMES = [  # applied in order to our parameter name
    ("embeddings.token.", "bert.embeddings.word_embeddings."),
    ("embeddings.position.", "bert.embeddings.position_embeddings."),
    ("embeddings.segment.", "bert.embeddings.token_type_embeddings."),
    ("embeddings.norm.", "bert.embeddings.LayerNorm."),
    ("blocks.", "bert.encoder.layer."),
    (".attn.c_proj.", ".attention.output.dense."),
    (".ln_1.", ".attention.output.LayerNorm."),
    (".mlp.c_fc.", ".intermediate.dense."),
    (".mlp.c_proj.", ".output.dense."),
    (".ln_2.", ".output.LayerNorm."),
    ("pooler.dense.", "bert.pooler.dense."),
    ("mlm_head.dense.", "cls.predictions.transform.dense."),
    ("mlm_head.norm.", "cls.predictions.transform.LayerNorm."),
    ("mlm_head.decoder.bias", "cls.predictions.bias"),
    ("nsp_head.", "cls.seq_relationship."),
]
_HF_HINT = ("expected a folder written by BertForPreTraining.save_pretrained (config.json + "
            "model.safetensors), or by BertModel's for fine-tuning")


def _read_hf_config(folder: Path) -> dict:
    hf = read_hf_config(folder, "bert", _HF_HINT)
    # Our BERT implements exactly the released architecture; refuse variants rather than load them wrongly.
    expected = dict(hidden_act="gelu", layer_norm_eps=LN_EPS, type_vocab_size=2, tie_word_embeddings=True,
                    intermediate_size=4 * hf.get("hidden_size", 0), position_embedding_type="absolute")
    for key, value in expected.items():
        if hf.get(key, value) != value:
            raise CourseError(f"error: {Path(folder) / 'config.json'} has {key}={hf[key]!r}; "
                              f"this BERT supports only {key}={value!r}")
    return hf


def _read_hf_weights(folder: Path) -> dict[str, Tensor]:
    # Checkpoints converted from TensorFlow name the LayerNorm parameters gamma and beta.
    renamed = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}
    weights = {}
    for name, tensor in read_hf_weights(folder, _HF_HINT).items():
        for old, new in renamed.items():
            name = name.replace(old, new)
        weights[name] = tensor
    if not any(name.startswith("bert.") for name in weights):  # BertModel's own names lack the prefix
        weights = {f"bert.{name}": t for name, t in weights.items()}
    return weights


def hf_tensor(weights: dict[str, Tensor], name: str, shape: torch.Size, folder: Path) -> Tensor:
    """The tensor transformers stores for our parameter `name`, in our layout."""
    hf_name = name
    for ours, theirs in _HF_NAMES:
        hf_name = hf_name.replace(ours, theirs)
    parts = [hf_name]
    if ".attn.c_attn." in hf_name:  # (3C, C) = query, key and value stacked
        parts = [hf_name.replace(".attn.c_attn.", f".attention.self.{p}.") for p in ("query", "key", "value")]
    for part in parts:
        if part not in weights:
            raise CourseError(f"error: {folder} has no tensor {part!r}; it is not a complete "
                              "BertForPreTraining checkpoint (MLM and NSP need both pre-training heads; "
                              "fine-tuning needs the encoder and the pooler)")
    tensor = torch.cat([weights[part] for part in parts])
    if name.startswith("nsp_head."):
        tensor = tensor.flip(0)  # transformers: row 0 = IsNext; ours: row 1 = IsNext
    if tensor.shape != shape:
        raise CourseError(f"error: {' + '.join(parts)} in {folder} has shape {tuple(tensor.shape)}, "
                          f"config.json implies {tuple(shape)}; the folder mixes files from different models")
    return tensor


def from_hf(folder: str | Path, heads: bool = True) -> BERT:
    """Load a BERT saved in the Hugging Face transformers layout (e.g. Google's released
    bert-base-uncased).

    The folder holds config.json and model.safetensors or pytorch_model.bin, as written by
    BertForPreTraining.save_pretrained; with heads=False (fine-tuning, which reads only the encoder and
    the pooler) BertModel's folder will do too, and the pre-training heads keep their initial weights.
    Anything else ends the program with one line saying what is wrong.
    """
    folder = Path(folder)
    hf = _read_hf_config(folder)
    config = BertConfig(
        vocab_size=hf["vocab_size"],
        block_size=hf["max_position_embeddings"],
        n_layer=hf["num_hidden_layers"],
        n_head=hf["num_attention_heads"],
        n_embd=hf["hidden_size"],
        dropout=hf.get("hidden_dropout_prob", 0.1),  # the released models use 0.1 everywhere
    )
    model = BERT(config)
    weights = _read_hf_weights(folder)
    with torch.no_grad():
        for name, param in model.named_parameters():  # yields the tied decoder once, as the token table
            if heads or not name.startswith(("mlm_head.", "nsp_head.")):
                param.copy_(hf_tensor(weights, name, param.shape, folder))
    return model
