"""bench.py runs both races end to end, from the same weights: the same first loss, the same greedy tokens.
Speed is never asserted: it depends on the machine and on what else it is doing."""

import pytest

pytest.importorskip("transformers")

from phase1_foundation.project2_gpt2 import bench  # noqa: E402

TINY = ["--DEVICE=cpu", "--N_LAYER=1", "--N_HEAD=2", "--N_EMBD=32", "--BLOCK_SIZE=16", "--BATCH_SIZE=4",
        "--VOCAB_SIZE=128", "--SAMPLE_TOKENS=6"]


@pytest.mark.parametrize("fast", ["true", "false"], ids=["sdpa", "eager"])
def test_bench_races_two_equal_models(capsys, fast):
    results = bench.main([*TINY, f"--FAST_ATTENTION={fast}"], rounds=1, steps=2)
    out = capsys.readouterr().out
    for race in ("training", "generation"):
        for side in ("ours", "theirs"):
            assert results[race][side]["tokens_per_second"] > 0 and results[race][side]["ms_per_round"] > 0
        assert results[race]["ratio"] > 0
    assert out.count("ours / theirs:") == 2 and "transformers GPT2LMHeadModel" in out
    assert f"attn_implementation={'sdpa' if fast == 'true' else 'eager'!r}" in out
    assert "a 8-token prompt + 6 new tokens" in out  # half the block at most, so both fit in it
    # The same weights give the same loss and the same greedy tokens: the race is between two equal models.
    first = results["first_batch_loss"]
    assert first["ours"] == pytest.approx(first["theirs"], abs=1e-5) and first["ours"] > 1.0  # log 128 = 4.85
    assert results["generation"]["same_tokens"]


def test_training_bench_races_train_py_step_against_the_lean_reference(capsys):
    from phase1_foundation.project2_gpt2 import bench_training

    result = bench_training.main(["--N_LAYER=1", "--N_EMBD=32", "--N_HEAD=2", "--BLOCK_SIZE=16"], rounds=1,
                                 steps=2)
    out = capsys.readouterr().out
    for side in ("ours", "theirs"):
        assert result[side]["tokens_per_second"] > 0
    assert result["ratio"] > 0 and "lean GPT, nanoGPT's step" in out and "(target >= 1.2x" in out
    assert "1 layers, 2 heads, 32 wide, block 16, batch 12, vocabulary 65" in out
    for side in ("ours", "theirs"):  # the profile found the work it names, and the optimizer's step
        kinds = result["profile"][side]
        assert kinds["matrix products, forward and backward"] > 0 and kinds["AdamW (optimizer.step)"] > 0
        assert kinds["all ops"] > kinds["matrix products, forward and backward"]
