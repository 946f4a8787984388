"""Pre-train GPT-1 with next-token prediction: the whole recipe, top to bottom.

    uv run python phase1_foundation/project1_gpt/train.py                  # preset picked by your device
    uv run python phase1_foundation/project1_gpt/train.py --MAX_ITERS=200  # any config.py name can be changed
    uv run python phase1_foundation/project1_gpt/train.py --RESUME=latest  # continue exactly where it stopped

Config -> data -> model -> optimizer -> loop -> checkpoint. The plumbing (devices, batches, checkpoints,
logging) lives in common/ so that this file reads as the recipe of the paper's §3.1 and §4.1; the README's
"Run it" and "Results" say what a run prints.
"""

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from common.course import reference
from common.course.learn.check import refuse_stubs
from common.data.tokenizers import Tokenizer
from common.data.tokens import Batches, load_tokens, read_meta
from common.errors import run_main
from common.files import portable
from common.training import dry_run
from common.training.baselines import bigram_log_probs, unigram_cross_entropy
from common.training.config import load_config
from common.training.device import autocast, describe, enable_tf32, grad_scaler, seed_everything
from common.training.metrics import peak_flops, plot_losses, save_summary
from common.training.optim import adamw, set_lr, warmup_cosine
from common.training.run import StepReport, TrainingRun
from phase1_foundation.project1_gpt import config
from phase1_foundation.project1_gpt.download_data import prepare
from phase1_foundation.project1_gpt.generate import generate
from phase1_foundation.project1_gpt.model import GPT, KIND, PREFIX, GPTConfig
from phase1_foundation.project1_gpt.tokenizer import load_tokenizer

SHAPE_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "pre_ln")  # what a resume must match
SCRIPT = "phase1_foundation/project1_gpt/train.py"


def validation_windows(tokens: np.ndarray, cfg: SimpleNamespace,
                       device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The EVAL_ITERS validation batches, drawn once: every evaluation, and the baselines, score the same
    targets, so any two of their numbers are comparable."""
    batches = Batches(tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED + 1)
    return [batches.next() for _ in range(cfg.EVAL_ITERS)]  # (B, T) each, x and y


@torch.no_grad()
def evaluate(model: GPT, windows: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean loss on the validation windows."""
    model.eval()
    losses = []
    for x, y in windows:
        with autocast(x.device):
            losses.append(model(x, y)[1].item())
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def previous_token_only(model: GPT, windows: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Mean loss with each target predicted from its previous token alone, as a window's first position is:
    set beside the bigram model, it shows what the model owes to the longer context."""
    model.eval()
    losses = []
    for x, y in windows:
        with autocast(x.device):
            losses.append(model(x.reshape(-1, 1), y.reshape(-1, 1))[1].item())  # (B*T, 1): one token each
    return sum(losses) / len(losses)


def baselines(train_tokens: np.ndarray, windows: list[tuple[torch.Tensor, torch.Tensor]],
              vocab_size: int) -> dict[str, float]:
    """The unigram and bigram models' losses on the windows' targets: the lines the transformer must get
    below. Each target's previous token is the x at its position, so the bigram reads exactly what the
    transformer's first token of context is."""
    previous = np.concatenate([x.cpu().numpy().ravel() for x, _ in windows])
    following = np.concatenate([y.cpu().numpy().ravel() for _, y in windows])
    train_tokens = np.asarray(train_tokens)
    return {"unigram": unigram_cross_entropy(train_tokens, following, vocab_size),
            "bigram": float(-bigram_log_probs(train_tokens, previous, following, vocab_size).mean())}


def main(argv: list[str] | None = None) -> dict:
    refuse_stubs("phase1_foundation.project1_gpt")  # a learn task started and not yet written
    # --- config and device ---------------------------------------------------------------------------------
    cfg = load_config(config, argv)
    device = torch.device("cpu" if cfg.DRY_RUN else cfg.DEVICE)
    enable_tf32()
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}"
          + ("" if peak_flops(device) else "; peak FLOP/s unknown, so MFU is n/a"))

    # --- data: prepared once by download_data.py, read here as memmapped token files ------------------------
    data_dir = prepare(cfg)
    tokenizer = load_tokenizer(data_dir)
    train_tokens, val_tokens = load_tokens(data_dir, "train"), load_tokens(data_dir, "val")
    print(f"tokenizer: {cfg.TOKENIZER}, {tokenizer.vocab_size:,} tokens; "
          f"data: {len(train_tokens):,} train / {len(val_tokens):,} val tokens")

    # --- model and optimizer -------------------------------------------------------------------------------
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                          n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT, pre_ln=cfg.PRE_LN,
                          fast_attention=cfg.FAST_ATTENTION, causal=cfg.CAUSAL)).to(device)
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)
    batches = Batches(train_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, seed=cfg.SEED)
    tokens_per_step = cfg.BATCH_SIZE * cfg.GRAD_ACCUM_STEPS * cfg.BLOCK_SIZE
    print(f"model: {model.num_parameters():,} parameters ({model.num_parameters(non_embedding=True):,} "
          f"non-embedding), {'pre' if cfg.PRE_LN else 'post'}-LN; {tokens_per_step:,} tokens per step")
    if cfg.DRY_RUN:  # what the run would cost on a laptop GPU, from one step measured here: nothing trains
        return dry_run.report(model, lambda: model(*batches.next())[1], cfg)

    # --- resume (weights, optimizer moments, step, RNG and batch position, all exactly) or start afresh -----
    run = TrainingRun(cfg, PREFIX, KIND, model=model, optimizer=optimizer, scaler=scaler, batches=batches,
                      data_dir=data_dir, tokenizer=tokenizer)
    step = run.resume(SHAPE_KEYS)

    # --- the loop: warmup + cosine LR, accumulation, clipping; report does validation and checkpoints -----
    windows = validation_windows(val_tokens, cfg, device)
    with StepReport(run, cfg, step, evaluate=lambda: {"val_loss": evaluate(model, windows)}, script=SCRIPT,
                    flops_per_token=model.flops_per_token()) as report:
        while step < cfg.MAX_ITERS:
            lr = warmup_cosine(step, peak_lr=cfg.LEARNING_RATE, warmup_steps=cfg.WARMUP_ITERS,
                               total_steps=cfg.MAX_ITERS, floor=cfg.MIN_LR_RATIO)
            set_lr(optimizer, lr)
            loss_sum = torch.zeros((), device=device)
            for _ in range(cfg.GRAD_ACCUM_STEPS):
                x, y = batches.next()  # (B, T) each
                with autocast(device):
                    _, loss = model(x, y)
                scaler.scale(loss / cfg.GRAD_ACCUM_STEPS).backward()
                loss_sum += loss.detach()
            scaler.unscale_(optimizer)  # so that clipping sees the true gradients (fp16 scales them)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            report.after(step, loss_sum.item() / cfg.GRAD_ACCUM_STEPS, lr=lr, tokens=tokens_per_step)
    return summarize(cfg, model, tokenizer, data_dir, windows, report.val.get("val_loss", math.nan), step,
                     report.seconds, report.last_path)


def summarize(cfg: SimpleNamespace, model: GPT, tokenizer: Tokenizer, data_dir: Path,
              windows: list[tuple[torch.Tensor, torch.Tensor]], val_loss: float, steps: int, wall: float,
              checkpoint: Path) -> dict:
    """The end of a run: a loss curve beside the baselines, a sample, and the numbers the README quotes,
    printed and saved as summary.json."""
    out_dir = Path(cfg.OUT_DIR)
    lines = baselines(load_tokens(data_dir, "train"), windows, tokenizer.vocab_size)
    plot = plot_losses(out_dir / "metrics.jsonl", out_dir / "loss.png",
                       title=f"GPT-1 on {read_meta(data_dir)['corpus']}",
                       references={"loss": {"unigram": lines["unigram"], "bigram": lines["bigram"]}})
    model.eval()
    device = next(model.parameters()).device
    prompt = torch.tensor([tokenizer.encode(cfg.PROMPT)], device=device)
    sample = generate(model, prompt, cfg.SAMPLE_TOKENS, temperature=cfg.TEMPERATURE, top_k=cfg.TOP_K or None)
    print(f"\n--- sample ---\n{tokenizer.decode(sample[0].tolist())}\n--------------")
    one_token = previous_token_only(model, windows)
    summary = {
        "val_loss": val_loss, "unigram_loss": lines["unigram"], "bigram_loss": lines["bigram"],
        "previous_token_loss": one_token, "val_perplexity": math.exp(val_loss), "steps": steps,
        "wall_seconds": wall,
        "checkpoint": portable(checkpoint), "loss_curve": portable(plot), "data_dir": portable(data_dir),
    }
    targets = sum(y.numel() for _, y in windows)
    print(f"validation loss on {targets:,} held-out targets, nats per token (perplexity):")
    rows = (("GPT-1 (this run)", val_loss), ("GPT-1 reading the previous token only", one_token),
            ("bigram model (the previous token)", lines["bigram"]),
            ("unigram model (no context)", lines["unigram"]))
    for label, loss in rows:
        print(f"  {label:<40}{loss:>7.3f}  ({math.exp(loss):,.0f})")
    print(f"{steps} steps in {wall / 60:.1f} min\ncheckpoint: {checkpoint}\nloss curve: {plot}")
    save_summary(out_dir, summary)
    reference.report(config, cfg, summary)  # "is my loss right?": the course's, beside it
    return summary


if __name__ == "__main__":
    run_main(main)
