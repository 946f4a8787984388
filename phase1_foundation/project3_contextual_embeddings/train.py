"""Pre-train BERT with its two tasks, masked-LM and next-sentence prediction: the whole recipe, top to bottom.

    uv run python phase1_foundation/project3_contextual_embeddings/train.py                  # preset picked by your device
    uv run python phase1_foundation/project3_contextual_embeddings/train.py --MLM_PROB=0.5   # any config.py name
    uv run python phase1_foundation/project3_contextual_embeddings/train.py --USE_NSP=false  # MLM only (RoBERTa)
    uv run python phase1_foundation/project3_contextual_embeddings/train.py --RESUME=latest  # continue exactly

Config -> data -> model -> optimizer -> loop -> checkpoint, as in chapter 1. What is new is in the step: a batch
is sentence pairs with 15% of their tokens masked, and the loss is the sum of the two tasks' losses (§3.1).
"""

import math
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from common import checkpoint as ckpt
from common.config import load_config
from common.device import autocast, describe, enable_tf32, grad_scaler, seed_everything
from common.interrupt import GracefulInterrupt
from common.metrics import MetricsLog, check_finite, plot_losses, progress
from common.optim import adamw, set_lr, warmup_linear
from common.tokenizers import load_tokenizer
from common.tokens import read_meta
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.download_data import SPECIAL_TOKENS, load_split, prepare
from phase1_foundation.project3_contextual_embeddings.model import BERT, BertConfig
from phase1_foundation.project3_contextual_embeddings.pretraining_data import PairBatches

KIND = "project3/bert"  # written into every checkpoint, so another chapter's file is refused with a clear line
PREFIX = "bert"  # checkpoints/project3/bert_iter{N}_loss{L}.pt
SHAPE_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")  # what a resume must match


def pair_batches(split: tuple, cfg, vocab_size: int, device: torch.device, seed: int) -> PairBatches:
    """Masked sentence pairs from one split; the same seed gives the same pairs and the same masks."""
    return PairBatches(
        *split, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed, use_nsp=cfg.USE_NSP, vocab_size=vocab_size,
        mlm_prob=cfg.MLM_PROB, mask_share=cfg.MASK_TOKEN_SHARE, random_share=cfg.RANDOM_TOKEN_SHARE,
    )


def losses(model: BERT, batch: dict, use_nsp: bool, most_frequent: int) -> tuple[torch.Tensor, Counter]:
    """The loss to minimise for one batch of masked sentence pairs, and the counts its metrics are made of."""
    masked = batch["mlm_labels"] != -100  # (B, T): the 15% chosen positions, the only ones with a target
    mlm_logits, nsp_logits = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"], masked=masked)
    targets = batch["mlm_labels"][masked]  # (N,)
    mlm_loss = F.cross_entropy(mlm_logits.float(), targets)  # mean over the N chosen positions
    loss, nsp_labels = mlm_loss, batch["nsp_labels"]  # (B,): 1 = B follows A, 0 = B from another document
    sums = {"mlm_loss": mlm_loss.detach() * len(targets), "mlm_correct": (mlm_logits.argmax(-1) == targets).sum(),
            "most_frequent": (targets == most_frequent).sum(), "tokens": batch["attention_mask"].sum()}
    if use_nsp:
        nsp_loss = F.cross_entropy(nsp_logits.float(), nsp_labels)  # PAPER: BERT §3.1, NSP reads the pooled [CLS]
        # PAPER: BERT §A.2, the training loss is the sum of the mean MLM likelihood and the mean NSP likelihood
        loss = mlm_loss + nsp_loss
        sums |= {"nsp_loss": nsp_loss.detach() * len(nsp_labels), "nsp_is_next": nsp_labels.sum(),
                 "nsp_correct": (nsp_logits.argmax(-1) == nsp_labels).sum()}
    values = torch.stack([v.float() for v in sums.values()]).tolist()  # one copy from the device, not one each
    counts = Counter(dict(zip(sums, values, strict=True)), mlm_count=len(targets))
    if use_nsp:
        counts["nsp_count"] = len(nsp_labels)
    return loss, counts


def metrics(counts: Counter, split: str) -> dict:
    """Mean losses and accuracies from summed counts: {split}_mlm_loss, {split}_mlm_accuracy, and NSP's."""
    out = {f"{split}_mlm_loss": counts["mlm_loss"] / counts["mlm_count"],
           f"{split}_mlm_accuracy": counts["mlm_correct"] / counts["mlm_count"]}
    if counts["nsp_count"]:
        out[f"{split}_nsp_loss"] = counts["nsp_loss"] / counts["nsp_count"]
        out[f"{split}_nsp_accuracy"] = counts["nsp_correct"] / counts["nsp_count"]
    return out


@torch.no_grad()
def evaluate(model: BERT, split: tuple, cfg, device: torch.device, most_frequent: int) -> tuple[dict, Counter]:
    """Validation metrics on the same EVAL_ITERS batches every time (same pairs, same masks), and their counts."""
    model.eval()
    batches = pair_batches(split, cfg, model.config.vocab_size, device, seed=cfg.SEED + 1)
    counts = Counter()
    for _ in range(cfg.EVAL_ITERS):
        with autocast(device):
            counts += losses(model, batches.next(), cfg.USE_NSP, most_frequent)[1]
    model.train()
    return metrics(counts, "val"), counts


def main(argv: list[str] | None = None) -> dict:
    # --- config and device ---------------------------------------------------------------------------------
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    enable_tf32()
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}")

    # --- data: sentences of documents, prepared once by download_data.py ------------------------------------
    data_dir = prepare(cfg)
    tokenizer = load_tokenizer(data_dir)
    train_split, val_split = load_split(data_dir, "train"), load_split(data_dir, "val")
    counts = np.bincount(np.asarray(train_split[0]), minlength=tokenizer.vocab_size)
    counts[: len(SPECIAL_TOKENS)] = 0  # never a target
    most_frequent = int(counts.argmax())
    print(f"tokenizer: {tokenizer.vocab_size:,} tokens; data: {len(train_split[0]):,} train / "
          f"{len(val_split[0]):,} val tokens in {len(train_split[1]) - 1:,} / {len(val_split[1]) - 1:,} sentences")

    # --- model and optimizer -------------------------------------------------------------------------------
    model_config = BertConfig(
        vocab_size=tokenizer.vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER, n_head=cfg.N_HEAD,
        n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT, fast_attention=cfg.FAST_ATTENTION,
    )
    model = BERT(model_config).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)
    batches = pair_batches(train_split, cfg, tokenizer.vocab_size, device, seed=cfg.SEED)
    print(f"model: {model.num_parameters():,} parameters ({model.num_parameters(non_embedding=True):,} "
          f"non-embedding); {cfg.BATCH_SIZE * cfg.GRAD_ACCUM_STEPS} sentence pairs of <= {cfg.BLOCK_SIZE} "
          f"tokens per step; tasks: MLM{' + NSP' if cfg.USE_NSP else ' only'}")

    # --- resume: weights, optimizer moments, step, RNG and the pair generator, all exactly -------------------
    out_dir = Path(cfg.OUT_DIR)
    step = 0
    if cfg.RESUME:
        path = ckpt.find_checkpoint(cfg.RESUME, out_dir, PREFIX)
        state = ckpt.load_checkpoint(path, kind=KIND, map_location=device)
        ckpt.check_compatible(state["model_config"], asdict(model_config), SHAPE_KEYS)
        model.load_state_dict(ckpt.clean_state_dict(state["model"]))
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        batches.load_state_dict(state["batches"])
        ckpt.set_rng_state(state["rng"])
        step = state["step"]
        print(f"resumed from {path} at step {step}")
    elif previous := ckpt.set_aside_previous_run(out_dir, PREFIX, ["metrics.jsonl", "loss.png"]):
        print(f"{out_dir} held an earlier run: moved it to {previous} (use --RESUME=latest to continue a run)")
    log = MetricsLog(out_dir / "metrics.jsonl", resume_step=step if cfg.RESUME else None)

    def save(loss: float) -> Path:
        path = ckpt.checkpoint_path(out_dir, PREFIX, step, loss)
        ckpt.save_checkpoint(path, {
            "kind": KIND, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(), "config": vars(cfg), "model_config": asdict(model_config),
            "step": step, "rng": ckpt.rng_state(), "batches": batches.state_dict(),
            "metrics": {"loss": loss}, "tokenizer": str(data_dir),
        })
        ckpt.prune_checkpoints(out_dir, PREFIX, cfg.KEEP_CHECKPOINTS)
        return path

    # --- the loop: warmup then linear decay (PAPER: BERT §A.2), accumulation, clipping, validation ------------
    start, last_path, val, val_counts, tokens_seen = time.perf_counter(), None, {}, Counter(), 0
    bar = progress(cfg.MAX_ITERS, initial=step)
    with GracefulInterrupt() as interrupt:
        while step < cfg.MAX_ITERS:
            lr = warmup_linear(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                               total_steps=cfg.MAX_ITERS)
            set_lr(optimizer, lr)
            step_start, counts = time.perf_counter(), Counter()
            for _ in range(cfg.GRAD_ACCUM_STEPS):
                batch = batches.next()  # (B, T) input_ids, segment_ids, attention_mask, mlm_labels; (B,) nsp_labels
                with autocast(device):
                    loss, batch_counts = losses(model, batch, cfg.USE_NSP, most_frequent)
                scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
                counts += batch_counts
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            tokens_seen += counts["tokens"]  # real tokens, not padding

            record = {"step": step, "lr": lr, **metrics(counts, "train"),
                      "tokens_per_second": counts["tokens"] / (time.perf_counter() - step_start)}
            record["train_loss"] = record["train_mlm_loss"] + record.get("train_nsp_loss", 0.0)
            check_finite(record["train_loss"], step, last_path)
            if step % cfg.EVAL_INTERVAL == 0 or step == cfg.MAX_ITERS:
                val, val_counts = evaluate(model, val_split, cfg, device, most_frequent)
                record.update(val, val_loss=val["val_mlm_loss"] + val.get("val_nsp_loss", 0.0))
                last_path = save(record["val_loss"])
            log.log(**record)
            bar.set_postfix(mlm=f"{record['train_mlm_loss']:.3f}", nsp=f"{record.get('train_nsp_loss', 0):.3f}",
                            val_mlm_acc=f"{val.get('val_mlm_accuracy', float('nan')):.1%}",
                            tok_s=f"{record['tokens_per_second']:,.0f}")
            bar.update()
            if interrupt.requested and step < cfg.MAX_ITERS:
                bar.close()
                path = last_path if "val_loss" in record else save(record["train_loss"])
                print(f"saved {path}\nresume with: uv run python phase1_foundation/project3_contextual_embeddings/"
                      f"train.py --RESUME=latest (plus the same settings you used)")
                sys.exit(0)
    bar.close()

    # --- the end: loss curves and the numbers the README quotes --------------------------------------------
    wall = time.perf_counter() - start
    plot = plot_losses(out_dir / "metrics.jsonl", out_dir / "loss.png", title=f"BERT on {read_meta(data_dir)['corpus']}",
                       panels=("mlm_loss", "nsp_loss") if cfg.USE_NSP else ("mlm_loss",))
    summary = {
        **val, "val_most_frequent_accuracy": val_counts["most_frequent"] / val_counts["mlm_count"],
        "steps": step, "wall_seconds": wall, "tokens_per_second": tokens_seen / wall,
        "checkpoint": str(last_path), "loss_curve": str(plot),
    }
    lines = [f"validation MLM accuracy {val['val_mlm_accuracy']:.1%} on {val_counts['mlm_count']:,} masked tokens "
             f"(always guessing the most frequent token: {summary['val_most_frequent_accuracy']:.1%}), "
             f"MLM loss {val['val_mlm_loss']:.3f}"]
    if cfg.USE_NSP:
        # Chance is answering the commoner label every time: 50% in expectation, a little more on a finite sample.
        n, is_next = val_counts["nsp_count"], val_counts["nsp_is_next"]
        summary["val_nsp_majority_accuracy"] = max(is_next, n - is_next) / n
        summary["val_nsp_standard_error"] = se = math.sqrt(0.25 / n)
        lines.append(f"validation NSP accuracy {val['val_nsp_accuracy']:.1%} on {n:,} pairs (always answering "
                     f"the commoner label: {summary['val_nsp_majority_accuracy']:.1%}; standard error {se:.1%})")
    lines.append(f"{step} steps in {wall / 60:.1f} min, {summary['tokens_per_second']:,.0f} tokens/s")
    print("\n" + "\n".join(lines) + f"\ncheckpoint: {last_path}\nloss curves: {plot}")
    return summary


if __name__ == "__main__":
    main()
