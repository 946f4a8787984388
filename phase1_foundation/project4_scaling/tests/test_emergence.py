"""emergence.py and its parts: the addition format and its scratchpad (addition.py); the edit distance, the
metrics on hand-written answers and the evaluator against models whose answers we chose, the log-likelihood by
hand (evaluate.py); the report's mean and range over seeds on hand-made rows, and the script end to end at a
tiny size."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from common.errors import CourseError
from phase1_foundation.project4_scaling import addition, emergence
from phase1_foundation.project4_scaling.addition import VOCAB, Addition, ProblemStream, decode, encode
from phase1_foundation.project4_scaling.evaluate import EmergenceEvaluator, answer_scores, edit_distance
from phase1_foundation.project4_scaling.model import GPT

TINY = ["--DEVICE=cpu", "--PRESET=cpu", "--EM_SHAPES=1x8,1x16", "--EM_TOKENS=3000", "--EM_BATCH_SIZE=4",
        "--EM_EVAL_PROBLEMS=16", "--EM_SEEDS=2"]
PROBLEMS = np.array([[123, 45], [500, 500], [999, 999]])  # answers 0168, 1000, 1998
EXEMPLARS = np.array([[[1, 2]], [[30, 40]], [[600, 700]]])  # one solved problem before each query


class Scripted(nn.Module):
    """Stands in for a GPT whose greedy lines we chose, and whose logits put all mass on the correct
    continuation of whatever it reads (an oracle for the log-likelihood)."""

    def __init__(self, lines: list[str]):
        super().__init__()
        self.new = torch.tensor([encode(line) for line in lines])
        self.prompts = None

    def greedy(self, idx, max_new_tokens):
        self.prompts = idx
        assert max_new_tokens == self.new.size(1)
        return self.new

    def forward(self, idx):
        targets = torch.cat((idx[:, 1:], torch.full((idx.size(0), 1), VOCAB.index("\n"))), dim=1)  # (B, T)
        return 100.0 * nn.functional.one_hot(targets, len(VOCAB)).float(), None  # (B, T, V)


def tiny_gpt(task: Addition, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return emergence.make_model(task, "2x16", shots=1, head_size=8, device=torch.device("cpu")).eval()


# --- the task -----------------------------------------------------------------------------------------------

def test_lines_are_fixed_width_zero_padded_and_round_trip_through_the_vocabulary():
    plain, scratch = Addition(3, "plain"), Addition(3, "scratchpad")
    assert plain.line(123, 45) == "123+045=0168\n" and plain.query(123, 45) == "123+045="
    assert scratch.line(987, 45) == "987+045=12,13,10>1032\n"
    assert plain.row(np.array([[1, 2], [3, 4]])) == "add:\n001+002=0003\n003+004=0007\n"
    rng = np.random.default_rng(0)
    for task in (plain, scratch):
        lengths = {len(task.line(a, b)) for a, b in rng.integers(0, 1000, size=(200, 2)).tolist()}
        assert len(lengths) == 1  # every prompt the same length: greedy decoding runs on a batch
        row = task.row(rng.integers(0, 1000, size=(3, 2)))
        assert decode(encode(row)) == row
    assert plain.final_answer("0168") == "0168"
    assert scratch.final_answer("12,13,10>1032") == "1032" and scratch.final_answer("12,13,10") == ""


@pytest.mark.parametrize("digits", [1, 3, 6])
def test_the_scratchpad_steps_are_the_column_sums_with_their_carries(digits):
    task = Addition(digits, "scratchpad")
    for a, b in np.random.default_rng(digits).integers(0, 10**digits, size=(300, 2)).tolist():
        steps, _, answer = task.completion(a, b).rstrip("\n").partition(">")
        sums, carry = [int(s) for s in steps.split(",")], 0
        assert len(sums) == digits
        for column, total in enumerate(sums):  # units first
            assert total == (a // 10**column) % 10 + (b // 10**column) % 10 + carry
            carry = total // 10
        assert answer == str(carry) + "".join(str(s % 10) for s in reversed(sums))
        assert answer == f"{a + b:0{digits + 1}d}"


def test_the_training_stream_never_draws_a_held_out_problem_and_scores_only_completions():
    held_out = np.array([[a, b] for a in range(10) for b in range(10) if (a + b) % 2])  # half of all 100
    drawn = ProblemStream(1, held_out, seed=0).draw(2000)
    assert not {tuple(p) for p in drawn.tolist()} & {tuple(p) for p in held_out.tolist()}
    task = Addition(3, "plain")
    x, y = addition.training_batch(task, ProblemStream(3, held_out, seed=0), 2, 1, torch.device("cpu"))
    row = decode(x[0].tolist()) + "\n"
    scored = "".join(row[t + 1] for t in range(y.size(1)) if y[0, t] != -100)
    lines = row.splitlines(keepends=True)[1:]
    assert scored == "".join(line.partition("=")[2] for line in lines)  # the answers and their newlines


def test_edit_distance_on_hand_cases():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("0168", "0168") == 0
    assert edit_distance("0178", "0168") == 1  # a substitution
    assert edit_distance("168", "0168") == 1  # an insertion
    assert edit_distance("", "0168") == 4 and edit_distance("0168", "") == 4
    assert edit_distance([1, 2, 3], [3, 2, 1]) == 2


# --- the metrics and the evaluator -------------------------------------------------------------------------

HAND = {  # four problems, their answers, and a model's answers written by hand
    "problems": np.array([[123, 45], [500, 500], [999, 999], [250, 250]]),
    "answers": ["0168", "1000", "1998", "0500"],
    "lines": ["0168\n", "1001\n", "1998\n", "05\n99"],  # right; last digit wrong; right; cut short after 2
}


def test_exact_match_follows_the_product_of_the_positions_not_the_mean_to_the_lth():
    scores = answer_scores([line.partition("\n")[0] for line in HAND["lines"]], HAND["answers"])
    assert scores["exact_match"] == 2 / 4
    assert scores["digit_accuracy"] == [1, 1, 3 / 4, 2 / 4]  # columns: 4, 4, 3 and 2 of the 4 right
    assert scores["position_product"] == pytest.approx(1 * 1 * 3 / 4 * 2 / 4)  # 0.375
    assert scores["per_digit"] == pytest.approx(13 / 16)
    assert scores["per_digit_power"] == pytest.approx((13 / 16) ** 4)  # 0.436: further from 0.5 than 0.375
    assert scores["prefix_exact_match"] == [1, 1, 3 / 4, 2 / 4]
    assert scores["edit_distance"] == pytest.approx((0 + 1 + 0 + 2) / 4)
    evaluator = EmergenceEvaluator(Addition(3, "plain"), HAND["problems"], np.zeros((4, 1, 2), dtype=int),
                                   torch.device("cpu"))
    assert evaluator.answers == HAND["answers"]
    model_scores = evaluator.score(Scripted(HAND["lines"]))
    assert {key: model_scores[key] for key in scores} == scores



def test_an_oracle_scores_exact_match_1_edit_distance_0_and_log_likelihood_0():
    task = Addition(3, "plain")
    evaluator = EmergenceEvaluator(task, PROBLEMS, EXEMPLARS, torch.device("cpu"))
    oracle = Scripted(["0168\n", "1000\n", "1998\n"])
    scores = evaluator.score(oracle)
    assert scores["exact_match"] == 1 and scores["per_digit"] == 1 and scores["edit_distance"] == 0
    assert scores["log_likelihood"] == pytest.approx(0, abs=1e-6)
    prompts = [decode(row) for row in oracle.prompts.tolist()]
    assert prompts[0] == "add:\n001+002=0003\n123+045=" and prompts[2] == "add:\n600+700=1300\n999+999="


def test_a_wrong_model_is_scored_as_by_hand_and_each_line_is_cut_at_its_newline():
    task = Addition(3, "plain")
    evaluator = EmergenceEvaluator(task, PROBLEMS, EXEMPLARS, torch.device("cpu"))
    model = Scripted(["0178\n", "100\n9", "1998\n"])  # a wrong digit; a short line, then more after it
    assert evaluator.generate(model) == ["0178", "100", "1998"]
    scores = evaluator.score(model)
    assert scores["exact_match"] == pytest.approx(1 / 3)
    assert scores["per_digit"] == pytest.approx((3 / 4 + 3 / 4 + 1) / 3)  # the missing 4th digit is wrong
    assert scores["edit_distance"] == pytest.approx((1 + 1 + 0) / 3)
    assert scores["digit_accuracy"] == pytest.approx([1, 1, 2 / 3, 2 / 3])
    assert scores["prefix_exact_match"] == pytest.approx([1, 1, 2 / 3, 1 / 3])


def test_the_scratchpad_is_scored_on_the_answer_after_its_steps():
    task = Addition(3, "scratchpad")
    evaluator = EmergenceEvaluator(task, PROBLEMS[:2], EXEMPLARS[:2], torch.device("cpu"))
    model = Scripted(["08,06,01>0168\n", "10,00,10>1000\n"])  # right answers after wrong steps
    scores = evaluator.score(model)
    assert scores["exact_match"] == 1 and scores["edit_distance"] == 0
    model = Scripted(["08,06,01,0168\n", "00,00,10>1001\n"])  # no ">": no answer; a wrong last digit
    scores = evaluator.score(model)
    assert scores["exact_match"] == 0 and scores["per_digit"] == pytest.approx((0 + 3 / 4) / 2)
    assert scores["edit_distance"] == pytest.approx((4 + 1) / 2)


@pytest.mark.parametrize("variant", ["plain", "scratchpad"])
def test_a_real_gpt_is_decoded_from_its_new_tokens_only_one_greedy_step_at_a_time(variant):
    task = Addition(3, variant)
    evaluator = EmergenceEvaluator(task, PROBLEMS, EXEMPLARS, torch.device("cpu"))
    model = tiny_gpt(task)
    expected = []
    for prompt in evaluator.prompts:
        ids = prompt.tolist()
        for _ in range(len(task.completion(0, 0))):
            ids.append(model(torch.tensor([ids]))[0][0, -1].argmax().item())
        expected.append(decode(ids[len(prompt):]).partition("\n")[0])
    assert evaluator.generate(model) == expected


def test_the_log_likelihood_is_the_sum_of_the_completion_tokens_log_probabilities():
    task = Addition(3, "plain")
    evaluator = EmergenceEvaluator(task, PROBLEMS, EXEMPLARS, torch.device("cpu"))
    model = tiny_gpt(task, seed=1)
    for i, (a, b) in enumerate(PROBLEMS.tolist()):
        context, total = evaluator.prompts[i].tolist(), 0.0
        for token in encode(task.completion(a, b)):  # the four digits and the newline
            with torch.no_grad():
                total += torch.log_softmax(model(torch.tensor([context]))[0][0, -1], -1)[token].item()
            context.append(token)
        assert evaluator.log_likelihood(model)[i].item() == pytest.approx(total, abs=1e-4)


# --- the report -------------------------------------------------------------------------------------------

def hand_row(variant, shape, params, seed, exact, digits):
    """A row as emergence.py writes one, with metrics we chose: digits (L,) are the positions' accuracies."""
    per_digit = float(np.mean(digits))
    return {"variant": variant, "shape": shape, "seed": seed, "params": params, "flops": 6.0 * params * 1e6,
            "exact_match": exact, "per_digit": per_digit, "per_digit_power": per_digit ** len(digits),
            "position_product": float(np.prod(digits)), "edit_distance": len(digits) * (1 - per_digit),
            "log_likelihood": -10 * (1 - per_digit), "digit_accuracy": digits,
            "prefix_exact_match": np.cumprod(digits).tolist(), "seconds": 30.0}


def test_the_report_gives_each_size_its_mean_and_range_over_the_seeds(capsys):
    rows = [  # one size learned the task in one seed of three; seeds listed out of order
        hand_row("plain", "2x64", 100096, 1339, 0.3, [1.0, 0.9, 0.5, 0.6]),
        hand_row("plain", "2x64", 100096, 1337, 0.0, [1.0, 0.9, 0.1, 0.1]),
        hand_row("plain", "2x64", 100096, 1338, 0.9, [1.0, 1.0, 0.9, 1.0]),
        hand_row("plain", "1x8", 888, 1337, 0.0, [0.5, 0.4, 0.1, 0.1]),
        hand_row("scratchpad", "2x64", 100096, 1337, 1.0, [1.0, 1.0, 1.0, 1.0]),
    ]
    summaries = emergence.report(rows, length=4)
    assert [(s["variant"], s["shape"], s["seeds"]) for s in summaries] == [
        ("plain", "1x8", [1337]), ("plain", "2x64", [1337, 1338, 1339]), ("scratchpad", "2x64", [1337])]
    jump = summaries[1]
    assert jump["exact_match"] == {"mean": pytest.approx(0.4), "min": 0.0, "max": 0.9,
                                   "values": [0.0, 0.9, 0.3]}  # in the order of the seeds
    products = [0.9, 0.01 * 0.9, 0.3 * 0.9]
    assert jump["position_product"]["mean"] == pytest.approx(np.mean(products))
    assert jump["position_product"]["min"] == pytest.approx(0.009)
    assert jump["per_digit"]["mean"] == pytest.approx(np.mean([0.975, 0.525, 0.75]))
    assert jump["per_digit_power"]["mean"] == pytest.approx(np.mean([0.975**4, 0.525**4, 0.75**4]))
    assert jump["digit_accuracy"] == pytest.approx([1.0, 14 / 15, 0.5, 17 / 30])
    assert jump["prefix_product"][-1] == pytest.approx(np.mean(products))
    out = capsys.readouterr().out
    assert "0.400 [0.000-0.900]" in out and "0.000 0.900 0.300" in out  # mean [range], then seed by seed
    assert "scratchpad minus plain, mean exact match at equal compute: 2x64 +0.600" in out
    assert "5 models, 2.5 min" in out


# --- the script ---------------------------------------------------------------------------------------------

def rows(out_dir):
    return [json.loads(line) for line in (out_dir / "emergence.jsonl").read_text().splitlines()]


def test_the_script_writes_a_row_per_model_and_the_plots_then_skips_finished_rows(tmp_path, monkeypatch):
    returned = emergence.main([*TINY, f"--OUT_DIR={tmp_path}"])
    written = rows(tmp_path)
    models = [("plain", "1x8"), ("plain", "1x16"), ("scratchpad", "1x8"), ("scratchpad", "1x16")]
    assert written == returned and [(r["variant"], r["shape"], r["seed"]) for r in written] == [
        (*model, seed) for seed in (1337, 1338) for model in models]  # seed by seed
    for row in written:
        assert row["flops"] == 6 * row["params"] * row["tokens"]
        assert 0 <= row["exact_match"] <= row["per_digit"] <= 1 and row["log_likelihood"] < 0
        assert row["position_product"] == pytest.approx(np.prod(row["digit_accuracy"]))
    assert written[0]["log_likelihood"] != written[4]["log_likelihood"]  # two seeds, two models
    plain, scratch = written[1], written[3]
    assert plain["params"] == scratch["params"] == 3312
    assert abs(plain["tokens"] - scratch["tokens"]) < 4 * 60  # equal compute, to within one step...
    assert scratch["problems"] < plain["problems"]  # ... on fewer problems: the scratchpad's lines are longer
    for name in ("emergence.png", "scratchpad.png", "emergence_length.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    monkeypatch.setattr(emergence, "train_one", lambda *args: pytest.fail("a finished model trained again"))
    assert emergence.main([*TINY, f"--OUT_DIR={tmp_path}"]) == written
    assert emergence.main([*TINY, f"--OUT_DIR={tmp_path}", "--EM_SEEDS=1"]) == written[:4]
    assert rows(tmp_path) == written  # the other seed's rows stay in the file


def test_every_training_seed_is_scored_on_the_same_held_out_problems(tmp_path, monkeypatch):
    drawn = []
    held_out = EmergenceEvaluator.held_out.__func__

    def spy(cls, task, count, shots, seed, device):
        drawn.append(seed)
        return held_out(cls, task, count, shots, seed, device)

    monkeypatch.setattr(EmergenceEvaluator, "held_out", classmethod(spy))
    for seed in (1, 2):
        emergence.main([*TINY, f"--OUT_DIR={tmp_path / str(seed)}", f"--SEED={seed}", "--EM_SHAPES=1x8",
                        "--EM_VARIANTS=plain", "--EM_SEEDS=1"])
    assert drawn == [0, 0]  # EM_EVAL_SEED, whatever SEED is
    first, second = rows(tmp_path / "1")[0], rows(tmp_path / "2")[0]
    assert (first["seed"], second["seed"]) == (1, 2) and first["log_likelihood"] != second["log_likelihood"]


def test_ctrl_c_keeps_the_finished_models_and_a_rerun_trains_the_rest(tmp_path, monkeypatch, capsys,
                                                                       interrupt_at):
    monkeypatch.setattr(emergence, "GracefulInterrupt", interrupt_at(30))  # the first model takes 25 steps
    with pytest.raises(SystemExit) as stop:
        emergence.main([*TINY, f"--OUT_DIR={tmp_path}"])
    assert stop.value.code == 0 and "run the same command again" in capsys.readouterr().out
    first = rows(tmp_path)
    assert [(r["variant"], r["shape"], r["seed"]) for r in first] == [("plain", "1x8", 1337)]
    monkeypatch.undo()
    emergence.main([*TINY, f"--OUT_DIR={tmp_path}"])
    assert rows(tmp_path)[0] == first[0] and len(rows(tmp_path)) == 8


@pytest.mark.parametrize("setting, message", [
    ("--EM_VARIANTS=plain,cot", "unknown variant 'cot'"),
    ("--EM_SHAPES=2by32", "cannot read the shape '2by32'"),
    ("--EM_DIGITS=0", "1 to 9 digits"),
    ("--EM_TOKENS=10", "less than one batch"),
    ("--EM_EVAL_PROBLEMS=0", "hold out at least 1"),
    ("--EM_BATCH_SIZE=0", "must be at least 1"),
    ("--EM_SEEDS=0", "must be at least 1"),
])
def test_a_bad_setting_is_one_line(setting, message, tmp_path):
    with pytest.raises(CourseError, match=message) as stop:
        emergence.main([*TINY, f"--OUT_DIR={tmp_path}", setting])
    assert "\n" not in str(stop.value) and str(stop.value).startswith("error: ")


def test_results_made_with_other_settings_are_refused_not_mixed(tmp_path):
    emergence.main([*TINY, f"--OUT_DIR={tmp_path}", "--EM_SHAPES=1x8", "--EM_VARIANTS=plain", "--EM_LR=2e-3"])
    refused = r"other settings \(EM_LR 0.002 \(now 0.001\)\); pass --OUT_DIR"
    with pytest.raises(CourseError, match=refused) as stop:
        emergence.main([*TINY, f"--OUT_DIR={tmp_path}", "--EM_LR=1e-3"])
    assert "\n" not in str(stop.value)
    row = rows(tmp_path)[0]
    del row["seed"]  # a row that does not say which seed trained it
    (tmp_path / "emergence.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(CourseError, match="has no seed"):
        emergence.main([*TINY, f"--OUT_DIR={tmp_path}", "--EM_LR=2e-3"])
