"""Exercise 5: fine-tuning with and without the auxiliary language-modelling loss (GPT-1 §3.2).

GPT-1 fine-tunes on L3 = L2 + lambda * L1 (§3.2): the task's loss plus lambda = 0.5 (§4.1) times the
language-modelling loss on the task's own text, which the paper says improves generalisation and speeds up
convergence. This exercise fine-tunes one pre-trained checkpoint on finetune.py's task with --FT_LM_WEIGHT=0
(task loss only) and --FT_LM_WEIGHT=0.5 (the paper), two seeds each, and compares held-out accuracy.

    uv run python phase1_foundation/project1_gpt/exercises/ex5_auxiliary_lm_loss.py --CHECKPOINT=latest

--CHECKPOINT=latest fine-tunes train.py's newest checkpoint; without it the exercise pre-trains one first
(about as long as train.py). After the run's numbers the script prints what the course measured.

Predict before you run it: which lambda will give the higher held-out accuracy, and will the difference be
larger than the spread between seeds?
"""

from common.course.exercises import print_measured
from common.errors import run_main
from phase1_foundation.project1_gpt import finetune
from phase1_foundation.project1_gpt.exercises import parse_args, pretrained_checkpoint

LM_WEIGHTS = (0.0, 0.5)  # lambda: no auxiliary loss, and the paper's value
SEEDS = "--FT_SEEDS=1337,1"


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex5_auxiliary_lm_loss")
    checkpoint, settings = pretrained_checkpoint(settings, out_dir)
    results = {}
    for weight in LM_WEIGHTS:
        run_dir = out_dir / f"lm_weight_{weight}"  # finetune.py writes its results here
        results[weight] = finetune.main([SEEDS, *settings, "--FT_FROM=pretrained", f"--FT_LM_WEIGHT={weight}",
                                         f"--CHECKPOINT={checkpoint}", f"--OUT_DIR={run_dir}"])

    print(f"\nheld-out accuracy of the fine-tuned pre-trained model, {results[0.0]['questions']} questions; "
          f"pre-trained: {checkpoint}")
    print(f"{'':<20}{'mean':>8}   each seed")
    for weight, r in results.items():
        each = "  ".join(f"{run['accuracy']:.1%}" for run in r["runs"])
        print(f"{f'FT_LM_WEIGHT={weight}':<20}{r['pretrained']:>8.1%}   {each}")
    print_measured(WHAT_WE_MEASURED)
    return results


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
No difference the seeds can resolve. On the 432 held-out questions, with the pre-trained model fine-tuned on
1,000 questions, we measured 70.5% with lambda = 0 (seeds 1337 and 1: 69.4% and 71.5%) against 69.4% with
lambda = 0.5 (68.8% and 70.1%): 1.1 points apart, less than the two seeds of either differ by. The paper's own
ablation (Table 5) is mixed too: the auxiliary loss helped on its large datasets (NLI, QQP) and not on the
smaller ones, and the paper calls it a trend. Here the auxiliary loss also trains on the shuffled candidate,
as GPT-1's did on CoLA's ungrammatical sentences, so half of what it teaches is that scrambled word order is
text like any other; whether that is why it does not help here was not measured.
"""


if __name__ == "__main__":
    run_main(main)
