"""A checkpoint trained on a GPU works on a machine without one. Every script and function that reads a
chapter 3 checkpoint runs on this machine's device, whatever device the checkpoint records: the root
conftest's from_gpu makes a run's checkpoints what a CUDA or MPS run saves, on a machine with neither."""

import math

import pytest
import torch

from common.training.checkpoint import load_checkpoint, newest_checkpoint
from common.training.config import load_config
from common.training.device import pick_device
from phase1_foundation.project3_contextual_embeddings import config, embed, train
from phase1_foundation.project3_contextual_embeddings.exercises import (
    evaluate_run,
    ex3_why_no_generation,
    ex5_padding_mask,
    load_run,
)
from phase1_foundation.project3_contextual_embeddings.model import BERT, KIND, PREFIX

CPU = torch.device("cpu")
pytestmark = pytest.mark.parametrize("device", ["cuda", "cuda:1", "mps"])  # what the checkpoints record


def on_cpu(model: BERT) -> bool:
    return {t.device for t in [*model.parameters(), *model.buffers()]} == {CPU}


def fallback(device: str) -> str:
    return f"the checkpoint was trained on {device}, which this machine cannot use: running on cpu\n"


@pytest.fixture(scope="module")
def run_dir(tiny, tmp_path_factory, one_thread_for_module):
    """A tiny run trained once for this module (on the CPU: from_gpu rewrites what it saved)."""
    out_dir = tmp_path_factory.mktemp("run")
    train.main([*tiny, f"--OUT_DIR={out_dir}"])
    return out_dir


def test_from_checkpoint_loads_onto_the_cpu(run_dir, from_gpu, device):
    """The tensors were saved as on the GPU; the model and the checkpoint's tensors come back on the CPU."""
    model, state = BERT.from_checkpoint("latest", from_gpu(run_dir, device))
    assert state["config"]["DEVICE"] == device and on_cpu(model)


def test_embed_loads_the_model_here(tiny, run_dir, from_gpu, device):
    """embed.py's load_model puts the model, and its untrained twin, on the device of the run (auto: the
    CPU here)."""
    cfg = load_config(config, [*tiny, f"--OUT_DIR={from_gpu(run_dir, device)}", "--DEVICE=auto"])
    model, _, _, seed, _ = embed.load_model(cfg, pick_device(cfg.DEVICE))
    assert on_cpu(model) and on_cpu(embed.untrained_twin(model, seed))


def test_load_run_falls_back_to_the_cpu_and_says_why(run_dir, from_gpu, device, capsys):
    """Given no device, the exercises' load_run puts the model on this machine's, and the settings it
    returns name that device (batches and autocast follow them)."""
    model, cfg, _ = load_run(newest_checkpoint(from_gpu(run_dir, device), PREFIX))
    assert fallback(device) in capsys.readouterr().out
    assert on_cpu(model) and cfg.DEVICE == "cpu"


def test_evaluate_run_scores_the_model_on_the_cpu(run_dir, from_gpu, device, capsys):
    """evaluate_run, given no device, scores the model on this machine's CPU."""
    metrics = evaluate_run(newest_checkpoint(from_gpu(run_dir, device), PREFIX), MLM_PROB=0.15)
    assert fallback(device) in capsys.readouterr().out
    assert math.isfinite(metrics["val_mask_loss"]) and metrics["val_mask_count"] > 0


def test_ex3_and_ex5_run_on_the_device_asked_for(tiny, run_dir, from_gpu, device, tmp_path, capsys):
    """Exercises 3 and 5 pass their own --DEVICE (auto: this machine's), so nothing falls back."""
    checkpoint = newest_checkpoint(from_gpu(run_dir, device), PREFIX)
    settings = [*tiny, "--DEVICE=auto", f"--CHECKPOINT={checkpoint}", f"--OUT_DIR={tmp_path}"]
    assert ex3_why_no_generation.main(settings)["min_later_change"] > 0
    assert max(ex5_padding_mask.main(settings)["with_mask"]) < 1e-5
    assert fallback(device) not in capsys.readouterr().out


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
