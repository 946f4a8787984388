"""The exercises' worked solutions at a tiny size: each runs end to end on sweeps that train in seconds.

At this size no loss means anything, so what is checked is what the code guarantees: exercise 1 trains the
same runs under two schedules and fits both, exercise 2 compares shapes of nearly equal N and refuses shapes
that are not, exercise 3's plans are Chinchilla's closed form at the compute the minutes buy.

Approach 3's fit starts L-BFGS once, from Chinchilla's constants, instead of from the grid search: the
search is tests/test_laws.py's business, and what these tests check does not depend on where the fit
starts.
"""

import json
import math

import numpy as np
import pytest

from common.errors import CourseError
from phase1_foundation.project4_scaling import chinchilla, planner
from phase1_foundation.project4_scaling.exercises import (
    ex1_cosine_too_long,
    ex2_width_vs_depth,
    ex3_plan_your_gpu_hour,
)
from phase1_foundation.project4_scaling.results import read_results


@pytest.fixture
def tiny(corpus_file, tmp_path_factory):
    """tests/test_train.py's tiny settings, without the sweep itself (budgets, shapes, folder)."""
    data_dir = tmp_path_factory.getbasetemp() / "prepared4"  # shared: prepared once per session
    return [
        f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={data_dir}", "--DEVICE=cpu", "--PRESET=cpu",
        "--BLOCK_SIZE=16", "--BATCH_SIZE=4", "--MIN_STEPS=4", "--VAL_TOKENS=512",
    ]


@pytest.fixture
def one_start(monkeypatch):
    fit_parametric = chinchilla.fit_parametric
    monkeypatch.setattr(chinchilla, "fit_parametric", lambda n, d, loss: fit_parametric(
        n, d, loss, start=planner.PUBLISHED_SURFACES["paper-rounded"]))


def test_ex1_trains_the_same_runs_under_both_cycles_and_fits_both(tiny, tmp_path, one_start):
    results = ex1_cosine_too_long.main([*tiny, "--BUDGETS=2e7,5e7", "--SHAPES=1x16,2x16,1x32",
                                        f"--OUT_DIR={tmp_path}"])
    rows = results["rows"]
    names = [f"kaplan_{budget}_{shape}" for budget in ("2e7", "5e7") for shape in ("1x16", "2x16", "1x32")]
    assert [row["name"] for row in rows[1.0]] == [row["name"] for row in rows[2.0]] == names
    for stretch in (1.0, 2.0):
        assert {row["settings"]["COSINE_STRETCH"] for row in rows[stretch]} == {stretch}
        assert (tmp_path / f"stretch_{stretch:g}" / "results.jsonl").is_file()
    # Only the schedule differs, and it changes every run's loss.
    def run(row: dict) -> tuple:
        return row["params"], row["tokens"], row["steps"], row["peak_lr"]

    assert list(map(run, rows[1.0])) == list(map(run, rows[2.0]))
    assert all(change != 0 for change in results["changes"].values())
    for fit in results["fits"].values():
        a, b = fit["Approach 3"]  # a + b = 1 (C = 6ND), or both not identified: on runs this tiny either
        assert (math.isnan(a) and math.isnan(b)) or a + b == pytest.approx(1)
        assert all(math.isfinite(x) for x in fit["Approach 1"])


def test_ex1_refuses_a_cycle_no_longer_than_the_run(tmp_path):
    with pytest.raises(CourseError, match="error: --COSINE_STRETCH=1 is no longer than the run"):
        ex1_cosine_too_long.main(["--COSINE_STRETCH=1", f"--OUT_DIR={tmp_path}"])


def test_ex2_sets_the_shapes_spread_beside_the_doubled_n(tiny, tmp_path):
    # 1x16 and 4x8 have 3,312 and 3,504 non-embedding parameters; 2x16 has 6,592
    results = ex2_width_vs_depth.main([*tiny, "--BUDGETS=5e7", "--SHAPES=1x16,4x8", "--DOUBLE=2x16",
                                       f"--OUT_DIR={tmp_path}"])
    losses = results["losses"]
    assert set(losses) == {"1x16", "4x8"} and results["aspect_ratios"] == [16, 2]
    assert results["spread"] == pytest.approx(max(losses.values()) - min(losses.values()))
    rows = read_results(tmp_path / "results.jsonl")
    assert [row["name"] for row in rows] == ["kaplan_5e7_1x16", "kaplan_5e7_4x8", "kaplan_5e7_2x16"]
    doubled = rows[-1]["val_loss"]
    assert results["double_gap"] == pytest.approx(doubled - min(losses.values()))


@pytest.mark.parametrize("settings, message", [
    (["--SHAPES=1x16,1x32"], "within 15% of each other in N; these have N = 3,312, 12,768"),
    (["--BUDGETS=1e10,3e10"], "pass one budget"),
])
def test_ex2_refuses_before_training(settings, message, tmp_path):
    with pytest.raises(CourseError, match=message):
        ex2_width_vs_depth.main([*settings, "--DEVICE=cpu", f"--OUT_DIR={tmp_path}"])
    assert not (tmp_path / "results.jsonl").exists()


def test_ex3_plans_the_compute_the_minutes_buy(tmp_path):
    results = ex3_plan_your_gpu_hour.main(["--DEVICE=cpu", "--GPU=A100", "--MFU=0.5", "--PLAN_MINUTES=30",
                                           f"--OUT_DIR={tmp_path}"])  # no sweep there: published constants
    assert results["compute"] == pytest.approx(30 * 60 * 312e12 * 0.5)
    plans = results["plans"]
    assert list(plans) == list(planner.PUBLISHED_SURFACES)
    for name, plan in plans.items():
        n_opt, d_opt = planner.ChinchillaPlanner(name).get_optimal_params_and_tokens(results["compute"])
        assert (plan["n_opt"], plan["d_opt"]) == pytest.approx((n_opt, d_opt))
        assert plan["n_shape"] == planner.all_parameters(*plan["shape"], 50257, 1024)  # GPT-2's tables
        # the planned shape on D_opt tokens takes the 30 minutes, scaled by how far its N is from N_opt
        assert plan["minutes"] == pytest.approx(30 * plan["n_shape"] / n_opt)


def test_ex3_adds_the_plan_of_your_own_sweep(tmp_path, one_start):
    # A sweep whose losses lie exactly on Epoch AI's surface: the fit must find it, and plan as it does.
    surface, rows = planner.PUBLISHED_SURFACES["epoch-2024"], []
    for budget in (1e9, 1e10, 1e11):
        for n in np.geomspace(1e3, 1e5, 5):
            d = budget / (6 * n)
            rows.append({"name": f"kaplan_{budget:.0e}_{n:.0f}", "counting": "kaplan", "budget": budget,
                         "params": n, "params_total": n, "tokens": d, "flops": budget,
                         "flops_chinchilla": budget, "val_loss": float(surface.loss(n, d))})
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = ex3_plan_your_gpu_hour.main(["--DEVICE=cpu", "--PEAK_TFLOPS=100", f"--OUT_DIR={tmp_path}"])
    assert results["peak_flops"] == 100e12
    ours, epoch = results["plans"]["your sweep"], results["plans"]["epoch-2024"]
    assert ours["a"] == pytest.approx(surface.a, abs=0.01)
    assert ours["n_opt"] == pytest.approx(epoch["n_opt"], rel=0.1)
    with pytest.raises(CourseError, match="error: no peak listed for --GPU=B300"):
        ex3_plan_your_gpu_hour.main(["--DEVICE=cpu", "--GPU=B300", f"--OUT_DIR={tmp_path}"])


def test_ex4_moves_the_threshold_with_the_answer_length(tmp_path, capsys):
    from phase1_foundation.project4_scaling.exercises import ex4_answer_length

    rows = [  # three sizes' scores on 2-digit answers, position by position, and their prefix exact match
        {"variant": "plain", "shape": "1x8", "params": 888, "digit_accuracy": [0.9, 0.1],
         "prefix_exact_match": [0.9, 0.1]},
        {"variant": "plain", "shape": "2x32", "params": 25472, "digit_accuracy": [1.0, 0.2],
         "prefix_exact_match": [1.0, 0.2]},
        {"variant": "plain", "shape": "2x32", "params": 25472, "digit_accuracy": [1.0, 0.6],
         "prefix_exact_match": [1.0, 0.6]},  # a second seed: 2x32's two-digit exact match is their mean, 0.4
        {"variant": "plain", "shape": "2x64", "params": 100096, "digit_accuracy": [1.0, 0.8],
         "prefix_exact_match": [1.0, 0.8]},
        {"variant": "scratchpad", "shape": "1x8", "params": 888, "digit_accuracy": [1.0, 1.0],
         "prefix_exact_match": [1.0, 1.0]},  # another variant: left out
    ]
    (tmp_path / "emergence.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    found = ex4_answer_length.main([f"--OUT_DIR={tmp_path}", "--DEVICE=cpu", "--PRESET=cpu"])
    # One digit: the smallest; two: the largest (2x32's mean is 0.33 above chance, though one seed is 0.56).
    assert [item["params"] for item in found] == [888, 100096]
    # Sums of two 1-digit operands: 55 of the 100 start with 0, and 9 is the commonest sum (10 of 100).
    assert [item["chance"] for item in found] == [pytest.approx(0.55), pytest.approx(0.10)]
    assert found[0]["above_chance"][0] == pytest.approx((0.9 - 0.55) / 0.45)
    assert found[1]["gap"] == pytest.approx(0.1 - 0.9 * 0.1)  # the 1x8 model: measured against the product
    assert "reaches 0.50 above chance at 100,096 parameters (2x64)" in capsys.readouterr().out
    assert ex4_answer_length.main([f"--OUT_DIR={tmp_path}", "--THRESHOLD=0.3", "--DEVICE=cpu",
                                   "--PRESET=cpu"])[1]["params"] == 25472
    with pytest.raises(CourseError, match="error: no results at .*emergence.jsonl; run .*emergence.py first"):
        ex4_answer_length.main([f"--OUT_DIR={tmp_path / 'none'}", "--DEVICE=cpu", "--PRESET=cpu"])


def test_ex5_predicts_a_budget_four_times_the_largest_then_trains_it(tiny, tmp_path, capsys):
    from phase1_foundation.project4_scaling import train
    from phase1_foundation.project4_scaling.exercises import ex5_predict_then_train

    settings = [*tiny, "--COUNTINGS=kaplan", "--SHAPES=1x16,2x16,1x32", f"--OUT_DIR={tmp_path}",
                "--RESAMPLES=5"]
    train.main([*settings, "--BUDGETS=1e7,2e7,4e7"])
    found = ex5_predict_then_train.main(settings)
    assert found["predicted"]["budget"] == 1.6e8
    rows = read_results(tmp_path / "prediction" / "results.jsonl")
    assert rows and {row["budget"] for row in rows} == {1.6e8} and {row["counting"] for row in rows} == {
        "kaplan"}
    assert found["measured"]["runs"] == len(rows)
    printed = capsys.readouterr().out
    assert "predict, then train: the kaplan counting's minima carried to C = 1.6e+08" in printed
    assert "What the course measured" in printed
