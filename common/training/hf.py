"""Reading a model folder written by Hugging Face transformers' `save_pretrained`: config.json, weights.

Each chapter maps transformers' parameter names onto its own modules (that mapping is part of what the chapter
teaches); this module only reads the files, safely, and turns every way a folder can be wrong into one line
that says what to do.
"""

import json
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from common.errors import CourseError


def read_hf_config(folder: Path, model_type: str, hint: str) -> dict:
    """config.json of a transformers folder, checked to describe a `model_type` model. `hint` says what folder
    was expected, for the error messages."""
    folder = Path(folder)
    path = folder / "config.json"
    if not folder.is_dir():
        raise CourseError(f"error: {folder} is not a folder; {hint}")
    if not path.is_file():
        raise CourseError(f"error: no config.json in {folder}; {hint}")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CourseError(f"error: {path} is not valid JSON ({e}); download the model again") from None
    if config.get("model_type") != model_type:
        raise CourseError(f"error: {folder} holds a {config.get('model_type')!r} model, not {model_type!r}")
    return config


def read_hf_weights(folder: Path, hint: str) -> dict[str, torch.Tensor]:
    """Every tensor in model.safetensors (or in older uploads pytorch_model.bin), by transformers' names."""
    folder = Path(folder)
    path = folder / "model.safetensors"
    if not path.is_file():
        path = folder / "pytorch_model.bin"
    if not path.is_file():
        raise CourseError(f"error: no model.safetensors or pytorch_model.bin in {folder}; {hint}")
    try:
        if path.suffix == ".safetensors":
            return load_file(path)
        # weights_only: a .bin is a pickle, and a pickle from the internet could run code when loaded
        return torch.load(path, map_location="cpu", weights_only=True)
    except (SafetensorError, RuntimeError, pickle.UnpicklingError, EOFError):
        raise CourseError(f"error: cannot read the weights in {path} (truncated or not a weights file); "
                          "download the model again") from None
