"""Exercise 2: disable the random-token branch of BERT's masking and see what it was for.

Of the 15% of tokens chosen for prediction, BERT (§3.1) replaces 80% by [MASK], 10% by a random token and
leaves 10% unchanged. Train the same BERT with that and with no random branch: 90% [MASK], 0% random, 10%
unchanged ("90/0/10": shares are always listed as [MASK] / random / unchanged), and compare the MLM loss. Then look at
where the difference is: score both final models on the same validation pairs masked the paper's way, and
split the targets by what the model saw there: [MASK], a random token, or the original token itself.

    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex2_no_random_branch.py
    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex2_no_random_branch.py --MAX_ITERS=2000

What you should see: the MLM loss hardly tells them apart; the run without the branch is, if anything, a
little lower on its own masks, since an unchanged target is easy once a model has learned to copy. At [MASK]
positions the two models are level. The difference is at the visible targets. Trained without the branch,
a visible target was always the answer, so the model learns to copy: its accuracy at unchanged positions
heads for 100%, and at a random replacement it repeats the wrong token it sees with more confidence (a much
higher loss there; the chapter's README gives measured numbers). With the
branch a visible target is wrong half the time, so the model has to weigh every token against its context
before trusting it. That is the point of the branch (BERT §3.1, Appendix A.1): the model does not know
which tokens it will be asked about or which were replaced, so it must keep a representation of every
token that reflects its context, and that is what a fine-tuned BERT, which never sees [MASK], reads.
Appendix C.2 of the paper compares these mixtures on downstream tasks.
"""  # noqa: E501 (a usage command longer than a line, kept whole so it can be copied)

from phase1_foundation.project3_contextual_embeddings.exercises import evaluate_run, parse_args, run_train
from phase1_foundation.project3_contextual_embeddings.pretraining_data import KINDS

VARIANTS = {  # name: (label as [MASK]/random/unchanged, settings)
    "paper": ("80/10/10 (BERT)", ["--MASK_TOKEN_SHARE=0.8", "--RANDOM_TOKEN_SHARE=0.1"]),
    "no_random": ("90/0/10", ["--MASK_TOKEN_SHARE=0.9", "--RANDOM_TOKEN_SHARE=0.0"]),
}


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex2_no_random_branch")
    results = {}
    for name, (_, variant) in VARIANTS.items():
        summary = run_train([*settings, *variant], out_dir / name)
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
    return results


if __name__ == "__main__":
    main()
