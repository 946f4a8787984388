import json
import math

import pytest
import torch

from common.errors import CourseError
from common.training.metrics import (
    MetricsLog,
    check_finite,
    matmul_flops,
    mfu,
    peak_flops,
    plot_losses,
    read_metrics,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def log_run(log: MetricsLog, steps: range) -> None:
    for step in steps:
        log.log(step=step, train_loss=10.0 / (step + 1), lr=1e-3)
        if step % 4 == 0:
            log.log(step=step, val_loss=11.0 / (step + 1))


def test_lines_are_written_at_once(tmp_path):
    log = MetricsLog(tmp_path / "run" / "metrics.jsonl")
    log.log(step=0, train_loss=4.5)
    # Read the file directly, with the log still alive: every line must already be on disk.
    assert json.loads((tmp_path / "run" / "metrics.jsonl").read_text()) == {"step": 0, "train_loss": 4.5}


def test_fresh_run_starts_a_new_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log_run(MetricsLog(path), range(10))
    log = MetricsLog(path)
    assert log.read() == []
    log.log(step=0, train_loss=1.0)
    assert log.read() == [{"step": 0, "train_loss": 1.0}]


def test_resume_drops_lines_after_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log_run(MetricsLog(path), range(13))  # crashed at step 12, last checkpoint at step 8
    log = MetricsLog(path, resume_step=8)
    assert max(r["step"] for r in log.read()) == 8
    log_run(log, range(9, 13))

    uninterrupted = tmp_path / "uninterrupted.jsonl"
    log_run(MetricsLog(uninterrupted), range(13))
    assert read_metrics(path) == read_metrics(uninterrupted)


def test_resume_skips_a_line_cut_short_by_a_crash(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log_run(MetricsLog(path), range(3))
    with path.open("a") as f:
        f.write('{"step": 3, "train_lo')
    assert [r["step"] for r in read_metrics(path)] == [0, 0, 1, 2]
    log = MetricsLog(path, resume_step=2)
    log.log(step=3, train_loss=2.0)
    assert log.read()[-1] == {"step": 3, "train_loss": 2.0}
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_resume_without_a_log_starts_one(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", resume_step=100)
    assert log.read() == []


def test_plot_is_a_png(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    log_run(MetricsLog(metrics), range(20))
    png = plot_losses(metrics, tmp_path / "plots" / "loss.png", title="GPT-1 on wiki-sample")
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000  # axes, two curves and a legend, not an empty image


def test_plot_draws_one_panel_per_loss(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    log = MetricsLog(metrics)
    for step in range(1, 21):
        log.log(step, train_mlm_loss=8 - step / 5, train_nsp_loss=0.7)
    log.log(20, val_mlm_loss=7.0, val_nsp_loss=0.69)
    one = plot_losses(metrics, tmp_path / "one.png", title="BERT", panels=("mlm_loss",))
    two = plot_losses(metrics, tmp_path / "two.png", title="BERT", panels=("mlm_loss", "nsp_loss"))
    assert png_width(two) == 2 * png_width(one)
    lines = plot_losses(metrics, tmp_path / "lines.png", title="BERT", panels=("mlm_loss",),
                        references={"mlm_loss": {"unigram": 7.5, "bigram": 6.0}, "other_panel": {"x": 1.0}})
    assert png_width(lines) == png_width(one) and lines.read_bytes() != one.read_bytes()  # the dashed lines


def test_matmul_rate_is_measured():
    rate = matmul_flops(torch.device("cpu"), size=128, repeats=3)
    assert math.isfinite(rate) and 1e6 < rate < 1e15  # FLOP/s: more than a calculator, less than a GPU farm


def png_width(path):
    return int.from_bytes(path.read_bytes()[16:20], "big")  # the width field of the PNG header


def test_plot_without_metrics(tmp_path):
    with pytest.raises(CourseError, match="no metrics in .*train first"):
        plot_losses(tmp_path / "metrics.jsonl", tmp_path / "loss.png", title="x")


@pytest.mark.parametrize(
    "name, tflops",
    [
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA A100 80GB PCIe", 312.0),
        ("NVIDIA H100 80GB HBM3", 989.5),
        ("NVIDIA H100 PCIe", 756.5),
        ("NVIDIA H200", 989.5),
        ("NVIDIA L4", 121.0),
        ("NVIDIA L40S", 362.0),
        ("Tesla T4", 65.0),
        ("Tesla V100-SXM2-16GB", 125.0),
        ("Tesla V100-PCIE-32GB", 112.0),
        ("NVIDIA GeForce RTX 3060", 25.5),
        ("NVIDIA GeForce RTX 3060 Ti", 32.4),
        ("NVIDIA GeForce RTX 4090", 165.2),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 79.4),
        ("NVIDIA GeForce RTX 3080 Ti Laptop GPU", 47.2),
        ("NVIDIA GeForce RTX 2080 Laptop GPU", None),
        ("NVIDIA GeForce GTX 1080", None),
        ("Some Future GPU", None),
    ],
)
def test_peak_flops_by_device_name(monkeypatch, name, tflops):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    expected = None if tflops is None else tflops * 1e12
    assert peak_flops(torch.device("cuda")) == expected


@pytest.mark.parametrize("device", ["cpu", "mps", torch.device("cpu")])
def test_peak_flops_unknown_off_nvidia(device):
    assert peak_flops(device) is None
    assert mfu(6e9, 1000.0, device) is None


def test_mfu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-40GB")
    # 6 * 124M parameters per token at 100k tokens/s is 74.4 TFLOP/s of 312.
    assert mfu(6 * 124e6, 100_000, "cuda") == pytest.approx(74.4 / 312)


def test_check_finite_passes_normal_losses(tmp_path):
    check_finite(3.2, step=10, last_checkpoint=None)
    check_finite(torch.tensor(0.0).item(), step=10, last_checkpoint=tmp_path / "gpt.pt")


@pytest.mark.parametrize("loss", [math.nan, math.inf, -math.inf])
def test_check_finite_stops_with_the_last_good_checkpoint(tmp_path, loss):
    last = tmp_path / "gpt_iter500_loss3.0000.pt"
    with pytest.raises(
        CourseError, match="at step 512.*kept: .*gpt_iter500_loss3.0000.pt.*lower the learning rate"
    ) as e:
        check_finite(loss, step=512, last_checkpoint=last)
    assert "\n" not in str(e.value)


def test_check_finite_before_any_checkpoint():
    with pytest.raises(CourseError, match="step 3.*no checkpoint was saved yet.*lower the learning rate"):
        check_finite(float("nan"), step=3, last_checkpoint=None)
