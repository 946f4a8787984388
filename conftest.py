"""What the chapters' tests share: a tiny real corpus, one thread per test, a stand-in for Ctrl-C, and a
run's checkpoints as a GPU would have saved them, on a machine without one.

Each chapter's tests/conftest.py adds its own `tiny` settings (a model small enough to train in seconds).
"""

import contextlib
import itertools
import os
import shutil
from unittest import mock

# numpy's BLAS (which scipy's fits use) starts one thread per core; on a busy two-core machine, threads that
# wait for each other make a small least-squares fit many times slower. Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest
import torch

from common.data.corpora import prepare_corpus
from common.training.checkpoint import save_checkpoint
from common.training.interrupt import GracefulInterrupt


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """The first dozen articles of the embedded Wikipedia sample, as a learner's own text file."""
    folder = tmp_path_factory.mktemp("corpus")
    articles = itertools.islice(prepare_corpus("wiki-sample", folder / "data").iter_documents(), 12)
    path = folder / "articles.txt"
    path.write_text("\n\n\n".join(articles), encoding="utf-8")  # two blank lines end a document
    return path


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """Models this small train fastest on one thread; on a busy machine, threads waiting for each other make
    their small matrix products many times slower. OMP_NUM_THREADS does the same for the training runs the
    exercises start as programs of their own."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def one_thread_for_module():
    """one_thread for a module-scoped fixture (a run trained once for a test module), which starts before
    the function-scoped one_thread does."""
    with one_torch_thread():
        yield


@contextlib.contextmanager
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class InterruptAt(GracefulInterrupt):
    """Stands in for GracefulInterrupt: reports a Ctrl-C once the loop has finished `step` steps."""

    def __init__(self, step: int):
        super().__init__()
        self.step, self.checks = step, 0

    def __call__(self, *args, **kwargs):  # train.py calls GracefulInterrupt(...): the stand-in is made
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def requested(self):
        self.checks += 1
        return self.checks >= self.step

    @requested.setter
    def requested(self, value):  # GracefulInterrupt.__init__ sets it; the count decides here
        pass


@pytest.fixture
def interrupt_at():
    """InterruptAt(step), to put in place of a train.py's GracefulInterrupt with monkeypatch."""
    return InterruptAt


def saved_on(run_dir, device: str, to):
    """A copy at `to` of the run folder `run_dir` (checkpoints, metrics, summary) whose checkpoints are what a
    run on `device` ("cuda", "cuda:1", "mps") saves: their settings name that device and the gpu preset,
    every tensor is stored as on that device (torch.load without map_location puts it back there), and on
    CUDA AdamW's groups say fused=True and the GPU's random generator is kept. The scaler state stays as
    saved: a bf16 or MPS run's scaler is disabled and saves {}, as the CPU's does."""
    shutil.copytree(run_dir, to)
    for path in to.glob("*_iter*.pt"):
        state = torch.load(path, weights_only=True)
        state["config"].update(DEVICE=device, PRESET="gpu")
        if device.startswith("cuda"):
            for group in state["optimizer"]["param_groups"]:
                group.update(fused=True, foreach=None)  # as torch.optim.AdamW(..., fused=True) saves it
            state["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8)]  # its seed and offset
        with mock.patch("torch.serialization.location_tag", lambda storage: device):
            save_checkpoint(path, state)
    return to


@pytest.fixture
def from_gpu(tmp_path, monkeypatch):
    """from_gpu(run_dir, device): saved_on(run_dir, device, ...) in a fresh folder, read as on a machine that
    reports neither CUDA nor MPS. On a machine without them, a loader that trusts the checkpoint's device
    fails; on one with a GPU, the tests' checks that everything ends up on the CPU catch it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    return lambda run_dir, device: saved_on(run_dir, device, tmp_path / f"from_{device.replace(':', '_')}")
