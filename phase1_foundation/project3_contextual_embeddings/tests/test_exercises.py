"""The exercises' worked solutions at a tiny size: each runs end to end and, where a few seconds of training
can show it, shows what a learner should see.

A tiny BERT trained for seconds on ordinary text predicts mostly the most frequent tokens, so these tests
check the measurements themselves (same masks for both runs, exact zeros where there must be zeros) and the
effects that appear that early: the noise of a mean over more targets, copying, and, on text built so that
the neighbours give a masked word away, rotary positions leaving the plateau before the learned table.
"""

import math
import random

import pytest

from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.exercises import (
    ex1_mlm_prob,
    ex2_no_random_branch,
    ex3_why_no_generation,
    ex4_no_nsp,
    ex5_padding_mask,
    ex6_learned_vs_rotary,
    ex7_frozen_encoder,
)
from phase1_foundation.project3_contextual_embeddings.pretraining_data import KINDS, N_SPECIAL

PNG = b"\x89PNG\r\n\x1a\n"
BERT_TRAINING = [f"--{name}={value}" for name, value in config.BERT_TRAINING.items()]  # the presets differ


@pytest.fixture
def no_chapter_checkpoint(tmp_path, monkeypatch):
    """Point the chapter's OUT_DIR (where exercises 3 and 5 look for train.py's model) at an empty folder."""
    monkeypatch.setattr(config, "OUT_DIR", str(tmp_path / "chapter"))
    return tmp_path / "chapter"


def test_ex1_half_masked_training_is_smoother(tiny, tmp_path):
    results = ex1_mlm_prob.main([*tiny, "--MAX_ITERS=100", "--EVAL_INTERVAL=50", "--EVAL_ITERS=4",
                                 f"--OUT_DIR={tmp_path}"])
    low, high = results[0.15], results[0.5]
    # 3.3x as many targets per step: the loss is a mean over more of them, so it jumps less from step to step
    # (by about sqrt(0.15 / 0.5) = 0.55).
    assert high["noise"] < 0.8 * low["noise"]
    # Scoring at 15% reproduces the 15% run's own validation exactly: the same pairs and the same masks.
    assert low["val_mask_loss_at_15"] == pytest.approx(low["val_mask_loss"], abs=1e-6)
    assert high["val_mask_loss_at_15"] != pytest.approx(high["val_mask_loss"], abs=1e-6)
    assert (tmp_path / "mlm_prob.png").read_bytes()[:8] == PNG


def test_ex2_without_the_random_branch_the_model_trusts_visible_tokens(tiny, tmp_path):
    results = ex2_no_random_branch.main([*tiny, "--N_EMBD=64", "--BATCH_SIZE=16", "--LEARNING_RATE=3e-3",
                                         "--MAX_ITERS=200", "--EVAL_INTERVAL=200", "--EVAL_ITERS=20",
                                         f"--OUT_DIR={tmp_path}"])
    paper, no_random = results["paper"], results["no_random"]
    for kind in KINDS:  # both models scored on the same 80/10/10 masks
        assert paper[kind]["targets"] == no_random[kind]["targets"] > 50
    assert paper["mask"]["targets"] > 5 * paper["random"]["targets"]
    # 200 steps in, both still guess [MASK]s from token frequencies, but the one that never saw a random
    # token already trusts what it sees: more right where the token is the original, more wrong where not.
    assert no_random["unchanged"]["loss"] < paper["unchanged"]["loss"]
    assert no_random["unchanged"]["accuracy"] >= paper["unchanged"]["accuracy"]
    assert no_random["random"]["loss"] > paper["random"]["loss"]
    # At [MASK] the two are level: whatever separates them there is small beside the gap where it shows.
    gap = {kind: abs(no_random[kind]["loss"] - paper[kind]["loss"]) for kind in KINDS}
    assert gap["mask"] < gap["unchanged"] / 3 and gap["mask"] < gap["random"] / 3


def test_ex3_every_output_reads_later_tokens_and_filling_blanks_runs(tiny, tmp_path, no_chapter_checkpoint):
    results = ex3_why_no_generation.main([*tiny, f"--OUT_DIR={tmp_path}"])
    assert list((tmp_path / "bert").glob("bert_iter20_*.pt"))  # none in the chapter's folder: it trained one
    change = results["dependence"]
    T = len(results["tokens"])
    assert change.shape == (T, T) and results["tokens"][0] == "[CLS]" and "[MASK]" in results["tokens"]
    assert results["min_later_change"] > 1e-5  # a causal model would give exactly 0
    later = [change[t, s] for t in range(T) for s in range(t + 1, T) if not math.isnan(change[t, s])]
    assert len(later) > T  # the pairs measured: every ordinary token after every position
    assert len(results["generated_ids"]) == ex3_why_no_generation.NEW_TOKENS
    assert min(results["generated_ids"]) >= N_SPECIAL and results["prompt"].strip().startswith("The river")


def test_ex4_runs_with_and_without_nsp_on_the_same_pairs(tiny, tmp_path):
    results = ex4_no_nsp.main([*tiny, f"--OUT_DIR={tmp_path}"])
    nsp, mlm_only = results["nsp"], results["mlm_only"]
    assert list(results["curves"]["nsp"]) == list(results["curves"]["mlm_only"]) == [10, 20]
    assert 0 <= nsp["val_nsp_accuracy"] <= 1 and mlm_only["val_nsp_accuracy"] is None
    # The MLM-only run is validated on contiguous pairs already: scoring it there again changes nothing.
    assert mlm_only["contiguous_mask_accuracy"] == mlm_only["val_mask_accuracy"]
    assert mlm_only["contiguous_mask_loss"] == pytest.approx(mlm_only["val_mask_loss"], abs=1e-6)


def test_ex5_padding_changes_nothing_with_the_mask_and_everything_without(
    tiny, tmp_path, no_chapter_checkpoint
):
    train_dir = tmp_path / "trained"
    first = ex5_padding_mask.main([*tiny, f"--OUT_DIR={train_dir}"])  # no model yet: trains one
    assert first["pads"] == [1, 8]  # the ones that fit in BLOCK_SIZE=32 with the sentence
    # With a model in the chapter's folder it uses that one and trains nothing.
    no_chapter_checkpoint.mkdir()
    for path in (train_dir / "bert").glob("bert_iter20_*.pt"):
        path.rename(no_chapter_checkpoint / path.name)
    results = ex5_padding_mask.main([*tiny, f"--OUT_DIR={tmp_path / 'again'}"])
    assert not (tmp_path / "again").exists()
    assert results["with_mask"] == pytest.approx(first["with_mask"])
    assert max(results["with_mask"]) < 1e-5  # rounding
    # After 20 steps the logits are nearly flat, so even unmasked padding moves them little, but far more
    # than rounding, and more with more of it: each [PAD] takes a share of every real token's attention.
    one, eight = results["without_mask"]
    assert eight > one > 1e-4 and eight > 1e-3
    assert set(results["top"]) == {0, 1, 8}


def chain_text(path, seed: int = 0):
    """Documents of sentences that walk a fixed cycle of 30 words (alpha bravo charlie ...): a masked word is
    given by its neighbours, and by nothing else. A task that needs exactly the attention the plateau is made
    of, small enough to learn in seconds."""
    rng = random.Random(seed)
    words = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar "
             "papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu apple banana cherry "
             "grape").split()
    documents = []
    for _ in range(300):
        sentences = []
        for _ in range(12):
            start, length = rng.randrange(len(words)), rng.randrange(5, 10)
            sentence = " ".join(words[(start + i) % len(words)] for i in range(length))
            sentences.append(sentence.capitalize() + ".")
        documents.append(" ".join(sentences))
    path.write_text("\n\n\n".join(documents), encoding="utf-8")  # two blank lines end a document
    return path


def test_ex6_rotary_positions_leave_the_plateau_first(tiny, tmp_path):
    """The same tiny BERT trained as BERT was (dropout, NSP, 15%), 600 steps each: with rotary positions the
    loss at [MASK] leaves the unigram model's and falls towards the neighbours' answer; with the learned table
    it is still on the plateau."""
    settings = [*tiny, *BERT_TRAINING, f"--TEXT_FILE={chain_text(tmp_path / 'chain.txt')}",
                f"--DATA_DIR={tmp_path / 'data'}",
                "--MAX_ITERS=600", "--EVAL_INTERVAL=100", "--WARMUP_ITERS=30", "--BATCH_SIZE=16",
                "--LEARNING_RATE=5e-3", "--EVAL_ITERS=4", f"--OUT_DIR={tmp_path / 'runs'}"]
    results = ex6_learned_vs_rotary.main(settings)
    assert list(results["curves"]["learned"]) == list(results["curves"]["rotary"]) == [100, 200, 300, 400,
                                                                                       500, 600]
    assert results["bigram"] < results["unigram"] - 2  # the neighbours tell the masked word
    assert results["learned"]["below_unigram"] < 0.1  # still on the plateau
    assert results["rotary"]["below_unigram"] > 0.3  # left it
    # and the attention on the previous token says how: the rotary run has grown it, the table has not
    attention, even = results["attention"], results["attention"]["learned"]["uniform"][600]
    previous = {name: max(attention[name][f"layer{layer}_prev"][600] for layer in (1, 2))
                for name in attention}
    assert previous["rotary"] > 3 * even and previous["learned"] < 1.5 * even
    assert (tmp_path / "runs" / "learned_vs_rotary.png").read_bytes().startswith(PNG)


def test_ex6_figure_has_the_neighbour_attention_panel(tmp_path, capsys):
    """Figure and table from logged weights alone: a line per run, layer and offset, under the loss."""
    steps = [100, 200, 300]
    curves = {"learned": dict(zip(steps, [7.0, 6.95, 6.9], strict=True)),
              "rotary": dict(zip(steps, [7.0, 6.0, 5.5], strict=True))}
    attention = {name: {"uniform": dict.fromkeys(steps, 0.01)} for name in curves}
    for name, rise in (("learned", 0.0), ("rotary", 0.2)):
        for layer in (1, 2):
            attention[name][f"layer{layer}_prev"] = {s: 0.01 + rise * i / layer for i, s in enumerate(steps)}
            attention[name][f"layer{layer}_next"] = dict.fromkeys(steps, 0.012)
    path = ex6_learned_vs_rotary.plot(curves, 6.94, 4.49, tmp_path / "figure.png", attention)
    assert path.read_bytes().startswith(PNG)
    ex6_learned_vs_rotary.print_attention(attention)
    rows = capsys.readouterr().out.splitlines()
    assert "spread evenly it would be 0.0100" in rows[1]
    # step, then the largest over the layers: learned prev, learned next, rotary prev, rotary next
    assert rows[-1].split() == ["300", "0.0100", "0.0120", "0.4100", "0.0120"]


def test_ex7_trains_a_model_first_then_only_the_new_layer(tiny, tmp_path, no_chapter_checkpoint, capsys):
    results = ex7_frozen_encoder.main([*tiny, f"--OUT_DIR={tmp_path}", "--FT_SEEDS=1", "--FT_FOLDS=2",
                                       "--FT_LEARNING_RATES=1e-3", "--FT_EPOCHS=1"])
    printed = capsys.readouterr().out
    assert "no checkpoint" in printed and "the new layer only trained" in printed
    assert "What the course measured" in printed
    assert {"pretrained", "scratch", "naive Bayes"} <= set(results)
    assert (tmp_path / "finetune_polarity_frozen.json").exists()
