"""Exercise 2: disable the random-token branch of BERT's masking and see what it was for.

Of the 15% of tokens chosen for prediction, BERT (§3.1) replaces 80% by [MASK], 10% by a random token and
leaves 10% unchanged. Train the same BERT with that and with no random branch: 90% [MASK], 0% random, 10%
unchanged ("90/10/0", listed as [MASK] / unchanged / random), and compare the MLM loss. Then look at
where the difference is: score both final models on the same validation pairs masked the paper's way, and
split the targets by what the model saw there: [MASK], a random token, or the original token itself.

    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex2_no_random_branch.py
    uv run python phase1_foundation/project3_contextual_embeddings/exercises/ex2_no_random_branch.py --MAX_ITERS=2000

What you should see: the MLM loss hardly tells them apart; the run without the branch is, if anything, a
little lower on its own masks, since an unchanged target is easy once a model has learned to copy. At [MASK]
positions the two models are level. The difference is at the visible targets. Trained without the branch,
a visible target was always the answer, so the model learns to copy: its accuracy at unchanged positions
heads for 100% (98% against 78% with the branch in a small run of 800 steps), and at a random replacement it
repeats the wrong token it sees more often, and with more confidence (a much higher loss there). With the
branch a visible target is wrong half the time, so the model has to weigh every token against its context
before trusting it. That is the point of the branch (BERT §3.1, Appendix A.1): the model does not know
which tokens it will be asked about or which were replaced, so it must keep a representation of every
token that reflects its context, and that is what a fine-tuned BERT, which never sees [MASK], reads.
Appendix C.2 of the paper compares these mixtures on downstream tasks.
"""  # noqa: E501 (a usage command longer than a line, kept whole so it can be copied)

from collections import Counter
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from phase1_foundation.project3_contextual_embeddings.download_data import MASK_ID, load_split
from phase1_foundation.project3_contextual_embeddings.exercises import load_run, parse_args, run_train
from phase1_foundation.project3_contextual_embeddings.pretraining_data import IGNORE, pair_batches

VARIANTS = {  # name: (label, settings)
    "paper": ("80/10/10 (BERT)", ["--MASK_TOKEN_SHARE=0.8", "--RANDOM_TOKEN_SHARE=0.1"]),
    "no_random": ("90/0/10", ["--MASK_TOKEN_SHARE=0.9", "--RANDOM_TOKEN_SHARE=0.0"]),
}
BRANCHES = ("mask", "random", "kept")  # what the model saw at a target: [MASK], a random token, the token


@torch.no_grad()
def by_branch(checkpoint: str) -> dict:
    """Accuracy, loss and copy rate at each kind of target, on validation pairs masked 80/10/10."""
    model, cfg, data_dir = load_run(checkpoint)
    cfg = SimpleNamespace(**{**vars(cfg), "MASK_TOKEN_SHARE": 0.8, "RANDOM_TOKEN_SHARE": 0.1})  # the paper's
    device = torch.device(cfg.DEVICE)
    batches = pair_batches(load_split(data_dir, "val"), cfg, model.config.vocab_size, device, cfg.SEED + 1)
    counts = {branch: Counter() for branch in BRANCHES}
    for _ in range(cfg.EVAL_ITERS):
        batch = batches.next()
        chosen = batch["mlm_labels"] != IGNORE  # (B, T)
        logits, _ = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"], masked=chosen)
        target, shown = batch["mlm_labels"][chosen], batch["input_ids"][chosen]  # (N,) answer, what it saw
        guess = logits.argmax(-1)  # (N,)
        loss = F.cross_entropy(logits.float(), target, reduction="none")  # (N,)
        # A random draw that happens to be the original token (1 in V) is an unchanged token to the model.
        where = {"mask": shown == MASK_ID, "random": (shown != MASK_ID) & (shown != target),
                 "kept": shown == target}
        for branch, at in where.items():
            counts[branch].update(n=at.sum().item(), correct=(guess == target)[at].sum().item(),
                                  copied=(guess == shown)[at].sum().item(), loss=loss[at].sum().item())
    return {branch: {"targets": c["n"], "accuracy": c["correct"] / max(c["n"], 1),
                     "loss": c["loss"] / max(c["n"], 1), "copies": c["copied"] / max(c["n"], 1)}
            for branch, c in counts.items()}


def main(argv: list[str] | None = None) -> dict:
    out_dir, settings = parse_args(argv, "ex2_no_random_branch")
    results = {}
    for name, (_, variant) in VARIANTS.items():
        summary = run_train([*settings, *variant], out_dir / name)
        results[name] = {"val_mlm_loss": summary["val_mlm_loss"],
                         "val_mlm_accuracy": summary["val_mlm_accuracy"],
                         **by_branch(summary["checkpoint"])}

    print("\nvalidation MLM loss with each run's own masking:")
    for name, (label, _) in VARIANTS.items():
        r = results[name]
        print(f"  {label:<16} loss {r['val_mlm_loss']:.3f}, accuracy {r['val_mlm_accuracy']:.1%}")
    print("\nthe same validation pairs masked 80/10/10, by what the model saw at the target "
          "(copies: it predicts the token it sees)")
    print(f"{'':<18}" + "".join(f"{branch:>26}" for branch in BRANCHES))
    print(f"{'':<18}" + f"{'loss':>12}{'acc':>6}{'copies':>8}" * len(BRANCHES))
    for name, (label, _) in VARIANTS.items():
        cells = [results[name][b] for b in BRANCHES]
        print(f"{label:<18}"
              + "".join(f"{c['loss']:>12.3f}{c['accuracy']:>6.0%}{c['copies']:>8.0%}" for c in cells))
    print("targets: " + ", ".join(f"{b} {results['paper'][b]['targets']:,}" for b in BRANCHES))
    return results


if __name__ == "__main__":
    main()
