"""Exercise 4: fine-tuning with and without the auxiliary language-modelling loss (GPT-1 §3.2).

GPT-1 fine-tunes on L3 = L2 + lambda * L1 (§3.2): the task's loss plus lambda = 0.5 (§4.1) times the
language-modelling loss on the task's own text, which the paper says improves generalisation and speeds up
convergence. Pre-train one model, then fine-tune that same checkpoint twice on finetune.py's multiple-choice
task, with --FT_LM_WEIGHT=0 (task loss only) and --FT_LM_WEIGHT=0.5 (the paper), and compare held-out
accuracy.

    uv run python phase1_foundation/project1_gpt/exercises/ex4_auxiliary_lm_loss.py
    uv run python phase1_foundation/project1_gpt/exercises/ex4_auxiliary_lm_loss.py --FT_EPOCHS=5

What you should see: two accuracies within a few points of each other, a difference of the same size as the
standard error printed beside them (a few hundred questions cannot resolve a small effect; rerun with another
--SEED to see how much they move). That is the paper's finding too: in its ablation (Table 5) the auxiliary
loss helped the larger datasets (NLI, QQP) and not the smaller ones. finetune.py also fine-tunes a randomly
initialised model each time; its accuracies show how much of either number pre-training is responsible for.
And it scores the shared-rare-words rule, which needs no model: with the cpu preset both accuracies are above
chance and far below that rule: the model has only begun to learn the task, so the exercise is worth running
again after a longer pre-training (--MAX_ITERS).
"""

import json

from phase1_foundation.project1_gpt import finetune
from phase1_foundation.project1_gpt.exercises import parse_args, run_train

LM_WEIGHTS = (0.0, 0.5)  # lambda: no auxiliary loss, and the paper's value


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex4_auxiliary_lm_loss")
    checkpoint = run_train(settings, out_dir / "pretrain")["checkpoint"]
    results = {}
    for weight in LM_WEIGHTS:
        run_dir = out_dir / f"lm_weight_{weight}"  # finetune.py writes its results here
        run_dir.mkdir(parents=True, exist_ok=True)
        results[weight] = finetune.main([*settings, f"--CHECKPOINT={checkpoint}", f"--FT_LM_WEIGHT={weight}",
                                         f"--OUT_DIR={run_dir}"])

    questions = json.loads((run_dir / "finetune_results.json").read_text())["questions"]
    print(f"\nheld-out accuracy on {questions} questions (chance {results[0.0]['chance']:.0%}, "
          f"standard error <= {(0.25 / questions) ** 0.5:.1%}), both from {checkpoint}")
    print(f"{'':<24}{'pre-trained':>12}{'scratch':>10}")
    for weight, r in results.items():
        print(f"{f'FT_LM_WEIGHT={weight}':<24}{r['pretrained']:>12.1%}{r['scratch']:>10.1%}")
    return results


if __name__ == "__main__":
    main()
