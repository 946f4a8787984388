"""Chapter 3's tiny settings: a BERT small enough that the scripts run end to end in seconds.

The corpus, the one-thread rule and the Ctrl-C stand-in are shared by every chapter (the root conftest.py).
"""

import pytest


@pytest.fixture(scope="session")  # one list for every test: a module's trained fixture uses it too
def tiny(corpus_file, tmp_path_factory):
    """Settings for a BERT small enough to train for a few dozen steps in a few seconds."""
    data_dir = tmp_path_factory.getbasetemp() / "prepared"  # shared: the tokenizer trains once per session
    return [
        f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={data_dir}", "--DEVICE=cpu", "--PRESET=cpu",
        "--VOCAB_SIZE=512", "--N_LAYER=2", "--N_HEAD=2", "--N_EMBD=32", "--BLOCK_SIZE=32", "--BATCH_SIZE=8",
        "--MAX_ITERS=20", "--WARMUP_ITERS=5", "--EVAL_INTERVAL=10", "--EVAL_ITERS=2",
    ]
