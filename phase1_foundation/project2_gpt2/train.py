"""Pre-train GPT-2 with next-token prediction, on one device or on several with data parallelism.

    uv run python phase1_foundation/project2_gpt2/train.py                  # preset picked by your device
    uv run python phase1_foundation/project2_gpt2/train.py --MAX_ITERS=200  # any config.py name
    uv run python phase1_foundation/project2_gpt2/train.py --RESUME=latest  # continue exactly
    uv run torchrun --nproc_per_node=4 phase1_foundation/project2_gpt2/train.py  # 4 GPUs, one process each

Config -> data -> model -> optimizer -> loop -> checkpoint, as in chapter 1. New is data parallelism (DDP):
torchrun starts one process per GPU, each with a full copy of the model and its share of every batch; DDP
averages the gradients, so every copy takes the same optimizer step (the loop below shows no_sync; parallel.py
joins the processes). README, "On a GPU, and on several", says when several processes give one process's
numbers.
"""

import contextlib
import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist

from common.course import reference
from common.course.learn.check import refuse_stubs
from common.data.tokens import Batches, load_tokens, read_meta
from common.errors import run_main
from common.files import portable
from common.training import checkpoint as ckpt
from common.training import dry_run
from common.training.baselines import bigram_cross_entropy, unigram_cross_entropy
from common.training.config import load_config
from common.training.device import autocast, describe, enable_tf32, grad_scaler, seed_everything
from common.training.metrics import (
    matmul_flops,
    peak_flops,
    plot_losses,
    read_metrics,
    save_summary,
)
from common.training.optim import adamw, set_lr, warmup_cosine
from common.training.run import StepReport, TrainingRun
from phase1_foundation.project2_gpt2 import config, parallel
from phase1_foundation.project2_gpt2.download_data import prepare
from phase1_foundation.project2_gpt2.generate import generate
from phase1_foundation.project2_gpt2.model import GPT, KIND, PREFIX, GPTConfig
from phase1_foundation.project2_gpt2.tokenizer import load_tokenizer

SHAPE_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")  # what a resume must match
SCRIPT = "phase1_foundation/project2_gpt2/train.py"


# --- data: prepared once, by rank 0 ------------------------------------------------------------------------

def prepare_once(cfg: SimpleNamespace, rank: int, world_size: int) -> Path:
    """The prepared-data folder: rank 0 builds it if needed while the other processes wait, then find it."""
    if rank == 0:
        data_dir = prepare(cfg)
    if world_size > 1:
        dist.barrier()
    return prepare(cfg) if rank else data_dir


# --- measuring ----------------------------------------------------------------------------------------------

@torch.no_grad()
def evaluate(model: GPT, tokens: np.ndarray, cfg: SimpleNamespace, device: torch.device) -> float:
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


def main(argv: list[str] | None = None) -> dict | None:
    refuse_stubs("phase1_foundation.project2_gpt2")  # a learn task started and not yet written
    if int(os.environ.get("RANK", "0")) > 0:
        sys.stdout = open(os.devnull, "w")  # under torchrun only rank 0 speaks; the others would repeat it
    cfg = load_config(config, argv)
    # a dry run measures one step on the CPU, in this one process
    rank, world_size, device = (0, 1, torch.device("cpu")) if cfg.DRY_RUN else parallel.start_processes(cfg)
    try:
        summary = train(cfg, rank, world_size, device)
        if world_size > 1:
            dist.barrier()  # leave together: a group torn down while a peer still sends to it can abort
        return summary
    except RuntimeError as error:
        lost = parallel.lost_a_process(error) if world_size > 1 else None
        if lost is None:
            raise
        newest = ckpt.newest_checkpoint(Path(cfg.OUT_DIR), PREFIX)
        kept = f"the newest checkpoint is {newest}; " if newest else "no checkpoint was saved yet; "
        print(f"error: process {rank} lost another process of this run ({lost}); "
              f"{kept}resume with --RESUME=latest", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(1)  # not sys.exit: tearing down a group whose peer is gone can abort in gloo's threads
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def train(cfg: SimpleNamespace, rank: int, world_size: int, device: torch.device) -> dict | None:
    # --- device -----------------------------------------------------------------------------------------
    enable_tf32()
    seed_everything(cfg.SEED)  # the same initial weights in every process
    print(f"device: {describe(device)}" + (f" x {world_size} processes" if world_size > 1 else "")
          + ("" if peak_flops(device) else "; peak FLOP/s unknown, so MFU is n/a"))

    # --- data: prepared once (by rank 0), read here as memmapped token files ----------------------------
    data_dir = prepare_once(cfg, rank, world_size)
    tokenizer = load_tokenizer(data_dir)
    train_tokens, val_tokens = load_tokens(data_dir, "train"), load_tokens(data_dir, "val")
    print(f"tokenizer: {cfg.TOKENIZER}, {tokenizer.vocab_size:,} tokens; "
          f"data: {len(train_tokens):,} train / {len(val_tokens):,} val tokens")

    # --- model, optimizer, and the data-parallel wrapper --------------------------------------------------
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                          n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                          fast_attention=cfg.FAST_ATTENTION)).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)
    batches = Batches(train_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED,
                      rank=rank, world_size=world_size)  # each process reads its own rows of every batch
    tokens_per_step = cfg.BATCH_SIZE * cfg.GRAD_ACCUM_STEPS * cfg.BLOCK_SIZE  # over all processes
    print(f"model: {model.num_parameters():,} parameters ({model.num_parameters(non_embedding=True):,} "
          f"non-embedding); {tokens_per_step:,} tokens per step")
    warn_if_rereading(cfg, tokens_per_step, len(train_tokens))
    if cfg.DRY_RUN:  # what the run would cost on a laptop GPU, from one step measured here: nothing trains
        return dry_run.report(model, lambda: model(*batches.next())[1], cfg)

    run = TrainingRun(cfg, PREFIX, KIND, model=model, optimizer=optimizer, scaler=scaler, batches=batches,
                      data_dir=data_dir, tokenizer=tokenizer, extra={"world_size": world_size})
    step = run.resume(SHAPE_KEYS, rank=rank)  # every process loads the same weights and optimizer state
    if not cfg.RESUME:
        seed_everything(cfg.SEED + rank)  # same weights everywhere, but each process its own dropout masks
    stepper = parallel.wrap(model, cfg.COMPILE, world_size, device)  # the model as each step runs it

    # --- the loop: warmup + cosine LR, accumulation, clipping; report does validation and checkpoints -----
    with StepReport(run, cfg, step, evaluate=lambda: {"val_loss": evaluate(model, val_tokens, cfg, device)},
                    script=SCRIPT, flops_per_token=model.flops_per_token(), rank=rank,
                    world_size=world_size) as report:
        while step < cfg.MAX_ITERS:
            lr = warmup_cosine(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                               total_steps=cfg.MAX_ITERS, floor=cfg.MIN_LR_RATIO)
            set_lr(optimizer, lr)
            loss_sum = torch.zeros((), device=device)
            for micro in range(cfg.GRAD_ACCUM_STEPS):
                # DDP averages the gradients across processes in backward(), a round of communication; the
                # micro-steps before the last only add to the local gradients, so they skip it (no_sync).
                last = micro == cfg.GRAD_ACCUM_STEPS - 1
                with stepper.no_sync() if world_size > 1 and not last else contextlib.nullcontext():
                    x, y = batches.next()  # (B / world_size, T) each
                    with autocast(device):
                        _, loss = stepper(x, y)
                    scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
                loss_sum += loss.detach()
            scaler.unscale_(optimizer)  # so that clipping sees the true gradients (fp16 scales them)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            train_loss = parallel.mean_over_processes(loss_sum, world_size) / cfg.GRAD_ACCUM_STEPS
            report.after(step, train_loss, lr=lr, tokens=tokens_per_step)
    if rank:
        return None
    return summarize(cfg, model, data_dir, report.val.get("val_loss", math.nan), step, report.seconds,
                     report.last_path, device)


def warn_if_rereading(cfg: SimpleNamespace, tokens_per_step: int, train_tokens: int) -> None:
    """A small model starts to memorise text it has read ten times; the validation loss is where it shows."""
    epochs = cfg.MAX_ITERS * tokens_per_step / train_tokens
    if epochs > 10:
        print(f"note: {cfg.MAX_ITERS:,} steps read the training tokens {epochs:.0f} times over; watch the "
              "validation loss for overfitting, or use a larger corpus (--CORPUS=wikitext-103)")


def summarize(cfg: SimpleNamespace, model: GPT, data_dir: Path, val_loss: float, steps: int, wall: float,
              checkpoint: Path, device: torch.device) -> dict:
    """The end of a run: the baselines to beat, a loss curve, a sample, and the numbers the README quotes,
    printed and saved as summary.json."""
    out_dir = Path(cfg.OUT_DIR)
    tokenizer = load_tokenizer(data_dir)
    train_tokens, val_tokens = load_tokens(data_dir, "train"), load_tokens(data_dir, "val")
    unigram = unigram_cross_entropy(np.asarray(train_tokens), np.asarray(val_tokens), tokenizer.vocab_size)
    bigram = bigram_cross_entropy(np.asarray(train_tokens), np.asarray(val_tokens), tokenizer.vocab_size)
    plot = plot_losses(out_dir / "metrics.jsonl", out_dir / "loss.png",
                       title=f"GPT-2 on {read_meta(data_dir)['corpus']}",
                       references={"loss": {"unigram": unigram, "bigram": bigram}})
    records = read_metrics(out_dir / "metrics.jsonl")
    tokens_per_second = np.median([r["tokens_per_second"] for r in records]) if records else float("nan")
    model.eval()
    prompt = torch.tensor([tokenizer.encode(cfg.PROMPT)], device=device)
    generator = torch.Generator(device).manual_seed(cfg.SEED)
    sample = generate(model, prompt, cfg.SAMPLE_TOKENS, temperature=cfg.TEMPERATURE, top_k=cfg.TOP_K or None,
                      top_p=cfg.TOP_P or None, eos_id=tokenizer.eot_id, generator=generator)
    print(f"\n--- sample ---\n{tokenizer.decode(sample[0].tolist())}\n--------------")
    summary = {
        "val_loss": val_loss, "val_perplexity": math.exp(val_loss), "unigram_loss": unigram,
        "bigram_loss": bigram, "steps": steps, "wall_seconds": wall,
        "tokens_per_second": float(tokens_per_second), "matmul_flops": matmul_flops(device),
        "checkpoint": portable(checkpoint), "loss_curve": portable(plot), "data_dir": portable(data_dir),
    }
    print(f"val loss {val_loss:.3f} nats (perplexity {math.exp(val_loss):.1f}); a bigram model {bigram:.3f}, "
          f"a unigram model {unigram:.3f}\n{steps} steps in {wall / 60:.1f} min, median "
          f"{tokens_per_second:,.0f} tokens/s (this device's matmuls: "
          f"{summary['matmul_flops'] / 1e9:,.0f} GFLOP/s)\ncheckpoint: {checkpoint}\nloss curve: {plot}")
    save_summary(out_dir, summary)
    reference.report(config, cfg, summary)  # "is my loss right?": the course's, beside it
    return summary


if __name__ == "__main__":
    run_main(main)
