"""The reference line a run ends with, decided on made-up runs; and each chapter's reference.json."""

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from common.course import reference
from common.errors import CourseError
from common.files import REPO_ROOT
from common.training.config import load_config, settings

CHAPTERS = ("project1_gpt", "project2_gpt2", "project3_contextual_embeddings", "project4_scaling")


@pytest.fixture
def chapter(tmp_path, monkeypatch):
    """A chapter-like config module in a folder of its own, where its reference.json goes."""
    path = tmp_path / "fake_chapter" / "config.py"
    path.parent.mkdir()
    path.write_text(
        "DEVICE = 'auto'\nPRESET = 'auto'\nMAX_ITERS = 2000\nN_LAYER = 12\nSEED = 1337\nBETAS = (0.9, 0.95)\n"
        "DROPOUT = 0.1\nCORPUS = 'wiki-sample'\n"
        f"OUT_DIR = {str(tmp_path / 'out')!r}\nPROMPT = 'The'\nFT_EPOCHS = 3\nRESUME = ''\n"
        "PRESETS = {'gpu': {'MAX_ITERS': 5000}, 'cpu': {'MAX_ITERS': 300, 'N_LAYER': 2}}\n"
    )
    spec = importlib.util.spec_from_file_location("fake_chapter_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["phase1_foundation/fake/train.py", "--OUT_DIR=/tmp/x"])
    return module


def finish(config, argv, val_loss=2.5, steps=300, data="data/fake/wiki-sample-bpe4096"):
    """A run that ended with val_loss: its reference line, as report() prints and keeps it."""
    cfg = load_config(config, ["--DEVICE=cpu", *argv])
    return reference.report(config, cfg, {"val_loss": val_loss, "steps": steps, "data_dir": data})


def record_reference(config, val_loss=2.5):
    finish(config, [], val_loss)
    return reference.record(config)


def test_a_default_run_becomes_the_reference_and_reproduces_it(chapter, capsys):
    assert "not measured yet — yours: 2.500" in finish(chapter, [])
    entry = record_reference(chapter, 2.50012)
    saved = json.loads((Path(chapter.__file__).parent / "reference.json").read_text())
    assert saved["cpu"]["cpu"] == entry and entry["val_loss"] == 2.50012 and entry["step"] == 300
    assert entry["command"] == "uv run python phase1_foundation/fake/train.py --OUT_DIR=/tmp/x"
    assert entry["settings"]["MAX_ITERS"] == 300 and "OUT_DIR" not in entry["settings"]
    line = finish(chapter, [], 2.50049)  # the same printed digits
    assert line == "reference, cpu preset on cpu: 2.500 at step 300 — yours: 2.500, the same"
    summary = json.loads((Path(chapter.OUT_DIR) / "summary.json").read_text())
    assert summary["reference"]["line"] == line and summary["val_loss"] == 2.50049
    line = finish(chapter, [], 2.50051)  # 0.00039 apart, but other printed digits: not the same
    assert line.endswith("yours: 2.501, 0.001 above the reference (no band measured yet)")


def test_within_and_outside_the_band(chapter, tmp_path):
    record_reference(chapter, 2.5)
    assert "no band measured yet" in finish(chapter, [], 2.503)
    finish(chapter, [f"--OUT_DIR={tmp_path / 'alt'}"], 2.5031)  # a differently written model's run
    entry = reference.alternative(chapter, str(tmp_path / "alt"), "attention with einsum")
    assert entry["band"] == 0.007 and len(entry["alternatives"]) == 1  # twice 0.0031, rounded up
    assert "1 run(s) of the reference's command" in entry["band_how"]
    line = finish(chapter, [], 2.494)
    assert line.endswith("— yours: 2.494, within the band (±0.007) a correct but differently written model "
                         "lands in")
    line = finish(chapter, [], 2.717)
    assert "— yours: 2.717, 0.217 above the reference, outside the band (±0.007): " in line
    assert "uv run learn check" in line
    assert "0.100 below the reference" in finish(chapter, [], 2.4)


def test_the_band_is_never_narrower_than_its_floor(chapter, tmp_path):
    record_reference(chapter, 2.5)
    finish(chapter, [f"--OUT_DIR={tmp_path / 'alt'}"], 2.5)
    assert reference.alternative(chapter, str(tmp_path / "alt"), "explicit LayerNorm")["band"] == 0.005


def test_settings_that_cannot_change_the_numbers_keep_a_run_default(chapter, tmp_path):
    record_reference(chapter, 2.5)
    neutral = [f"--OUT_DIR={tmp_path / 'elsewhere'}", "--PROMPT=Once", "--FT_EPOCHS=1", "--RESUME=latest",
               "--PRESET=cpu"]
    assert finish(chapter, neutral).endswith("the same")


def test_another_corpus_has_no_reference(chapter):
    record_reference(chapter, 2.5)
    assert finish(chapter, ["--CORPUS=wiki-sample"]).endswith("the same")  # the default, named
    assert finish(chapter, ["--CORPUS=books"]).endswith("none for this run, which changed CORPUS")


def test_a_changed_setting_has_no_reference(chapter):
    record_reference(chapter, 2.5)
    line = finish(chapter, ["--MAX_ITERS=10", "--SEED=1"], 4.0, steps=10)
    assert line == ("reference, cpu preset on cpu: 2.500 at step 300 — none for this run, which changed "
                    "MAX_ITERS, SEED")
    many = ["--MAX_ITERS=10", "--SEED=1", "--N_LAYER=1", "--BETAS=0.9,0.99", "--DROPOUT=0"]
    assert finish(chapter, many).endswith("which changed BETAS, DROPOUT, MAX_ITERS, N_LAYER and 1 more")
    with pytest.raises(CourseError, match="a reference is a default run"):
        reference.record(chapter)


def test_no_reference_for_another_preset_or_device_kind(chapter):
    record_reference(chapter, 2.5)
    assert finish(chapter, ["--PRESET=gpu"], 3.1, steps=5000) == \
        "reference, gpu preset on cpu: not measured yet — yours: 3.100"
    entry = {"val_loss": 2.5, "step": 300, "settings": {}, "data": "x"}
    run = {"preset": "gpu", "device": "cuda", "changed": [], "val_loss": 3.1, "data": "x", "settings": {}}
    assert reference.verdict(run, None, {}) == ("reference, gpu preset on cuda: not measured yet — "
                                                "yours: 3.100")
    assert "0.600 above the reference" in reference.verdict(run, entry, {})


def test_a_reference_from_an_older_preset_or_other_data_is_not_used(chapter):
    record_reference(chapter, 2.5)
    chapter.PRESETS["cpu"]["MAX_ITERS"] = 400
    line = finish(chapter, [], steps=400)
    assert line.endswith("measured before the preset changed MAX_ITERS; none for this run yet")
    chapter.PRESETS["cpu"]["MAX_ITERS"] = 300
    line = finish(chapter, [], data="data/fake/books-bpe4096")
    assert line.endswith("measured on wiki-sample-bpe4096; none yet for this run's books-bpe4096")


def test_a_sweep_is_judged_by_its_furthest_run(chapter, tmp_path):
    def sweep(losses, trained=None, out="out"):
        cfg = load_config(chapter, ["--DEVICE=cpu", f"--OUT_DIR={tmp_path / out}"])
        return reference.report(chapter, cfg, {"val_losses": losses, "trained": trained or len(losses),
                                               "data_dir": "data/fake/wiki-sample-char"})

    sweep({"a": 3.0, "b": 2.0})
    reference.record(chapter, str(tmp_path / "out"))
    assert sweep({"a": 3.0001, "b": 2.0}).endswith("2 runs' final validation losses — yours: 2 runs, every "
                                                   "one the same")
    sweep({"a": 3.0, "b": 2.002}, out="alt")
    assert reference.alternative(chapter, str(tmp_path / "alt"), "einsum")["band"] == 0.005
    assert "the furthest b: 1.997 against 2.000, within the band" in sweep({"a": 3.001, "b": 1.997})
    line = sweep({"a": 3.2, "b": 2.0}, trained=1)
    assert "0.200 above the reference, outside the band" in line
    assert "2 runs (1 of them from results.jsonl, not this command), the furthest a: 3.200" in line


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_chapter_has_a_measured_cpu_reference_for_its_preset_of_today(name):
    path = REPO_ROOT / "phase1_foundation" / name / "reference.json"
    entry = json.loads(path.read_text(encoding="utf-8"))["cpu"]["cpu"]
    assert entry["command"].startswith(f"uv run python phase1_foundation/{name}/train.py")
    assert entry["band"] >= reference.MIN_BAND and entry["band_how"] and entry["alternatives"]
    assert "val_loss" in entry or "val_losses" in entry
    config = importlib.import_module(f"phase1_foundation.{name}.config")
    preset = reference.counted({**settings(config), **config.PRESETS["cpu"]})
    assert entry["settings"] == preset, "the cpu preset changed: measure its reference again (reference.py)"


def test_a_cpu_with_other_vector_instructions_is_named_when_the_digits_differ():
    entry = {"val_loss": 2.5, "step": 300, "settings": {}, "data": "x", "band": 0.01, "cpu": "AVX512"}
    run = {"preset": "cpu", "device": "cpu", "changed": [], "val_loss": 2.504, "data": "x", "settings": {},
           "cpu": "AVX2"}
    assert reference.verdict(run, entry, {}).endswith(
        "yours: 2.504 (the reference's CPU computed with AVX512, yours with AVX2), within the band (±0.01) "
        "a correct but differently written model lands in")
    assert reference.verdict({**run, "val_loss": 2.5001}, entry, {}).endswith("yours: 2.500, the same")
