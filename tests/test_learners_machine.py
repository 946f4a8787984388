"""The learner's machine: the default run is the README's, online or not; the gpu presets fit a laptop GPU.

Every chapter's default run reads the embedded wiki-sample, on which its README and reference.json were
measured: here no download can start (any attempt fails the test), so a run that reached for the network would
fail. `train.py --DRY_RUN=True` measures one training step on the CPU; for each chapter's `gpu` preset its
peak memory must fit a 4 GB laptop GPU and its estimated time the course's 15 minutes. The memory it estimates
for the cpu preset is held against the CPU's own measurement of the same step: the growth of the process's
peak resident memory.
"""

import importlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from common.data import download
from common.data.corpora import choose_corpus
from common.training import dry_run

CHAPTERS = ("project1_gpt", "project2_gpt2", "project3_contextual_embeddings", "project4_scaling")
EMBEDDED = "corpus: wiki-sample, embedded (no download)"


def script(chapter: str, name: str):
    return importlib.import_module(f"phase1_foundation.{chapter}.{name}")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """One data folder for the module: each chapter prepares its default data once."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture(autouse=True)
def no_download(monkeypatch):
    """Every way a chapter could reach the network fails the test, the course's downloader first: whether the
    machine is online or not, nothing may ask."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"a download started: {args[:2]}")

    monkeypatch.setattr(download, "_fetch", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_default_data_is_the_embedded_corpus_and_no_download_starts(chapter, data_dir, tmp_path, capsys):
    script(chapter, "download_data").main([f"--DATA_DIR={data_dir}"])
    out = capsys.readouterr().out
    assert EMBEDDED in out and "reference.json were measured on" in out
    summary = script(chapter, "train").main(["--DRY_RUN=True", "--PRESET=cpu", f"--DATA_DIR={data_dir}",
                                             f"--OUT_DIR={tmp_path}"])
    out = capsys.readouterr().out
    assert EMBEDDED in out and "dry run, nothing trained: preset cpu" in out
    assert summary["parameters"] > 0 and summary["flops"] > 0
    assert not list(tmp_path.iterdir())  # a dry run writes no checkpoint, log or summary


def test_another_corpus_says_first_that_the_readme_has_no_numbers_for_it(capsys):
    asked = SimpleNamespace(CORPUS="wikitext-2", TEXT_FILE=None)
    assert choose_corpus(asked, larger="wikitext-2") == "wikitext-2"
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and "have no row for it" in line
    assert "leave out --CORPUS and --TEXT_FILE" in line
    own = SimpleNamespace(CORPUS="wiki-sample", TEXT_FILE="notes.txt")
    assert choose_corpus(own, larger="books") == "wiki-sample"  # the text file wins (prepare_corpus)
    assert "your text notes.txt" in capsys.readouterr().out


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_gpu_preset_fits_a_4_gb_laptop_gpu_in_15_minutes(chapter, data_dir, tmp_path, capsys):
    summary = script(chapter, "train").main(["--DRY_RUN=True", "--PRESET=gpu", f"--DATA_DIR={data_dir}",
                                             f"--OUT_DIR={tmp_path}"])
    print(json.dumps(summary))  # the numbers, for a reader of the test log
    assert "bf16 autocast, as on a GPU" in capsys.readouterr().out
    assert summary["memory_bytes"] <= dry_run.FITS_MEMORY
    assert summary["laptop_minutes"] <= dry_run.FITS_MINUTES


# In a process of its own, so that its peak memory is the step's: one cpu-preset step of a chapter, its peak
# resident memory before and during, and the dry run's estimate of what the step adds to the parameters.
MEASURE = """
import gc, json, sys
from common.training import dry_run
from phase1_foundation.{chapter} import train

def resident(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

measured = dry_run.measure_step

def measure_step(*args, **kwargs):
    gc.collect()
    before = resident("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # the peak starts again from here
    cost = measured(*args, **kwargs)
    added = cost.memory_bytes - cost.parameter_bytes
    print(json.dumps({{"grown": resident("VmHWM") - before, "estimate": added}}))
    return cost

dry_run.measure_step = measure_step
train.main(["--DRY_RUN=True", "--PRESET=cpu", "--DATA_DIR={data_dir}", "--OUT_DIR={out_dir}"])
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="reads Linux's /proc")
@pytest.mark.parametrize("chapter", CHAPTERS[:3])  # chapter 4's models add a few MB, below what RSS resolves
def test_the_memory_estimate_agrees_with_the_cpus_measurement_within_25_percent(chapter, data_dir, tmp_path):
    script(chapter, "download_data").main(["--PRESET=cpu", f"--DATA_DIR={data_dir}"])  # data first
    code = MEASURE.format(chapter=chapter, data_dir=data_dir, out_dir=tmp_path)
    # glibc then maps every block of 64 kB or more on its own and returns it when freed: resident memory
    # follows the tensors alive, not what the allocator kept from an earlier step
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    numbers = json.loads(next(line for line in done.stdout.splitlines() if line.startswith('{"grown"')))
    print(numbers)
    assert abs(numbers["estimate"] / numbers["grown"] - 1) <= 0.25
