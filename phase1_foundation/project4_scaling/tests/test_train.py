"""The sweep: the runs it plans, the data each reads, its schedule, the results file, resuming, --ONLY."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from common.data.tokens import read_meta
from common.errors import CourseError
from phase1_foundation.project4_scaling import download_data, laws, planner, train
from phase1_foundation.project4_scaling.model import GPTConfig, flops_per_token, non_embedding_parameters
from phase1_foundation.project4_scaling.sweep import Run, affordable_runs, parse_shape, planned_runs
from phase1_foundation.project4_scaling.train import EpochBatches, kaplan_learning_rate

TIMING = ("wall_s", "tokens_per_s")  # the only fields two identical runs may disagree on


@pytest.fixture
def tiny(corpus_file, tmp_path_factory, tmp_path):
    """A sweep of three shapes at two budgets that trains in a few seconds."""
    data_dir = tmp_path_factory.getbasetemp() / "prepared4"  # shared: prepared once per session
    return [
        f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={data_dir}", "--DEVICE=cpu", "--PRESET=cpu",
        "--COUNTINGS=kaplan", "--BUDGETS=2e7,5e7", "--SHAPES=1x16,2x16,1x32", "--BLOCK_SIZE=16",
        "--BATCH_SIZE=4", "--MIN_STEPS=4", "--MIN_CHAR_COUNT=1",
        "--VAL_TOKENS=512", f"--OUT_DIR={tmp_path / 'sweep'}",
    ]


def rows_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timing(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in rows]


def test_planned_runs_buy_d_equal_c_over_flops_per_token_in_each_counting():
    cfg = type("cfg", (), dict(COUNTINGS=("kaplan", "chinchilla"), BUDGETS=(1e9, 1e10),
                               CHINCHILLA_BUDGETS=(3e10,), SHAPES=("2x32", "1x16"), HEAD_SIZE=16,
                               BLOCK_SIZE=16, BATCH_SIZE=4, MIN_STEPS=200, SEED=7, NOISE_BUDGETS=(1e8,),
                               NOISE_SEEDS=3))
    runs, too_short = planned_runs(cfg, vocab_size=100)
    every = runs + too_short
    assert len(every) == 6 and all(run.seed == 7 and not run.repeat for run in every)
    for run in every:
        assert run.params == non_embedding_parameters(run.n_layer, run.n_embd)
        assert run.tokens == run.steps * 64
        shape = GPTConfig(vocab_size=100, block_size=16, n_layer=run.n_layer, n_head=run.n_embd // 16,
                          n_embd=run.n_embd)
        per_token = 6 * run.params if run.counting == "kaplan" else flops_per_token(shape, "chinchilla")
        assert run.flops_per_token == per_token
        assert abs(run.tokens - run.budget / per_token) <= 32  # within half a step of C / (FLOPs per token)
    # by counting, budget, then size
    assert [r.name for r in runs] == ["kaplan_1e9_1x16", "kaplan_1e10_1x16", "kaplan_1e10_2x32",
                                      "chinchilla_3e10_1x16", "chinchilla_3e10_2x32"]
    assert [r.name for r in too_short] == ["kaplan_1e9_2x32"] and too_short[0].steps < 200
    # at NOISE_BUDGETS of Kaplan's budgets, every shape again with NOISE_SEEDS - 1 more seeds
    cfg.NOISE_BUDGETS = (1e10, 3e10)
    runs, _ = planned_runs(cfg, vocab_size=100)
    assert [(r.name, r.seed) for r in runs if r.budget == 1e10 and r.counting == "kaplan"] == [
        ("kaplan_1e10_1x16", 7), ("kaplan_1e10_1x16_seed8", 8), ("kaplan_1e10_1x16_seed9", 9),
        ("kaplan_1e10_2x32", 7), ("kaplan_1e10_2x32_seed8", 8), ("kaplan_1e10_2x32_seed9", 9)]
    assert len(runs) == 9 and sum(r.repeat for r in runs) == 4


def test_a_run_that_would_read_the_text_too_often_is_left_out():
    runs = [Run("kaplan", 1e9, 1, 16, 3312, 6 * 3312, steps, steps * 64, seed=1) for steps in (10, 40)]
    kept, too_long = affordable_runs(runs, train_tokens=1000, max_epochs=2.5)
    assert kept == runs[:1] and too_long == runs[1:]


@pytest.mark.parametrize("text", ["4", "4x", "ax32", "0x32", "2x24"])
def test_a_bad_shape_is_one_line(text):
    with pytest.raises(CourseError, match="error: .*shape"):
        parse_shape(text, head_size=16)


def test_kaplan_learning_rate():
    # PAPER: Kaplan eq. D.1 at N = 1e6: 0.003239 - 0.0001395 * ln(1e6) = 0.0013117
    assert kaplan_learning_rate(10**6) == pytest.approx(0.0013117, abs=1e-7)
    assert kaplan_learning_rate(10**4) > kaplan_learning_rate(10**6)  # smaller models take larger steps


def test_each_epoch_reads_every_window_once_and_every_run_reads_the_same_order():
    tokens = np.arange(1001, dtype=np.uint16)  # token i is i: a window is known by its first token
    batches = EpochBatches(tokens, block_size=10, batch_size=4, device=torch.device("cpu"), seed=0)
    epochs = []
    for _ in range(2):
        firsts = []
        for _ in range(25):  # 100 windows of 10 inputs: the whole stream
            x, y = batches.next()
            assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)  # next tokens
            firsts += x[:, 0].tolist()
        assert sorted(firsts) == list(range(0, 1000, 10))  # every window once per epoch
        epochs.append(firsts)
    assert epochs[0] != epochs[1]  # each epoch in an order of its own
    again = EpochBatches(tokens, block_size=10, batch_size=4, device=torch.device("cpu"), seed=0)
    assert again.next()[0][:, 0].tolist() == epochs[0][:4]


def test_the_cosine_reaches_its_floor_at_the_last_step(tiny, monkeypatch):
    rates = []
    monkeypatch.setattr(train, "set_lr", lambda optimizer, lr: rates.append(lr))
    rows = train.main(tiny + ["--BUDGETS=2e7", "--SHAPES=1x16"])
    peak = rows[0]["peak_lr"]
    assert len(rates) == rows[0]["steps"]
    assert rates[-1] == pytest.approx(0.1 * peak) and max(rates) == pytest.approx(peak)

    rates.clear()  # a cycle twice the run's length: the run ends halfway down the cosine
    train.main(tiny + ["--BUDGETS=2e7", "--SHAPES=1x16", "--COSINE_STRETCH=2.0", "--OUT_DIR=" + str(
        tiny[-1].split("=", 1)[1]) + "-stretched"])
    assert rates[-1] == pytest.approx(peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2))), rel=0.05)


def test_sweep_writes_one_row_per_run_in_each_counting(tiny, tmp_path):
    rows = train.main(tiny + ["--COUNTINGS=kaplan,chinchilla", "--CHINCHILLA_BUDGETS=2e8"])
    assert rows == rows_of(tmp_path / "sweep" / "results.jsonl")
    assert [row["name"] for row in rows] == [
        "kaplan_2e7_1x16", "kaplan_2e7_2x16", "kaplan_2e7_1x32", "kaplan_5e7_1x16", "kaplan_5e7_2x16",
        "kaplan_5e7_1x32", "chinchilla_2e8_1x16", "chinchilla_2e8_2x16", "chinchilla_2e8_1x32"]
    for row in rows:
        assert row["flops"] == 6 * row["params"] * row["tokens"]
        spent = row["flops"] if row["counting"] == "kaplan" else row["flops_chinchilla"]
        per_token = spent / row["tokens"]
        assert abs(spent - row["budget"]) <= per_token * 32  # half a step of 64 tokens
        assert row["params_total"] > row["params"] and row["flops_chinchilla"] > row["flops"]
        assert math.isfinite(row["val_loss"]) and row["val_loss"] < math.log(200)


def test_the_noise_measurement_trains_each_shape_with_other_seeds_and_the_fits_leave_them_out(tiny, tmp_path):
    rows = train.main(tiny + ["--NOISE_BUDGETS=2e7", "--NOISE_SEEDS=2"])
    repeats = [row for row in rows if row["repeat"]]
    assert [row["name"] for row in repeats] == ["kaplan_2e7_1x16_seed1338", "kaplan_2e7_2x16_seed1338",
                                                "kaplan_2e7_1x32_seed1338"]
    by_name = {row["name"]: row for row in rows}
    for row in repeats:  # the same point with another seed: the same N and D, another loss
        first = by_name[row["name"].removesuffix("_seed1338")]
        assert (row["params"], row["tokens"], row["seed"]) == (first["params"], first["tokens"], 1338)
        assert row["val_loss"] != first["val_loss"]
    assert laws.Sweep.from_rows(rows, "kaplan").loss.size == 6  # each point of the design once
    measured, points = laws.noise_of(rows)
    assert sorted(points) == ["kaplan_2e7_1x16", "kaplan_2e7_1x32", "kaplan_2e7_2x16"]
    assert sorted(tokens for tokens, _ in measured) == sorted(by_name[name]["tokens"] for name in points)
    for _, deviations in measured:  # two seeds: deviations from their mean, equal and opposite
        assert deviations.size == 2 and deviations[0] == pytest.approx(-deviations[1])


def test_a_stopped_sweep_ends_with_the_same_results_file(tiny, tmp_path, monkeypatch, interrupt_at):
    uninterrupted = without_timing(train.main(tiny + [f"--OUT_DIR={tmp_path / 'whole'}"]))

    monkeypatch.setattr(train, "GracefulInterrupt", interrupt_at(40))  # Ctrl-C during the third run
    stopped = train.main(tiny)
    assert 0 < len(stopped) < len(uninterrupted)
    monkeypatch.undo()
    resumed = train.main(tiny)
    assert without_timing(resumed) == uninterrupted
    assert without_timing(rows_of(tmp_path / "sweep" / "results.jsonl")) == uninterrupted

    again = train.main(tiny)  # nothing left to train: the file is read back unchanged
    assert again == resumed


def test_only_trains_one_point_again(tiny, tmp_path):
    first = train.main(tiny)
    path = tmp_path / "sweep" / "results.jsonl"
    stale = rows_of(path)
    stale[1]["val_loss"] = 99.0  # mark a row, to see that --ONLY replaces exactly that one
    path.write_text("".join(json.dumps(row) + "\n" for row in stale))
    train.main(tiny + ["--ONLY=kaplan_2e7_2x16"])
    after = rows_of(path)
    assert without_timing(after) == without_timing(first)
    with pytest.raises(CourseError, match="error: no run named kaplan_1e7_9x16"):
        train.main(tiny + ["--ONLY=kaplan_1e7_9x16"])


def test_results_made_with_other_settings_are_refused(tiny):
    train.main(tiny + ["--BUDGETS=2e7", "--SHAPES=1x16"])
    with pytest.raises(CourseError, match="error: .*other settings .*BLOCK_SIZE 16 \\(now 8\\).*--OUT_DIR"):
        train.main(tiny + ["--BUDGETS=2e7", "--SHAPES=1x16", "--BLOCK_SIZE=8"])


def test_download_data_says_what_the_longest_run_needs(tiny, capsys):
    download_data.main(tiny + ["--BUDGETS=2e7,1e12"])
    out = capsys.readouterr().out
    assert "the longest, kaplan_2e7_1x16, reads" in out
    assert ("left out, as they would read the text more than MAX_EPOCHS=4 times: kaplan_1e12_1x16, "
            "kaplan_1e12_2x16, kaplan_1e12_1x32") in out


def test_the_planner_turns_minutes_into_a_run_that_train_py_trains(tiny, tmp_path, capsys):
    train.main(tiny)
    numbers = laws.main(tiny + ["--RESAMPLES=2", "--PLAN_MINUTES=0.002", "--PLAN_CONSTANTS=paper-rounded"])
    printed = capsys.readouterr().out
    assert ("an extrapolation: the paper-rounded constants were fitted to subword tokens at 1.4e+18 "
            "FLOPs and more") in printed and "decades above this budget" in printed
    plan = numbers["plan"]
    assert plan["flops_per_second"] > 0
    assert plan["compute"] == pytest.approx(0.002 * 60 * plan["flops_per_second"])
    n_opt, d_opt = planner.ChinchillaPlanner("paper-rounded").get_optimal_params_and_tokens(plan["compute"])
    assert (plan["n_opt"], plan["d_opt"]) == (n_opt, d_opt)
    settings = plan["command"].split()[4:]  # after "uv run python .../train.py"
    n_layer, d_model = plan["shape"]
    assert settings[0].startswith("--BUDGETS=") and settings[1] == f"--SHAPES={n_layer}x{d_model}"
    rows = train.main(tiny + settings)
    assert len(rows) == 1 and (rows[0]["n_layer"], rows[0]["d_model"]) == (n_layer, d_model)
    # the command's budget, in train.py's kaplan counting, buys the planned shape D_opt tokens
    assert abs(rows[0]["tokens"] - plan["d_opt"]) <= 0.005 * plan["d_opt"] + 32
    data_dir = Path(tiny[1].split("=", 1)[1]) / "project4" / rows[0]["settings"]["data"]
    assert plan["passes"] == pytest.approx(plan["d_opt"] / read_meta(data_dir)["train_tokens"])
