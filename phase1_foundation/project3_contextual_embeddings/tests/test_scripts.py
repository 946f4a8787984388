"""The chapter's commands, end to end at a tiny size: prepare, train, resume, embed."""

import json
import math

import pytest
import torch

from common.errors import CourseError
from common.training import run as training_run
from common.training.config import settings
from phase1_foundation.project3_contextual_embeddings import baselines, config, embed, sweep, train

PNG = b"\x89PNG\r\n\x1a\n"


def losses(out_dir):
    lines = (out_dir / "metrics.jsonl").read_text().splitlines()
    keys = ("step", "train_mlm_loss", "train_mask_loss", "train_nsp_loss", "val_mlm_loss", "val_mask_loss",
            "val_unchanged_accuracy", "val_nsp_accuracy")
    return [tuple(record.get(key) for key in keys) for record in map(json.loads, lines)]


def test_train_writes_checkpoints_curves_and_summary(tiny, tmp_path, capsys):
    summary = train.main([*tiny, f"--OUT_DIR={tmp_path}", "--USE_NSP=true"])  # both of BERT's tasks
    names = sorted(p.name for p in tmp_path.glob("bert_iter*.pt"))
    assert len(names) == 2 and names[1].startswith("bert_iter20_loss")
    assert (tmp_path / "loss.png").read_bytes()[:8] == PNG
    assert [record[0] for record in losses(tmp_path)] == list(range(1, 21))
    out = capsys.readouterr().out
    for row in ("BERT (this run)", "bigram (both neighbours)", "unigram (most frequent token)",
                "copy the visible token", "NSP accuracy", "tokens/s", "GFLOP/s"):
        assert row in out
    # The headline at [MASK], each kind of position apart, and the four baselines on the same targets.
    for kind in ("mask", "random", "unchanged", "mlm"):
        for predictor in ("", "unigram_", "copy_", "bigram_"):
            assert 0 <= summary[f"val_{predictor}{kind}_accuracy"] <= 1
        for predictor in ("", "unigram_", "bigram_"):
            assert summary[f"val_{predictor}{kind}_loss"] > 0
    assert summary["val_copy_unchanged_accuracy"] == 1.0 and summary["val_copy_random_accuracy"] == 0.0
    assert summary["val_copy_mask_accuracy"] == summary["val_unigram_mask_accuracy"]  # both: most frequent
    assert 0.5 <= summary["val_nsp_majority_accuracy"] <= 1 and 0 < summary["val_nsp_standard_error"] < 0.5
    assert summary["tokens_per_second"] > 0 and summary["wall_seconds"] > 0 and summary["matmul_flops"] > 1e8
    assert summary["val_mlm_loss"] < math.log(512)  # below a uniform guess over 512 tokens: learned something


def test_mlm_only_run_has_no_nsp_metrics(tiny, tmp_path):
    summary = train.main([*tiny, f"--OUT_DIR={tmp_path}", "--USE_NSP=false", "--MAX_ITERS=10"])
    assert "val_nsp_accuracy" not in summary and "val_mask_accuracy" in summary
    assert all(record[3] is None for record in losses(tmp_path))


def test_ctrl_c_then_resume_continues_the_same_run_bit_for_bit(tiny, tmp_path, monkeypatch, capsys,
                                                                interrupt_at):
    uninterrupted, interrupted = tmp_path / "a", tmp_path / "b"
    train.main([*tiny, f"--OUT_DIR={uninterrupted}"])

    monkeypatch.setattr(training_run, "GracefulInterrupt", interrupt_at(7))  # inside StepReport
    with pytest.raises(SystemExit) as stop:
        train.main([*tiny, f"--OUT_DIR={interrupted}"])
    assert stop.value.code == 0 and "--RESUME=latest" in capsys.readouterr().out
    assert [p.name.split("_loss")[0] for p in interrupted.glob("*.pt")] == ["bert_iter7"]
    monkeypatch.undo()

    train.main([*tiny, f"--OUT_DIR={interrupted}", "--RESUME=latest"])
    assert losses(interrupted) == losses(uninterrupted)  # every step, both tasks, train and val, exactly


def test_resume_refuses_a_different_model(tiny, tmp_path):
    train.main([*tiny, f"--OUT_DIR={tmp_path}", "--MAX_ITERS=10"])
    with pytest.raises(CourseError, match="--N_LAYER=2"):
        train.main([*tiny, f"--OUT_DIR={tmp_path}", "--RESUME=latest", "--N_LAYER=3"])


def test_embed_fills_blanks_and_compares_contexts(tiny, tmp_path):
    train.main([*tiny, f"--OUT_DIR={tmp_path}"])
    result = embed.main([*tiny, f"--OUT_DIR={tmp_path}", "--TEXT=The [MASK] of the [MASK].", "--TOP_K=3",
                         "--WORD=zzzz", "--CONTEXTS=4"])
    assert len(result["predictions"]) == 2 and all(len(top) == 3 for top in result["predictions"])
    assert all(0 <= p <= 1 and token.isalpha() for top in result["predictions"] for token, p in top)  # words
    assert len(result["pairs"]) == len(embed.MINIMAL_PAIRS)
    assert result["word"] != "zzzz" and 2 <= len(result["contexts"]) <= 4  # fell back to a frequent word
    untrained, trained, static = result["rows"].values()
    for row in (untrained, trained, static):
        assert torch.allclose(row["similarity"].diagonal(), torch.ones(len(result["contexts"])).double())
        assert -1 <= row["floor"] < row["same_word"] <= 1 + 1e-9  # the same word beats different words
    assert static["same_word"] == pytest.approx(1)  # one vector per word
    # Contextual: the same word gets different vectors in different sentences. With rotary positions (the
    # preset's) nothing but attention over the context can make them differ, and after 20 steps attention is
    # still nearly uniform: they differ by about 2e-5, a hundred times float32's rounding. (With the learned
    # table they differ by 0.17, but that is mostly the word's different positions, not its context.)
    assert trained["similarity"].min() < 1 - 2e-6
    # The tiny corpus holds too few noun/verb occurrences for the sense test (tests/test_embed.py runs it on a
    # corpus built for it); where it does hold some, the static vectors are at chance.
    for scores in result["senses"].values():
        assert scores["Word2Vec"]["nn_accuracy"] == scores["Word2Vec"]["chance"]
    assert (tmp_path / "embeddings.png").read_bytes()[:8] == PNG


def test_embed_needs_a_mask(tiny, tmp_path):
    train.main([*tiny, f"--OUT_DIR={tmp_path}", "--MAX_ITERS=2"])
    with pytest.raises(CourseError, match=r"needs at least one \[MASK\]"):
        embed.main([*tiny, f"--OUT_DIR={tmp_path}", "--TEXT=no blank here"])


def test_summary_has_the_nsp_rule_and_evaluations_log_neighbour_attention(tiny, tmp_path, capsys):
    summary = train.main([*tiny, f"--OUT_DIR={tmp_path}", "--USE_NSP=true"])
    rule = summary["val_overlap_nsp_accuracy"]
    assert 0 <= rule <= 1
    assert f"shared rare tokens, no model: {rule:.1%};" in capsys.readouterr().out
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    evaluations = [r for r in records if "val_mask_loss" in r]
    assert [r["step"] for r in evaluations] == [10, 20]
    for record in evaluations:  # 2 layers, the token before and after, and the even spread
        weights = {k: v for k, v in record.items() if k.startswith("val_attention_")}
        assert len(weights) == 5 and all(0 <= v <= 1 for v in weights.values())
    assert not any(k.startswith("val_attention_") for r in records if "val_mask_loss" not in r for k in r)


def test_the_nsp_rule_and_the_attention_logging_leave_training_as_it_was(tiny, tmp_path, monkeypatch):
    train.main([*tiny, f"--OUT_DIR={tmp_path / 'with'}", "--USE_NSP=true"])
    monkeypatch.setattr(train, "neighbour_attention", lambda model, batch: {})
    monkeypatch.setattr(baselines, "nsp_fitting_pairs", lambda split, cfg, vocab_size: None)  # no NSP rule
    summary = train.main([*tiny, f"--OUT_DIR={tmp_path / 'without'}", "--USE_NSP=true"])
    assert "val_overlap_nsp_accuracy" not in summary
    assert losses(tmp_path / "with") == losses(tmp_path / "without")  # every step, exactly


def test_sweep_gives_each_candidate_the_preset_time_and_reports_seeds(tmp_path, monkeypatch, capsys):
    """--MINUTES=preset: the preset's candidate gets the preset's steps, a faster one more in the same time;
    --SEEDS: one run per seed, each in its own folder with its own --SEED."""
    shape, changes, warmup = sweep.CANDIDATES[sweep.PRESET_CANDIDATE]  # the preset, as a candidate
    assert {**sweep.SHAPES[shape], **changes}.items() <= {**settings(config), **config.PRESETS["cpu"]}.items()
    assert warmup * config.PRESETS["cpu"]["MAX_ITERS"] == config.PRESETS["cpu"]["WARMUP_ITERS"]
    monkeypatch.setattr(sweep, "OUT_DIR", tmp_path)
    base = sweep.size(sweep.PRESET_CANDIDATE)
    (tmp_path / "step_seconds.json").write_text(json.dumps({base: 0.2, sweep.size("no-dropout"): 0.1}))
    calls = []

    def fake_training(module, settings, out_dir):
        calls.append((settings, out_dir))
        out_dir.mkdir(parents=True, exist_ok=True)
        seed = int(next(s for s in settings if s.startswith("--SEED="))[7:])
        return {"steps": 1, "val_mask_loss": 5.0 - seed / 100, "val_unigram_mask_loss": 7.0,
                "val_bigram_mask_loss": 4.5, "val_mask_accuracy": 0.2, "val_unigram_mask_accuracy": 0.04}

    monkeypatch.setattr(sweep, "train_in_new_process", fake_training)
    monkeypatch.setattr(sweep, "shared_targets", lambda summary, out_dir: {
        f"shared_{key[4:]}": value for key, value in summary.items() if key.startswith("val_")})
    results = sweep.main(["--MINUTES=preset", "--SEEDS=1,3", sweep.PRESET_CANDIDATE, "no-dropout"])
    steps = {out.name: next(s for s in settings if s.startswith("--MAX_ITERS=")) for settings, out in calls}
    preset = sweep.PRESET_CANDIDATE
    assert steps == {f"{preset}-seed1": "--MAX_ITERS=2000", "no-dropout-seed1": "--MAX_ITERS=4000",
                     f"{preset}-seed3": "--MAX_ITERS=2000", "no-dropout-seed3": "--MAX_ITERS=4000"}
    budget = tmp_path / f"{2000 * 0.2 / sweep.STEP_SHARE / 60:g}min"  # the preset's 2,000 steps of 0.2 s
    assert all(out_dir.parent == budget for _, out_dir in calls)
    assert len(results) == 4
    out = capsys.readouterr().out
    assert "mean over seeds 1, 3" in out and "2.020 ( 2.010 ..  2.030)" in out  # 7 - (5 - seed / 100)
    # A run left by another budget (the machine timed again since) is not reported as this one's.
    (budget / "no-dropout-seed1" / "summary.json").write_text(json.dumps({"steps": 3999}))
    with pytest.raises(CourseError, match="holds a run of 3999 steps"):
        sweep.main(["--MINUTES=preset", "--SEEDS=1", "no-dropout"])


def test_sweep_scores_every_candidate_on_the_same_targets(tiny, tmp_path):
    """Two runs whose own validation targets differ (MLM only at 30%; MLM + NSP at 15%) are scored on the same
    contiguous pairs masked 15%: the same bigram baseline for both, kept in each run's summary.json."""
    own = train.main([*tiny, f"--OUT_DIR={tmp_path / 'a'}", "--MAX_ITERS=10"])
    bert = train.main([*tiny, f"--OUT_DIR={tmp_path / 'b'}", "--MAX_ITERS=10", "--USE_NSP=true",
                       "--MLM_PROB=0.15"])
    assert own["val_bigram_mask_loss"] != bert["val_bigram_mask_loss"]
    shared = [sweep.shared_targets(summary, tmp_path / name) for summary, name in ((own, "a"), (bert, "b"))]
    assert shared[0]["shared_bigram_mask_loss"] == shared[1]["shared_bigram_mask_loss"]
    assert shared[0]["shared_mask_loss"] != shared[1]["shared_mask_loss"]  # two models, one set of targets
    kept = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert kept["shared_mask_loss"] == shared[0]["shared_mask_loss"]
    assert sweep.shared_targets(kept, tmp_path / "a") == {}  # worked out once
