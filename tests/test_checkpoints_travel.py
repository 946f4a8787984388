"""A learner's checkpoint survives what happens to real folders: the clone moves, and Ctrl-C comes twice.

Both run chapter 1's train.py as a program of its own, as from the shell, at a tiny size.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from common.files import REPO_ROOT
from common.training.checkpoint import load_checkpoint
from phase1_foundation.project1_gpt.model import KIND

TINY = ["--DEVICE=cpu", "--PRESET=cpu", "--TOKENIZER=char", "--N_LAYER=2", "--N_HEAD=2", "--N_EMBD=32",
        "--BLOCK_SIZE=32", "--BATCH_SIZE=4", "--WARMUP_ITERS=5", "--EVAL_ITERS=2", "--SAMPLE_TOKENS=10"]


def run(module: str, settings: list[str], cwd, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *settings], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}, **options)


def test_a_checkpoint_samples_after_the_clone_moves_and_no_file_keeps_the_old_path(corpus_file, tmp_path):
    """Train in a clone, `mv` the clone, sample: it works, and nothing under checkpoints/ or data/ names the
    folder the clone was in (the checkpoint's bytes included)."""
    old, new = tmp_path / "course", tmp_path / "renamed" / "course"
    for package in ("common", "phase1_foundation"):  # the code a clone runs (python -m imports it from cwd)
        shutil.copytree(REPO_ROOT / package, old / package,
                        ignore=shutil.ignore_patterns("tests", "__pycache__"))
    trained = run("phase1_foundation.project1_gpt.train",
                  [*TINY, f"--TEXT_FILE={corpus_file}", "--MAX_ITERS=20", "--EVAL_INTERVAL=10"], cwd=old)
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert f"checkpoint: {old}/checkpoints/project1/gpt_iter20" in trained.stdout  # the copied clone ran

    new.parent.mkdir()
    old.rename(new)
    sampled = run("phase1_foundation.project1_gpt.sample",
                  ["--DEVICE=cpu", "--PROMPT=The", "--SAMPLE_TOKENS=20"], cwd=new)
    assert sampled.returncode == 0, sampled.stderr[-2000:]
    assert sampled.stdout.strip().splitlines()[-1].startswith("The")
    written = [path for folder in ("checkpoints", "data") for path in (new / folder).rglob("*")
               if path.is_file()]
    assert any(path.suffix == ".pt" for path in written) and any(path.name == "meta.json" for path in written)
    assert [path for path in written if str(old).encode() in path.read_bytes()] == []

    shutil.rmtree(new / "data")  # the checkpoint carries its tokenizer: no data folder is needed to sample
    assert run("phase1_foundation.project1_gpt.sample", ["--DEVICE=cpu"], cwd=new).returncode == 0
    finetuned = run("phase1_foundation.project1_gpt.finetune", ["--DEVICE=cpu"], cwd=new)  # it reads data
    assert finetuned.returncode == 1 and "Traceback" not in finetuned.stderr
    assert "not in this clone; prepare it with the chapter's download_data.py" in finetuned.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT cannot be sent to one process on Windows")
def test_ctrl_c_twice_stops_without_a_traceback_and_the_named_checkpoint_loads(corpus_file, tmp_path):
    """The first Ctrl-C asks for a save; the second, right behind it, stops the program in the middle of
    whatever it is doing (the save included): one line naming the newest checkpoint, which loads."""
    out_dir = tmp_path / "run"
    # Wide enough (1.6M parameters, 20 MB checkpoints) that the step and the save usually outlast the 50 ms
    # between the two signals.
    settings = [*TINY, f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={tmp_path / 'data'}",
                f"--OUT_DIR={out_dir}", "--MAX_ITERS=1000000", "--EVAL_INTERVAL=20", "--N_EMBD=256"]
    command = [sys.executable, "-m", "phase1_foundation.project1_gpt.train", *settings]
    with subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}) as process:
        deadline = time.monotonic() + 240
        while not any(out_dir.glob("gpt_iter*.pt")) and time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read()[-2000:]
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    # Either the second Ctrl-C caught the program before its save was done (it stops at once, naming the
    # newest checkpoint on disk), or the save had finished and the program was already leaving (exit 0).
    if process.returncode == 130:
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("stopped at once; the newest checkpoint is ")
        named = last.removeprefix("stopped at once; the newest checkpoint is ")
    else:
        assert process.returncode == 0, stderr[-2000:]
        named = stdout.split("saved ")[-1].splitlines()[0]
    assert load_checkpoint(named, kind=KIND)["step"] >= 20
    assert not list(out_dir.glob(".*.tmp"))  # no partial file left behind
    state = torch.load(named, weights_only=True)
    assert "tokenizer_files" in state
