"""bench.py runs both training steps end to end and starts the two models from the same weights.
Speed is never asserted: it depends on the machine and on what else it is doing."""

import pytest

pytest.importorskip("transformers")

from phase1_foundation.project3_contextual_embeddings import bench  # noqa: E402

TINY = ["--DEVICE=cpu", "--N_LAYER=1", "--N_HEAD=2", "--N_EMBD=32", "--BLOCK_SIZE=16", "--BATCH_SIZE=4",
        "--VOCAB_SIZE=128", "--DROPOUT=0"]


@pytest.mark.parametrize("nsp", ["true", "false"], ids=["mlm+nsp", "mlm-only"])
def test_bench_reports_both_sides_from_the_same_weights(capsys, nsp):
    results = bench.main([*TINY, f"--USE_NSP={nsp}"], rounds=1, steps=2)
    out = capsys.readouterr().out
    for side in ("ours", "theirs"):
        assert results[side]["tokens_per_second"] > 0 and results[side]["ms_per_step"] > 0
    assert results["ratio"] > 0
    assert "ours (model.py)" in out and "transformers BertForPreTraining" in out and "ours / theirs:" in out
    assert out.count("tokens/s") >= 3 and "attn_implementation='sdpa'" in out
    # The same weights and batch give the same loss: the race is between two equal models.
    first = results["first_batch_loss"]
    assert first["ours"] == pytest.approx(first["theirs"], abs=1e-5)
    assert first["ours"] > 1.0  # a real loss, not 0 from an empty batch (log 128 = 4.85 at random)
