"""Pre-train BERT by masked-LM, and next-sentence prediction if asked: the whole recipe, top to bottom.

    # preset picked by your device
    uv run python phase1_foundation/project3_contextual_embeddings/train.py
    # any config.py name
    uv run python phase1_foundation/project3_contextual_embeddings/train.py --MLM_PROB=0.5
    # both of BERT's tasks (the presets train MLM only, as RoBERTa did)
    uv run python phase1_foundation/project3_contextual_embeddings/train.py --USE_NSP=true
    # continue exactly
    uv run python phase1_foundation/project3_contextual_embeddings/train.py --RESUME=latest

Config -> data -> model -> optimizer -> loop -> checkpoint, as in chapter 1. What is new is in the step: a
batch is sentence pairs with MLM_PROB of their tokens chosen for prediction, and with NSP on the loss is the
sum of the two tasks' mean losses (§A.2), computed in objectives.py. README, "Run it", says what a run writes
and prints.
"""

import math
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import torch

from common.course import reference
from common.course.learn.check import refuse_stubs
from common.data.tokens import read_meta
from common.errors import run_main
from common.files import portable
from common.training import dry_run
from common.training.config import load_config
from common.training.device import autocast, describe, enable_tf32, grad_scaler, seed_everything
from common.training.metrics import matmul_flops, plot_losses, save_summary
from common.training.optim import adamw, set_lr, warmup_linear
from common.training.run import StepReport, TrainingRun
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.baselines import Baselines
from phase1_foundation.project3_contextual_embeddings.download_data import load_split, prepare
from phase1_foundation.project3_contextual_embeddings.model import BERT, KIND, PREFIX, BertConfig
from phase1_foundation.project3_contextual_embeddings.objectives import (
    evaluate,
    metrics,
    neighbour_attention,
    pretraining_loss,
    validation_batches,
)
from phase1_foundation.project3_contextual_embeddings.pretraining_data import pair_batches
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer

POSITIONS_SAID = {  # printed by every run, so that a departure from the paper is never silent
    "learned": "learned, a table of block_size vectors, as in BERT (2018)",
    "rotary": "rotary (RoFormer, 2021), not BERT's learned table, with which a model this small barely "
              "leaves the unigram model's loss in the cpu preset's budget (the README; exercise 6); "
              "--POSITIONS=learned for the table",
}
SHAPE_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "positions")  # a resume must match
SCRIPT = "phase1_foundation/project3_contextual_embeddings/train.py"


def describe_model(model: BERT, cfg: SimpleNamespace) -> str:
    """What is trained, and where its positions depart from BERT's."""
    return (f"model: {model.num_parameters():,} parameters ({model.num_parameters(non_embedding=True):,} "
            f"non-embedding); {cfg.BATCH_SIZE * cfg.GRAD_ACCUM_STEPS} sentence pairs of <= {cfg.BLOCK_SIZE} "
            f"tokens per step; tasks: MLM{' + NSP' if cfg.USE_NSP else ' only'}, {cfg.MLM_PROB:.0%} of "
            f"tokens chosen; dropout {cfg.DROPOUT:g} (BERT: MLM + NSP, 15%, 0.1)\n"
            f"positions: {POSITIONS_SAID[cfg.POSITIONS]}")


def bert(cfg: SimpleNamespace, vocab_size: int) -> BERT:
    """The BERT the settings describe: its shape, dropout, attention path and positions."""
    return BERT(BertConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                           n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                           fast_attention=cfg.FAST_ATTENTION, positions=cfg.POSITIONS))


def main(argv: list[str] | None = None) -> dict:
    refuse_stubs("phase1_foundation.project3_contextual_embeddings")  # a learn task not yet written
    # --- config and device ---------------------------------------------------------------------------------
    cfg = load_config(config, argv)
    device = torch.device("cpu" if cfg.DRY_RUN else cfg.DEVICE)
    enable_tf32()
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}")

    # --- data: sentences of documents, prepared once by download_data.py ------------------------------------
    data_dir = prepare(cfg)
    tokenizer = load_tokenizer(data_dir)
    train_split, val_split = load_split(data_dir, "train"), load_split(data_dir, "val")
    print(f"tokenizer: {tokenizer.vocab_size:,} tokens; data: {len(train_split[0]):,} train / "
          f"{len(val_split[0]):,} val tokens in {len(train_split[1]) - 1:,} / "
          f"{len(val_split[1]) - 1:,} sentences")
    val_batches = validation_batches(val_split, cfg, tokenizer.vocab_size, device)  # drawn once, for all
    baselines = metrics(Baselines.for_run(train_split, cfg, tokenizer.vocab_size).measure(val_batches), "val")

    # --- model and optimizer -------------------------------------------------------------------------------
    model = bert(cfg, tokenizer.vocab_size).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)
    batches = pair_batches(train_split, cfg, tokenizer.vocab_size, device, seed=cfg.SEED, training=True)
    print(describe_model(model, cfg))
    if cfg.DRY_RUN:  # what the run would cost on a laptop GPU, from one step measured here: nothing trains
        return dry_run.report(model, lambda: pretraining_loss(model, batches.next(), cfg.USE_NSP)[0], cfg)

    # --- resume (weights, optimizer moments, step, RNG, the pair generator, all exactly) or start afresh ---
    run = TrainingRun(cfg, PREFIX, KIND, model=model, optimizer=optimizer, scaler=scaler, batches=batches,
                      data_dir=data_dir, tokenizer=tokenizer)
    step = run.resume(SHAPE_KEYS)

    # --- the loop: warmup then linear decay (PAPER: BERT §A.2), accumulation, clipping ----------------------
    tokens_seen = 0
    with StepReport(run, cfg, step, evaluate=lambda: validate(model, val_batches, cfg), script=SCRIPT,
                    show=("train_mask_loss", "val_mask_accuracy")) as report:
        while step < cfg.MAX_ITERS:
            lr = warmup_linear(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                               total_steps=cfg.MAX_ITERS)
            set_lr(optimizer, lr)
            counts = Counter()
            for _ in range(cfg.GRAD_ACCUM_STEPS):
                # (B, T) input_ids, segment_ids, attention_mask, mlm_labels; (B,) nsp_labels
                batch = batches.next()
                with autocast(device):
                    loss, batch_counts = pretraining_loss(model, batch, cfg.USE_NSP)
                scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
                counts.update(batch_counts)  # not +=, which drops the counts that are 0
            scaler.unscale_(optimizer)  # so that clipping sees the true gradients (fp16 scales them)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            tokens_seen += counts["tokens"]  # real tokens, not padding
            train = metrics(counts, "train")
            report.after(step, train["train_mlm_loss"] + train.get("train_nsp_loss", 0.0), lr=lr,
                         tokens=counts["tokens"], **train)
    val = {key: value for key, value in report.val.items() if key != "counts"}
    return summarize(cfg, run.out_dir, data_dir, val | baselines, report.val.get("counts", Counter()), step,
                     report.seconds, tokens_seen, report.last_path)


def validate(model: BERT, val_batches: list[dict], cfg: SimpleNamespace) -> dict:
    """What each evaluation logs: the validation losses and accuracies (val_loss is MLM + NSP), the counts
    behind them, and the attention on the tokens just before and after, in the first batch (exercise 6)."""
    val, counts = evaluate(model, val_batches, cfg.USE_NSP)
    attention = {f"val_{key}": value for key, value in neighbour_attention(model, val_batches[0]).items()}
    val_loss = val["val_mlm_loss"] + val.get("val_nsp_loss", 0.0)
    return {**val, "val_loss": val_loss, **attention, "counts": counts}


def summarize(cfg: SimpleNamespace, out_dir: Path, data_dir: Path, val: dict, val_counts: Counter, steps: int,
              wall: float, tokens_seen: float, checkpoint: Path) -> dict:
    """The end of a run: loss curves, and the numbers the README quotes beside the baselines they must beat,
    printed and saved as summary.json. `val` holds the model's validation metrics and the baselines'."""
    plot = plot_losses(out_dir / "metrics.jsonl", out_dir / "loss.png",
                       title=f"BERT on {read_meta(data_dir)['corpus']}",
                       panels=("mask_loss", "nsp_loss") if cfg.USE_NSP else ("mask_loss",),
                       references={"mask_loss": {"unigram": val["val_unigram_mask_loss"],
                                                 "bigram": val["val_bigram_mask_loss"]},
                                   "nsp_loss": {"chance": math.log(2)}})
    summary = {**val, "val_loss": val["val_mlm_loss"] + val.get("val_nsp_loss", 0.0), "steps": steps,
               "wall_seconds": wall, "tokens_per_second": tokens_seen / wall,
               "matmul_flops": matmul_flops(torch.device(cfg.DEVICE)), "checkpoint": portable(checkpoint),
               "loss_curve": portable(plot), "data_dir": portable(data_dir)}
    n = {kind: int(val_counts[f"{kind}_count"]) for kind in ("mlm", "mask", "random", "unchanged")}
    lines = [f"validation: {n['mlm']:,} chosen tokens ({n['mask']:,} [MASK], {n['random']:,} random, "
             f"{n['unchanged']:,} unchanged)",
             f"{'':<32}{'[MASK] loss':>12}{'[MASK] acc':>12}{'random acc':>12}{'unchanged acc':>15}"
             f"{'all acc':>9}"]
    for name, label in (("", "BERT (this run)"), ("bigram_", "bigram (both neighbours)"),
                        ("unigram_", "unigram (most frequent token)"), ("copy_", "copy the visible token")):
        cells = [(f"val_{name}mask_loss", ".3f", 12)] + [(f"val_{name}{kind}_accuracy", ".1%", width) for
                                                          kind, width in (("mask", 12), ("random", 12),
                                                                          ("unchanged", 15), ("mlm", 9))]
        # "—": no such number (copy has no loss) or no such position in the validation batches
        lines.append(f"{label:<32}" + "".join(f"{'—' if key not in val else format(val[key], form):>{width}}"
                                              for key, form, width in cells))
    if cfg.USE_NSP:
        # Chance is answering the commoner label every time: 50% in expectation, a little more on a
        # finite sample.
        pairs, is_next = val_counts["nsp_count"], val_counts["nsp_is_next"]
        summary["val_nsp_majority_accuracy"] = max(is_next, pairs - is_next) / pairs
        summary["val_nsp_standard_error"] = se = math.sqrt(0.25 / pairs)
        # baselines.py's rule: IsNext when the rare tokens A and B share weigh enough (topic, no model)
        rule = (f"shared rare tokens, no model: {val['val_overlap_nsp_accuracy']:.1%}; "
                if "val_overlap_nsp_accuracy" in val else "")
        lines.append(f"NSP accuracy {val['val_nsp_accuracy']:.1%} on {pairs:,} pairs (always answering the "
                     f"commoner label: {summary['val_nsp_majority_accuracy']:.1%}; {rule}standard error "
                     f"{se:.1%})")
    lines.append(f"{steps} steps in {wall / 60:.1f} min, {summary['tokens_per_second']:,.0f} tokens/s; this "
                 f"device multiplies matrices at {summary['matmul_flops'] / 1e9:,.0f} GFLOP/s just now")
    print("\n" + "\n".join(lines) + f"\ncheckpoint: {checkpoint}\nloss curves: {plot}")
    save_summary(out_dir, summary)
    reference.report(config, cfg, summary)  # "is my loss right?": the course's, beside it
    return summary


if __name__ == "__main__":
    run_main(main)
