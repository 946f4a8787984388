"""A tiny, real corpus and a tiny BERT so the chapter's scripts run end to end in seconds."""

import itertools

import pytest
import torch

from common.corpora import prepare_corpus


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    """The first dozen articles of the embedded Wikipedia sample, as a learner's own text file."""
    folder = tmp_path_factory.mktemp("corpus")
    articles = itertools.islice(prepare_corpus("wiki-sample", folder / "data").iter_documents(), 12)
    path = folder / "articles.txt"
    path.write_text("\n\n\n".join(articles), encoding="utf-8")  # two blank lines end a document
    return path


@pytest.fixture
def tiny(corpus_file, tmp_path_factory):
    """Settings for a BERT small enough to train for a few dozen steps in a few seconds."""
    data_dir = tmp_path_factory.getbasetemp() / "prepared"  # shared: the tokenizer is trained once per session
    return [
        f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={data_dir}", "--DEVICE=cpu", "--PRESET=cpu",
        "--VOCAB_SIZE=512", "--N_LAYER=2", "--N_HEAD=2", "--N_EMBD=32", "--BLOCK_SIZE=32", "--BATCH_SIZE=8",
        "--MAX_ITERS=20", "--WARMUP_ITERS=5", "--EVAL_INTERVAL=10", "--EVAL_ITERS=2",
    ]


@pytest.fixture(autouse=True)
def one_thread():
    """Models this small train fastest on one thread; on a busy machine, threads waiting for each other make
    their small matrix products many times slower (about 8x for chapter 1's tests on two shared cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
