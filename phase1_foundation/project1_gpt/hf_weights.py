"""OpenAI's released GPT-1 in our model: loading a folder in the Hugging Face transformers layout.

transformers names the modules as OpenAI's code did: tokens_embed, positions_embed, h.{i}.attn.c_attn ...
The block's linear layers are OpenAI's "Conv1D", which stores its weight as (in, out); nn.Linear stores
(out, in), so those four weights are transposed. Everything else maps one to one.
"""

from pathlib import Path

import torch
from torch import Tensor

from common.errors import CourseError
from common.training.hf import read_hf_config, read_hf_weights
from phase1_foundation.project1_gpt.model import GPT, GPTConfig

_HF_PREFIXES = {"wte.": "tokens_embed.", "wpe.": "positions_embed.", "blocks.": "h."}
_CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
_HF_HINT = ("expected a folder written by OpenAIGPTLMHeadModel.save_pretrained "
            "(config.json + model.safetensors)")


def from_hf(folder: str | Path) -> GPT:
    """Load an OpenAI GPT saved in the Hugging Face transformers layout (e.g. OpenAI's released GPT-1).

    The folder holds config.json and model.safetensors or pytorch_model.bin, as written by
    OpenAIGPTLMHeadModel.save_pretrained. Anything else ends the program with one line saying what is wrong.
    """
    folder = Path(folder)
    hf = _read_hf_config(folder)
    config = GPTConfig(
        vocab_size=hf["vocab_size"],
        block_size=hf["n_positions"],
        n_layer=hf["n_layer"],
        n_head=hf["n_head"],
        n_embd=hf["n_embd"],
        dropout=hf.get("resid_pdrop", 0.1),  # the released model uses 0.1 for all three dropouts
    )
    model = GPT(config)
    weights = _read_hf_weights(folder)
    with torch.no_grad():
        for name, param in model.named_parameters():  # yields the tied head once, as wte.weight
            param.copy_(_hf_tensor(weights, name, param.shape, folder))
    return model


def _read_hf_config(folder: Path) -> dict:
    hf = read_hf_config(folder, "openai-gpt", _HF_HINT)
    path = Path(folder) / "config.json"
    # Our blocks: GELU (transformers' "gelu" here is the tanh form), LayerNorm eps 1e-5, a tied head.
    if hf.get("afn", "gelu") != "gelu" or hf.get("layer_norm_epsilon", 1e-5) != 1e-5:
        raise CourseError(f"error: {path} asks for afn={hf.get('afn')!r}, "
                          f"eps={hf.get('layer_norm_epsilon')}; "
                          "this GPT-1 supports only afn='gelu' and layer_norm_epsilon=1e-5")
    if not hf.get("tie_word_embeddings", True):
        raise CourseError(f"error: {path} has an untied output head; GPT-1 ties it to the token embedding")
    return hf


def _read_hf_weights(folder: Path) -> dict[str, Tensor]:
    # OpenAIGPTLMHeadModel prefixes "transformer."; a bare OpenAIGPTModel (and the original upload) does not.
    return {name.removeprefix("transformer."): t for name, t in read_hf_weights(folder, _HF_HINT).items()}


def _hf_tensor(weights: dict[str, Tensor], name: str, shape: torch.Size, folder: Path) -> Tensor:
    """The tensor transformers stores for our parameter `name`, in our layout."""
    prefix = next(p for p in _HF_PREFIXES if name.startswith(p))
    hf_name = _HF_PREFIXES[prefix] + name.removeprefix(prefix)
    if hf_name not in weights:
        raise CourseError(f"error: {folder} has no tensor {hf_name!r}; "
                          "it is not a complete OpenAI GPT checkpoint")
    tensor = weights[hf_name].t() if name.endswith(_CONV1D_WEIGHTS) else weights[hf_name]
    if tensor.shape != shape:
        raise CourseError(f"error: {hf_name!r} in {folder} has shape {tuple(tensor.shape)}, "
                          f"config.json implies {tuple(shape)}; the folder mixes files from different models")
    return tensor
