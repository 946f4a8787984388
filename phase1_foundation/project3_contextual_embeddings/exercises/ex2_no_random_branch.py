"""Exercise 2: disable the random-token branch of BERT's masking and see what it was for.

Of the tokens chosen for prediction (15% in BERT, 30% in the presets), BERT (§3.1) replaces 80% by [MASK],
10% by a random token and leaves 10% unchanged. Train the same BERT with that and with no random branch: 90%
[MASK], 0% random, 10% unchanged ("90/0/10": shares are always listed as [MASK] / random / unchanged), and
compare the MLM loss. Then look at where the difference is: score both final models on the same validation
pairs masked the paper's way, and split the targets by what the model saw there: [MASK], a random token, or
the original token itself.

    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex2_no_random_branch.py
    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex2_no_random_branch.py \
        --MAX_ITERS=4000

After the run's numbers the script prints what the course has measured, or expects. Appendix C.2 of the
paper compares these mixtures on downstream tasks.

Predict before you run it: will the overall MLM loss tell the two runs apart? On the shared 80/10/10 masks,
at which kinds of target will the two models differ, and at which will they be level: [MASK], a random token,
the unchanged token? Where they differ, which model does better?
"""

from common.course.exercises import print_measured
from common.errors import run_main
from phase1_foundation.project3_contextual_embeddings.exercises import (
    evaluate_run,
    parse_args,
    train_chapter,
)
from phase1_foundation.project3_contextual_embeddings.pretraining_data import KINDS

VARIANTS = {  # name: (label as [MASK]/random/unchanged, settings)
    "paper": ("80/10/10 (BERT)", ["--MASK_TOKEN_SHARE=0.8", "--RANDOM_TOKEN_SHARE=0.1"]),
    "no_random": ("90/0/10", ["--MASK_TOKEN_SHARE=0.9", "--RANDOM_TOKEN_SHARE=0.0"]),
}


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex2_no_random_branch")
    results = {}
    for name, (_, variant) in VARIANTS.items():
        summary = train_chapter([*settings, *variant], out_dir / name)
        # Both final models on the same validation pairs, masked the paper's way, by what they saw there.
        paper_masks = evaluate_run(summary["checkpoint"], MASK_TOKEN_SHARE=0.8, RANDOM_TOKEN_SHARE=0.1)
        results[name] = {"val_mlm_loss": summary["val_mlm_loss"],
                         **{kind: {"targets": paper_masks[f"val_{kind}_count"],
                                   "loss": paper_masks[f"val_{kind}_loss"],
                                   "accuracy": paper_masks[f"val_{kind}_accuracy"]} for kind in KINDS}}

    print("\nvalidation MLM loss over all chosen positions, with each run's own masking:")
    for name, (label, _) in VARIANTS.items():
        print(f"  {label:<16} {results[name]['val_mlm_loss']:.3f}")
    print("\nthe same validation pairs masked 80/10/10, by what the model saw at the target:")
    print(f"{'':<18}" + "".join(f"{kind:>20}" for kind in KINDS))
    print(f"{'':<18}" + f"{'loss':>12}{'acc':>8}" * len(KINDS))
    for name, (label, _) in VARIANTS.items():
        cells = [results[name][kind] for kind in KINDS]
        print(f"{label:<18}" + "".join(f"{c['loss']:>12.3f}{c['accuracy']:>8.1%}" for c in cells))
    print("targets: " + ", ".join(f"{kind} {results['paper'][kind]['targets']:,}" for kind in KINDS))
    print_measured(WHAT_WE_MEASURED)
    return results


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
Measured with this command on the preset (2,000 steps each, one thread each beside another run). Over all
chosen positions, each run with its own masking, the run without the random branch has the lower loss (4.344
against 4.462): a visible target is always right for it, so those positions are easy. On the same validation
pairs masked 80/10/10 the difference is in where the model is right. At [MASK] the two are close, the paper's
mixture ahead: 4.836 and 19.6% against 4.957 and 18.9%. At unchanged positions the run without the branch
copies its input: 100% right, loss 0.016, against 94.6% and 0.487. Where a random token was put in, it repeats
that wrong token with confidence: 0.0% right, loss 14.3, against 14.2% and 5.5 for the paper's mixture. The
paper's argument for the branch (BERT §3.1, Appendix A.1): the model does not know which tokens it will be
asked about or which were replaced, so it must keep a representation of every token that reflects its
context, and that is what a fine-tuned BERT, which never sees [MASK], reads. That mechanism is a hypothesis:
the paper's ablation (Appendix C.2) measures what each mixture scores after fine-tuning, not why, and this
exercise measures neither.
"""


if __name__ == "__main__":
    run_main(main)
