"""--NAME=value overrides, presets and the one-line errors for the mistakes a learner will make."""

import importlib.util
import tempfile
from pathlib import Path

import pytest

from common.errors import CourseError
from common.training.config import load_config, parse_value


def make_module():
    """A chapter-like config module, written to a file so --help can read its comments."""
    path = Path(tempfile.mkdtemp()) / "fake_config.py"
    path.write_text(
        "DEVICE = 'auto'  # where to train\n"
        "PRESET = 'auto'  # gpu or cpu\n"
        "MAX_ITERS = 2000  # optimizer steps\n"
        "LEARNING_RATE = 2.5e-4  # PAPER: GPT-1 §4.1\n"
        "USE_NSP = True  # next-sentence prediction\n"
        "CORPUS = 'wiki-sample'  # named corpus\n"
        "TEXT_FILE = None  # your own text\n"
        "BETAS = (0.9, 0.95)  # Adam betas\n"
        "PAPER_CONFIG = {'n_layer': 12}\n"
        "PRESETS = {'gpu': {'MAX_ITERS': 5000}, 'cpu': {'MAX_ITERS': 300}}\n"
    )
    spec = importlib.util.spec_from_file_location("fake_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_defaults_and_cpu_preset(capsys):
    cfg = load_config(make_module(), ["--DEVICE=cpu"])
    assert cfg.PRESET == "cpu" and cfg.MAX_ITERS == 300 and cfg.LEARNING_RATE == 2.5e-4
    assert not hasattr(cfg, "PAPER_CONFIG") and not hasattr(cfg, "PRESETS")
    printed = capsys.readouterr().out
    assert "preset: cpu" in printed and "<- preset cpu" in printed and "<- command line" in printed


def test_overrides_are_typed():
    cfg = load_config(
        make_module(),
        ["--DEVICE=cpu", "--MAX_ITERS=2e3", "--LEARNING_RATE=1e-3", "--USE_NSP=False",
         "--TEXT_FILE=notes.txt", "--BETAS=0.8,0.99", "--PRESET=gpu"],
    )
    assert cfg.MAX_ITERS == 2000 and isinstance(cfg.MAX_ITERS, int)
    assert cfg.LEARNING_RATE == 1e-3 and cfg.USE_NSP is False
    assert cfg.TEXT_FILE == "notes.txt" and cfg.BETAS == (0.8, 0.99) and cfg.PRESET == "gpu"


@pytest.mark.parametrize(
    "arg, message",
    [
        ("--MAX_ITER=10", "unknown setting MAX_ITER; did you mean MAX_ITERS"),
        ("--max_iters=10", "did you mean MAX_ITERS"),
        ("--MAX_ITERS=ten", "--MAX_ITERS expects an integer"),
        ("--MAX_ITERS=2.5", "--MAX_ITERS expects an integer"),
        ("--USE_NSP=maybe", "--USE_NSP expects true or false"),
        ("--LEARNING_RATE=fast", "--LEARNING_RATE expects a number"),
        ("--BETAS=0.9,x", "--BETAS expects a number"),
        ("MAX_ITERS=10", "settings are written --NAME=value"),
        ("--PRESET=tpu", "unknown preset 'tpu'"),
        ("--DEVICE=cuda:7", "--DEVICE=cuda"),
        ("--DEVICE=banana", "unknown device 'banana'"),
    ],
)
def test_mistakes_end_in_one_line(arg, message):
    with pytest.raises(CourseError) as exit_info:
        load_config(make_module(), ["--DEVICE=cpu", arg] if not arg.startswith("--DEVICE") else [arg])
    text = str(exit_info.value)
    assert message in text and "\n" not in text


def test_parse_value_keeps_none_and_strings():
    assert parse_value("TEXT_FILE", "none", None) is None
    assert parse_value("CORPUS", "tinyshakespeare", "wiki-sample") == "tinyshakespeare"


def test_help_lists_settings_with_their_comments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        load_config(make_module(), ["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--MAX_ITERS=2000  optimizer steps" in out and "PAPER: GPT-1 §4.1" in out
