"""A checkpoint trained on a GPU works on a machine without one. Every script and function that reads a
chapter 2 checkpoint runs on this machine's device, whatever device the checkpoint records: the root
conftest's from_gpu makes a run's checkpoints what a CUDA or MPS run saves, on a machine with neither."""

import pytest
import torch

from common.training.checkpoint import load_checkpoint, newest_checkpoint
from phase1_foundation.project2_gpt2 import sample, train, zero_shot
from phase1_foundation.project2_gpt2.exercises import ex4_top_k_vs_top_p
from phase1_foundation.project2_gpt2.model import GPT, KIND, PREFIX

CPU = torch.device("cpu")
pytestmark = pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps"])  # what the checkpoints record


@pytest.fixture(scope="module")
def run_dir(tiny, tmp_path_factory, one_thread_for_module):
    """A tiny run trained once for this module (on the CPU: from_gpu rewrites what it saved)."""
    out_dir = tmp_path_factory.mktemp("run")
    train.main([*tiny, f"--OUT_DIR={out_dir}"])
    return out_dir


def test_from_checkpoint_loads_onto_the_cpu(run_dir, from_gpu, device):
    """The tensors were saved as on the GPU; the model and the checkpoint's tensors come back on the CPU."""
    model, state = GPT.from_checkpoint("latest", from_gpu(run_dir, device))
    assert state["config"]["DEVICE"] == device
    assert {t.device for t in [*model.parameters(), *model.buffers()]} == {CPU}


def test_sample_runs_here(tiny, run_dir, from_gpu, device, capsys):
    """sample.py --DEVICE=auto continues a prompt on this machine's CPU."""
    text = sample.main([*tiny, f"--OUT_DIR={from_gpu(run_dir, device)}", "--DEVICE=auto",
                        "--PROMPT=The history"])
    assert text.startswith("The history") and len(text) > len("The history")
    assert "device: cpu" in capsys.readouterr().out


def test_zero_shot_runs_here(tiny, run_dir, from_gpu, device):
    """zero_shot.py --DEVICE=auto scores the model on both tasks on this machine's CPU."""
    results = zero_shot.main([*tiny, f"--OUT_DIR={from_gpu(run_dir, device)}", "--DEVICE=auto",
                              "--ZS_CONTEXT_WORDS=40", "--ZS_PPL_TOKENS=1000"])
    assert results["ours"] and 0 <= results["last_word"]["accuracy"] <= 1
    assert results["perplexity"]["model"]["perplexity"] > 1


def test_ex4_runs_here(tiny, run_dir, from_gpu, device, tmp_path):
    """Exercise 4 with --DEVICE=auto samples from the checkpoint it is given on this machine's CPU."""
    checkpoint = newest_checkpoint(from_gpu(run_dir, device), PREFIX)
    results = ex4_top_k_vs_top_p.main([*tiny, "--DEVICE=auto", f"--CHECKPOINT={checkpoint}",
                                       f"--OUT_DIR={tmp_path / 'ex4'}"])
    assert (results["steps"]["top_k"] == results["top_k"]).all()


def test_training_resumes_on_the_cpu_with_its_own_adamw(tiny, run_dir, from_gpu, device, capsys):
    """--RESUME=latest continues the run here; AdamW keeps the kernel chosen for this machine, not CUDA's
    fused one that the checkpoint's optimizer state names."""
    out_dir = from_gpu(run_dir, device)
    summary = train.main([*tiny, f"--OUT_DIR={out_dir}", "--DEVICE=auto", "--RESUME=latest",
                          "--MAX_ITERS=24"])
    assert "resumed from" in capsys.readouterr().out and summary["steps"] == 24
    state = load_checkpoint(newest_checkpoint(out_dir, PREFIX), kind=KIND)
    assert state["step"] == 24 and state["config"]["DEVICE"] == "cpu"
    assert not any(group["fused"] for group in state["optimizer"]["param_groups"])
