"""GPT-2 in transformers' layout, both ways: run OpenAI's released weights in our model, and hand our trained
model to anything that reads a GPT2LMHeadModel folder.

transformers keeps OpenAI's names (transformer.h.{i} is our blocks.{i}); its "Conv1D" stores a weight as
(in, out), nn.Linear as (out, in), so those four weights are transposed both ways. Older files also hold each
layer's causal mask (attn.bias, attn.masked_bias), not a learned weight, ignored here. README, "Code tour".
"""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import Tensor

from common.errors import CourseError
from common.files import write_atomic
from common.training.hf import read_hf_config, read_hf_weights
from phase1_foundation.project2_gpt2.model import GPT, GPTConfig

_CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
_HF_HINT = "expected a folder written by GPT2LMHeadModel.save_pretrained (config.json + model.safetensors)"
# Settings of transformers' GPT2Config that change the function the model computes, and the value this GPT-2
# implements (transformers' default, and the released models' value).
_HF_FIXED = {
    "activation_function": "gelu_new",  # GELU, tanh approximation
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
    "scale_attn_weights": True,  # scores divided by sqrt(hs)
    "scale_attn_by_inverse_layer_idx": False,  # scores also divided by the layer's number (a later variant)
    "reorder_and_upcast_attn": False,
    "add_cross_attention": False,
}


def from_hf(folder: str | Path) -> GPT:
    """Load a GPT-2 saved in the Hugging Face transformers layout (e.g. OpenAI's released models).

    The folder holds config.json and model.safetensors or pytorch_model.bin, as written by
    GPT2LMHeadModel.save_pretrained. Anything else ends the program with one line saying what is wrong.
    """
    folder = Path(folder)
    hf = _read_hf_config(folder)
    config = GPTConfig(
        vocab_size=hf["vocab_size"],
        block_size=hf["n_positions"],
        n_layer=hf["n_layer"],
        n_head=hf["n_head"],
        n_embd=hf["n_embd"],
        dropout=hf.get("resid_pdrop", 0.1),  # the released models use 0.1 for all three dropouts
    )
    model = GPT(config)
    weights = _read_hf_weights(folder)
    with torch.no_grad():
        for name, param in model.named_parameters():  # yields the tied head once, as wte.weight
            param.copy_(_hf_tensor(weights, name, param.shape, folder))
    return model


def to_hf(model: GPT, folder: str | Path, eos_id: int | None = None) -> Path:
    """Save in the layout GPT2LMHeadModel.from_pretrained reads (config.json, model.safetensors); return the
    folder. eos_id (<|endoftext|> for GPT-2's vocabulary) becomes the config's bos and eos token.

    Each file is written under a temporary name and renamed, so an interrupted save leaves no half file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    c = model.config
    hf_config = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
        "vocab_size": c.vocab_size, "n_positions": c.block_size, "n_ctx": c.block_size,
        "n_embd": c.n_embd, "n_layer": c.n_layer, "n_head": c.n_head,
        "activation_function": "gelu_new",  # transformers' name for GELU's tanh approximation
        "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "attn_pdrop": c.dropout,
        "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
        "bos_token_id": eos_id, "eos_token_id": eos_id,  # GPT-2 uses <|endoftext|> for both
    }
    # The tied matrix is stored once, as transformer.wte.weight (safetensors refuses two names for one
    # tensor); transformers ties lm_head.weight to it again on loading.
    weights = {"transformer." + _hf_name(name): _to_conv1d(name, param).detach().cpu().contiguous()
               for name, param in model.named_parameters()}
    text = json.dumps(hf_config, indent=2) + "\n"
    write_atomic(folder / "model.safetensors",
                 lambda path: save_file(weights, path, metadata={"format": "pt"}))
    write_atomic(folder / "config.json", text)
    return folder


def _hf_name(name: str) -> str:
    """transformers' name for our parameter `name`, without the "transformer." prefix."""
    return "h." + name.removeprefix("blocks.") if name.startswith("blocks.") else name


def _to_conv1d(name: str, tensor: Tensor) -> Tensor:
    """Our parameter in transformers' layout, or theirs in ours: the transpose is its own inverse."""
    return tensor.t() if name.endswith(_CONV1D_WEIGHTS) else tensor


def _read_hf_config(folder: Path) -> dict:
    hf = read_hf_config(folder, "gpt2", _HF_HINT)
    path = folder / "config.json"
    for key, ours in _HF_FIXED.items():
        if hf.get(key, ours) != ours:
            raise CourseError(f"error: {path} sets {key}={hf[key]!r}; this GPT-2 supports only "
                              f"{key}={ours!r}")
    if hf.get("n_inner") not in (None, 4 * hf.get("n_embd", 0)):
        raise CourseError(f"error: {path} sets n_inner={hf['n_inner']}; this GPT-2's MLP is 4 x n_embd wide")
    return hf


def _read_hf_weights(folder: Path) -> dict[str, Tensor]:
    # GPT2LMHeadModel prefixes "transformer."; a bare GPT2Model (and the original upload) does not.
    return {name.removeprefix("transformer."): t for name, t in read_hf_weights(folder, _HF_HINT).items()}


def _hf_tensor(weights: dict[str, Tensor], name: str, shape: torch.Size, folder: Path) -> Tensor:
    """The tensor transformers stores for our parameter `name`, in our layout."""
    hf_name = _hf_name(name)
    if hf_name not in weights:
        raise CourseError(f"error: {folder} has no tensor {hf_name!r}; it is not a complete GPT-2 checkpoint")
    tensor = _to_conv1d(name, weights[hf_name])
    if tensor.shape != shape:
        raise CourseError(f"error: {hf_name!r} in {folder} has shape {tuple(tensor.shape)}, "
                          f"config.json implies {tuple(shape)}; the folder mixes files from different models")
    return tensor
