"""What the chapters' tests share: a tiny real corpus, one thread per test, and a stand-in for Ctrl-C.

Each chapter's tests/conftest.py adds its own `tiny` settings (a model small enough to train in seconds).
"""

import itertools
import os

# numpy's BLAS (which scipy's fits use) starts one thread per core; on a busy two-core machine, threads that
# wait for each other made a small least-squares fit 15x slower. Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest
import torch

from common.corpora import prepare_corpus
from common.interrupt import GracefulInterrupt


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
    their small matrix products many times slower (about 8x for chapter 1's tests on two shared cores).
    OMP_NUM_THREADS does the same for the training runs the exercises start as programs of their own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    yield
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
