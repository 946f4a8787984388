"""common/training/hf.py: reading a transformers folder (config.json, then safetensors or a weights-only
.bin), and every way such a folder can be wrong ending in one line that says what to do."""

import json

import pytest
import torch
from safetensors.torch import save_file

from common.errors import CourseError
from common.training.hf import read_hf_config, read_hf_weights

HINT = "expected a folder written by save_pretrained"
WEIGHTS = {"embed.weight": torch.arange(12.0).view(3, 4), "head.bias": torch.ones(3)}


def folder_with_config(tmp_path, **config):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", **config}))
    return tmp_path


def one_line_exit(call, match: str) -> str:
    with pytest.raises(CourseError, match=match) as exit_info:
        call()
    text = str(exit_info.value)
    assert text.startswith("error: ") and "\n" not in text
    return text


def test_config_is_read_and_checked_for_its_model_type(tmp_path):
    folder = folder_with_config(tmp_path, hidden_size=32)
    assert read_hf_config(folder, "bert", HINT) == {"model_type": "bert", "hidden_size": 32}
    one_line_exit(lambda: read_hf_config(folder, "gpt2", HINT), "holds a 'bert' model, not 'gpt2'")


def test_bad_config_folders_are_one_line(tmp_path):
    assert HINT in one_line_exit(lambda: read_hf_config(tmp_path / "nowhere", "bert", HINT),
                                 "is not a folder")
    assert HINT in one_line_exit(lambda: read_hf_config(tmp_path, "bert", HINT), "no config.json")
    (tmp_path / "config.json").write_text("{not json")
    one_line_exit(lambda: read_hf_config(tmp_path, "bert", HINT),
                  "is not valid JSON.*download the model again")
    (tmp_path / "config.json").write_bytes(b"\xff\xfe\x00")
    one_line_exit(lambda: read_hf_config(tmp_path, "bert", HINT), "is not valid JSON")


def test_weights_from_safetensors(tmp_path):
    save_file(WEIGHTS, tmp_path / "model.safetensors")
    weights = read_hf_weights(tmp_path, HINT)
    assert weights.keys() == WEIGHTS.keys()
    assert all(torch.equal(weights[name], WEIGHTS[name]) for name in WEIGHTS)


def test_weights_from_an_older_pytorch_bin(tmp_path):
    torch.save(WEIGHTS, tmp_path / "pytorch_model.bin")
    weights = read_hf_weights(tmp_path, HINT)
    assert all(torch.equal(weights[name], WEIGHTS[name]) for name in WEIGHTS)


def test_safetensors_wins_over_bin(tmp_path):
    save_file(WEIGHTS, tmp_path / "model.safetensors")
    torch.save({"other.weight": torch.zeros(1)}, tmp_path / "pytorch_model.bin")
    assert read_hf_weights(tmp_path, HINT).keys() == WEIGHTS.keys()


class Payload:
    """An object a pickle would rebuild by calling code: weights_only refuses it."""

    def __reduce__(self):
        return (print, ("this ran while loading",))


@pytest.mark.parametrize("name, data", [
    ("model.safetensors", b"\x00garbage" * 10),
    ("pytorch_model.bin", b"not a zip"),
])
def test_corrupt_weights_are_one_line(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    one_line_exit(lambda: read_hf_weights(tmp_path, HINT),
                  "cannot read the weights.*download the model again")


def test_a_bin_that_would_run_code_is_refused(tmp_path, capsys):
    torch.save({"weight": Payload()}, tmp_path / "pytorch_model.bin")
    one_line_exit(lambda: read_hf_weights(tmp_path, HINT), "cannot read the weights")
    assert "this ran while loading" not in capsys.readouterr().out


def test_no_weights_is_one_line_with_the_hint(tmp_path):
    assert HINT in one_line_exit(lambda: read_hf_weights(tmp_path, HINT),
                                 "no model.safetensors or pytorch_model.bin")
