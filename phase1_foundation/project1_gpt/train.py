"""Pre-train GPT-1 with next-token prediction: the whole recipe, top to bottom.

    uv run python phase1_foundation/project1_gpt/train.py                    # preset picked by your device
    uv run python phase1_foundation/project1_gpt/train.py --MAX_ITERS=200    # any config.py name can be changed
    uv run python phase1_foundation/project1_gpt/train.py --RESUME=latest    # continue exactly where it stopped

Config -> data -> model -> optimizer -> loop -> checkpoint. The plumbing (devices, batches, checkpoints,
logging) lives in common/ so that this file reads as the recipe of the paper's §3.1 and §4.1.
"""

import math
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from common import checkpoint as ckpt
from common.config import load_config
from common.device import autocast, describe, enable_tf32, grad_scaler, seed_everything
from common.interrupt import GracefulInterrupt
from common.metrics import MetricsLog, check_finite, mfu, peak_flops, plot_losses, progress
from common.optim import adamw, set_lr, warmup_cosine
from common.tokenizers import load_tokenizer
from common.tokens import Batches, load_tokens, read_meta
from phase1_foundation.project1_gpt import config
from phase1_foundation.project1_gpt.download_data import prepare
from phase1_foundation.project1_gpt.model import GPT, GPTConfig

KIND = "project1/gpt"  # written into every checkpoint, so another chapter's file is refused with a clear line
PREFIX = "gpt"  # checkpoints/project1/gpt_iter{N}_loss{L}.pt
SHAPE_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "pre_ln")  # what a resume must match


@torch.no_grad()
def evaluate(model: GPT, tokens: np.ndarray, cfg, device: torch.device) -> float:
    """Mean loss on the same EVAL_ITERS validation batches every time, so two evaluations are comparable."""
    model.eval()
    batches = Batches(tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED + 1)
    losses = []
    for _ in range(cfg.EVAL_ITERS):
        x, y = batches.next()
        with autocast(device):
            losses.append(model(x, y)[1].item())
    model.train()
    return sum(losses) / len(losses)


def unigram_cross_entropy(train: np.ndarray, val: np.ndarray, vocab_size: int) -> float:
    """The loss of a model that ignores context: the training set's token frequencies, scored on val (nats).

    Anything the transformer gets below this number it learned from context.
    """
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1  # add-one: no zero probabilities
    log_probs = np.log(counts / counts.sum())
    return float(-log_probs[val].mean())


def main(argv: list[str] | None = None) -> dict:
    # --- config and device ---------------------------------------------------------------------------------
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    enable_tf32()
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}" + ("" if peak_flops(device) else "; peak FLOP/s unknown, so MFU is n/a"))

    # --- data: prepared once by download_data.py, read here as memmapped token files ------------------------
    data_dir = prepare(cfg)
    tokenizer = load_tokenizer(data_dir)
    train_tokens, val_tokens = load_tokens(data_dir, "train"), load_tokens(data_dir, "val")
    print(f"tokenizer: {cfg.TOKENIZER}, {tokenizer.vocab_size:,} tokens; "
          f"data: {len(train_tokens):,} train / {len(val_tokens):,} val tokens")

    # --- model and optimizer -------------------------------------------------------------------------------
    model_config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER, n_head=cfg.N_HEAD,
        n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT, pre_ln=cfg.PRE_LN, fast_attention=cfg.FAST_ATTENTION,
    )
    model = GPT(model_config).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)
    batches = Batches(train_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED)
    tokens_per_step = cfg.BATCH_SIZE * cfg.GRAD_ACCUM_STEPS * cfg.BLOCK_SIZE
    flops_per_token = model.flops_per_token()  # counted once, not in the training step
    print(f"model: {model.num_parameters():,} parameters ({model.num_parameters(non_embedding=True):,} "
          f"non-embedding), {'pre' if cfg.PRE_LN else 'post'}-LN; {tokens_per_step:,} tokens per step")

    # --- resume: weights, optimizer moments, step, RNG and batch position, all exactly ---------------------
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

    # --- the loop: warmup + cosine LR, accumulation, clipping, periodic validation and checkpoints -----------
    start, last_path, val_loss = time.perf_counter(), None, float("nan")
    bar = progress(cfg.MAX_ITERS, initial=step)
    with GracefulInterrupt() as interrupt:
        while step < cfg.MAX_ITERS:
            lr = warmup_cosine(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                               total_steps=cfg.MAX_ITERS, floor=cfg.MIN_LR_RATIO)
            set_lr(optimizer, lr)
            step_start = time.perf_counter()
            loss_sum = torch.zeros((), device=device)
            for _ in range(cfg.GRAD_ACCUM_STEPS):
                x, y = batches.next()  # (B, T) each
                with autocast(device):
                    _, loss = model(x, y)
                scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
                loss_sum += loss.detach()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1

            train_loss = loss_sum.item() / cfg.GRAD_ACCUM_STEPS
            check_finite(train_loss, step, last_path)
            tokens_per_second = tokens_per_step / (time.perf_counter() - step_start)
            record = {"step": step, "train_loss": train_loss, "lr": lr, "tokens_per_second": tokens_per_second}
            if step % cfg.EVAL_INTERVAL == 0 or step == cfg.MAX_ITERS:
                val_loss = record["val_loss"] = evaluate(model, val_tokens, cfg, device)
                last_path = save(val_loss)
            log.log(**record)
            utilisation = mfu(flops_per_token, tokens_per_second, device)
            bar.set_postfix(loss=f"{train_loss:.3f}", val=f"{val_loss:.3f}", tok_s=f"{tokens_per_second:,.0f}",
                            mfu="n/a" if utilisation is None else f"{utilisation:.0%}")
            bar.update()
            if interrupt.requested and step < cfg.MAX_ITERS:
                bar.close()
                path = last_path if "val_loss" in record else save(train_loss)
                print(f"saved {path}\nresume with: uv run python phase1_foundation/project1_gpt/train.py "
                      f"--RESUME=latest (plus the same settings you used)")
                sys.exit(0)
    bar.close()

    # --- the end: a loss curve, a sample, the numbers the README quotes -----------------------------------
    wall = time.perf_counter() - start
    plot = plot_losses(out_dir / "metrics.jsonl", out_dir / "loss.png", title=f"GPT-1 on {read_meta(data_dir)['corpus']}")
    baseline = unigram_cross_entropy(np.asarray(train_tokens), np.asarray(val_tokens), tokenizer.vocab_size)
    model.eval()
    prompt = torch.tensor([tokenizer.encode(cfg.PROMPT)], device=device)
    sample = model.generate(prompt, cfg.SAMPLE_TOKENS, temperature=cfg.TEMPERATURE, top_k=cfg.TOP_K or None)
    print(f"\n--- sample ---\n{tokenizer.decode(sample[0].tolist())}\n--------------")
    summary = {
        "val_loss": val_loss, "unigram_loss": baseline, "val_perplexity": math.exp(val_loss),
        "steps": step, "wall_seconds": wall, "checkpoint": str(last_path), "loss_curve": str(plot),
    }
    print(f"val loss {val_loss:.3f} nats (perplexity {math.exp(val_loss):.1f}) vs {baseline:.3f} for a "
          f"context-free unigram model; {step} steps in {wall / 60:.1f} min\ncheckpoint: {last_path}\n"
          f"loss curve: {plot}")
    return summary


if __name__ == "__main__":
    main()
