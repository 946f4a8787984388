"""The chapter's commands end to end at a tiny size: prepare, train, resume, two processes, sample."""

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
import torch

from common.data.tokens import read_meta
from common.errors import CourseError
from common.files import REPO_ROOT
from common.training import run as training_run
from common.training.interrupt import GracefulInterrupt
from phase1_foundation.project2_gpt2 import download_data, parallel, sample, train
from phase1_foundation.project2_gpt2.tokenizer import load_tokenizer


def losses(out_dir):
    lines = (out_dir / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["train_loss"], r.get("val_loss")) for r in map(json.loads, lines)]


def test_download_data_trains_a_byte_level_bpe_and_writes_token_files(tiny):
    prepared = download_data.main(tiny)
    meta = read_meta(prepared)
    tokenizer = load_tokenizer(prepared)
    assert tokenizer.vocab_size == 512 and tokenizer.eot_id == 511  # 256 bytes, 255 merges, <|endoftext|>
    assert (prepared / "vocab.json").exists() and (prepared / "merges.txt").exists()
    assert meta["train_tokens"] > 10 * meta["val_tokens"] > 0 and meta["val_documents"]
    assert download_data.main(tiny) == prepared  # prepared once, then reused


def test_the_vocabulary_is_sized_to_the_corpus():
    assert download_data.auto_vocab_size(2_736_941) == 5504  # the embedded wiki-sample
    assert download_data.auto_vocab_size(10_000) == 512
    assert download_data.auto_vocab_size(10**9) == 50257


def test_too_small_a_vocabulary_is_one_clear_line(tiny):
    with pytest.raises(CourseError, match="at least 257"):
        download_data.main([*tiny, "--VOCAB_SIZE=200"])


def test_train_writes_checkpoints_curve_and_summary_with_baselines(tiny, tmp_path):
    summary = train.main([*tiny, f"--OUT_DIR={tmp_path}"])
    names = sorted(p.name for p in tmp_path.glob("gpt2_iter*.pt"))
    assert len(names) == 2 and names[1].startswith("gpt2_iter20_loss")
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [step for step, _, _ in losses(tmp_path)] == list(range(1, 21))
    assert summary["val_loss"] < math.log(512)  # below a uniform guess over 512 tokens: it learned something
    assert summary["bigram_loss"] < summary["unigram_loss"] < math.log(512)
    assert summary["tokens_per_second"] > 0 and summary["matmul_flops"] > 0


def test_ctrl_c_then_resume_continues_the_same_run_bit_for_bit(tiny, tmp_path, monkeypatch, capsys,
                                                                interrupt_at):
    uninterrupted, interrupted = tmp_path / "a", tmp_path / "b"
    train.main([*tiny, f"--OUT_DIR={uninterrupted}"])

    monkeypatch.setattr(training_run, "GracefulInterrupt", interrupt_at(7))  # inside StepReport
    with pytest.raises(SystemExit) as stop:
        train.main([*tiny, f"--OUT_DIR={interrupted}"])
    assert stop.value.code == 0 and "--RESUME=latest" in capsys.readouterr().out
    assert [p.name.split("_loss")[0] for p in interrupted.glob("*.pt")] == ["gpt2_iter7"]
    monkeypatch.undo()

    train.main([*tiny, f"--OUT_DIR={interrupted}", "--RESUME=latest"])
    assert losses(interrupted) == losses(uninterrupted)  # every step, train and val, exactly


def test_resume_refuses_a_different_model(tiny, tmp_path):
    train.main([*tiny, f"--OUT_DIR={tmp_path}", "--MAX_ITERS=10"])
    with pytest.raises(CourseError, match="N_LAYER|n_layer"):
        train.main([*tiny, f"--OUT_DIR={tmp_path}", "--RESUME=latest", "--N_LAYER=3"])


def torchrun(settings: list[str], processes: int) -> None:
    """Run train.py as `torchrun --nproc_per_node=N` would from the shell: N processes joined over gloo."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
               "-m", "phase1_foundation.project2_gpt2.train", *settings]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-3000:]


def test_two_processes_train_exactly_as_one_and_resume_exactly(tiny, tmp_path):
    """Data parallelism changes where the work is done, not what is computed: two gloo processes, each with
    half of every batch, give one process's losses (dropout off: each process draws its own masks)."""
    settings = [*tiny, "--DROPOUT=0", "--BATCH_SIZE=4", "--GRAD_ACCUM_STEPS=2"]
    one, two, resumed = tmp_path / "one", tmp_path / "two", tmp_path / "resumed"
    train.main([*settings, f"--OUT_DIR={one}"])
    torchrun([*settings, f"--OUT_DIR={two}"], processes=2)
    for (step, loss_one, val_one), (step_2, loss_two, val_two) in zip(losses(one), losses(two), strict=True):
        assert step == step_2 and loss_two == pytest.approx(loss_one, abs=1e-5)
        assert (val_one is None) == (val_two is None) and (val_one is None or abs(val_one - val_two) < 1e-5)

    # Resume the two-process run from its step-10 checkpoint, in a fresh folder: the same steps 11-20.
    resumed.mkdir()
    checkpoint = next(two.glob("gpt2_iter10_*.pt"))
    shutil.copy(checkpoint, resumed)
    torchrun([*settings, f"--OUT_DIR={resumed}", "--RESUME=latest"], processes=2)
    assert losses(resumed) == [record for record in losses(two) if record[0] > 10]
    state = torch.load(checkpoint, weights_only=True)
    assert state["world_size"] == 2 and len(state["rng"]) == 2  # each process's generators


def test_sample_continues_a_prompt_with_and_without_the_cache(tiny, tmp_path, capsys):
    train.main([*tiny, f"--OUT_DIR={tmp_path}"])
    text = sample.main([*tiny, f"--OUT_DIR={tmp_path}", "--PROMPT=The history", "--TOP_K=1"])
    assert text.startswith("The history") and len(text) > len("The history")
    assert "tokens/s with the KV cache" in capsys.readouterr().out


def test_sample_stops_at_a_stop_string(tiny, tmp_path):
    train.main([*tiny, f"--OUT_DIR={tmp_path}"])
    text = sample.main([*tiny, f"--OUT_DIR={tmp_path}", "--PROMPT=The", "--STOP= ", "--SAMPLE_TOKENS=50"])
    assert " " not in text.removeprefix("The")  # cut where the first space was generated


@pytest.mark.parametrize("setting, message", [
    ("--CHECKPOINT=nowhere.pt", "no checkpoint at"),
    ("--PROMPT=" + "word " * 40, "the prompt is"),
])
def test_sample_mistakes_end_in_one_line(tiny, tmp_path, setting, message):
    train.main([*tiny, f"--OUT_DIR={tmp_path}", "--MAX_ITERS=10"])
    with pytest.raises(CourseError, match=message) as error:
        sample.main([*tiny, f"--OUT_DIR={tmp_path}", setting])
    assert "\n" not in str(error.value)


def test_sample_refuses_a_folder_of_another_architecture(tiny, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(CourseError, match="bert"):
        sample.main([*tiny, f"--HF_DIR={tmp_path}"])


def test_every_tensor_a_collective_sees_is_on_the_process_device(monkeypatch):
    """NCCL reduces GPU tensors only, so a CPU tensor in a collective fails a run on several GPUs. A tensor
    made without naming the process's device lands on torch's default device: set to "meta" here, a
    forgotten device= shows up as a tensor on meta instead of the process's device (the CPU)."""
    seen = []
    monkeypatch.setattr(parallel.dist, "all_reduce", lambda tensor, op=None: seen.append(tensor.device))
    device = torch.device("cpu")
    with torch.device("meta"):
        training_run.agree_to_stop(GracefulInterrupt(), world_size=2, device=device)
        parallel.mean_over_processes(torch.zeros((), device=device), world_size=2)
    assert seen == [device, device]


def test_compile_is_skipped_on_mps_and_said_so(monkeypatch, capsys):
    """The gpu preset compiles, and MPS gets the gpu preset: there the model runs uncompiled, with one line,
    while CUDA and the CPU compile as asked."""
    compiled = []
    monkeypatch.setattr(parallel.torch, "compile", lambda module: compiled.append(module) or module)
    model = torch.nn.Linear(2, 2)
    assert parallel.wrap(model, True, 1, torch.device("mps")) is model and compiled == []
    assert capsys.readouterr().out.startswith("--COMPILE=true is skipped on mps")
    parallel.wrap(model, True, 1, torch.device("cpu"))
    assert compiled == [model]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_process_killed_mid_run_ends_the_other_in_one_line_and_the_run_resumes(tiny, tmp_path):
    """Two gloo processes joined as torchrun would join them; one is killed (out of memory, a lost machine):
    the other stops with one line naming the newest checkpoint, which loads and resumes in one process."""
    out_dir = tmp_path / "run"
    settings = [*tiny, f"--OUT_DIR={out_dir}", "--MAX_ITERS=400", "--EVAL_INTERVAL=10"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": "2"}
    processes = [subprocess.Popen([sys.executable, "-m", "phase1_foundation.project2_gpt2.train", *settings],
                                  cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}) for rank in (0, 1)]
    deadline = time.monotonic() + 240
    while not any(out_dir.glob("gpt2_iter*.pt")) and time.monotonic() < deadline:
        assert processes[0].poll() is None, processes[0].stderr.read()[-2000:]
        time.sleep(0.1)
    processes[1].kill()
    _, stderr = processes[0].communicate(timeout=120)
    processes[1].communicate()
    assert processes[0].returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("error: process 0 lost another process of this run (")
    assert last.endswith("; resume with --RESUME=latest") and "the newest checkpoint is " in last

    newest = max(out_dir.glob("gpt2_iter*.pt"), key=lambda path: int(path.name.split("_")[1][4:]))
    assert str(newest) in last
    train.main([*settings, "--RESUME=latest"])  # one process takes over the two-process run
    assert losses(out_dir)[-1][0] == 400
