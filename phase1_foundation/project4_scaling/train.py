"""Run the scaling sweep: every model shape at every compute budget, under each way the papers count compute.

    uv run python phase1_foundation/project4_scaling/train.py                         # both countings
    uv run python phase1_foundation/project4_scaling/train.py --ONLY=kaplan_2e10_2x16  # one point again
    uv run python phase1_foundation/project4_scaling/laws.py                          # then fit the laws

A run at budget C reads D = C / (FLOPs per token) tokens: 6N under Kaplan's counting, App. F's under
Chinchilla's. What makes the runs one sweep: every run of a seed reads the data in the same order, each cosine
reaches its floor at the run's last token (PAPER: Chinchilla §3, App. B), and the learning rate follows N by
Kaplan's rule (times LR_SCALE). Each finished run adds a line to OUT_DIR/results.jsonl; a rerun skips those,
so a sweep stopped by Ctrl-C goes on, its interrupted run from the first step. README, "Running it".
"""

import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from common.course import reference
from common.course.learn.check import refuse_stubs
from common.data.tokens import load_tokens, read_meta
from common.errors import CourseError, run_main
from common.files import portable
from common.progress import progress_bar
from common.training import dry_run
from common.training.baselines import bigram_cross_entropy, unigram_cross_entropy
from common.training.config import load_config
from common.training.device import autocast, describe, enable_tf32, seed_everything
from common.training.interrupt import GracefulInterrupt
from common.training.metrics import check_finite, matmul_flops, save_summary
from common.training.optim import adamw, set_lr, warmup_cosine
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.download_data import prepare
from phase1_foundation.project4_scaling.model import GPT, GPTConfig, flops_per_token
from phase1_foundation.project4_scaling.results import read_results, settings_of, write_results
from phase1_foundation.project4_scaling.sweep import Run, affordable_runs, planned_runs

# What a results file was made with: a row made under other values is a different experiment.
SWEEP_SETTINGS = ("BLOCK_SIZE", "BATCH_SIZE", "HEAD_SIZE", "LR_SCALE", "BETAS", "WEIGHT_DECAY",
                  "WARMUP_FRACTION", "MIN_LR_RATIO", "COSINE_STRETCH", "GRAD_CLIP", "VAL_TOKENS", "SEED")


def kaplan_learning_rate(params: int, scale: float = 1.0) -> float:
    """PAPER: Kaplan et al. 2020, App. D.6, eq. D.1: LR(N) ≈ 0.003239 - 0.0001395 log N, the rate they
    found best for each size (N non-embedding)."""
    return scale * (0.003239 - 0.0001395 * math.log(params))


class EpochBatches:
    """(B, T) windows that tile the training tokens, in a shuffled order drawn anew for each epoch.

    The token stream is cut into non-overlapping windows of T + 1 tokens (T inputs, each with its next
    token as the target); epoch e reads every window once, in the order of a permutation seeded with
    seed + e. Every run of one seed reads the same sequence, so a run of D tokens sees exactly the first D
    tokens a longer run sees. That takes the data order out of a comparison between runs, not the luck of
    their first weights: the noise measurement (NOISE_SEEDS) shows how much is left.
    """

    def __init__(self, tokens: np.ndarray, block_size: int, batch_size: int, device: torch.device, seed: int):
        self.tokens, self.block_size, self.batch_size, self.device = tokens, block_size, batch_size, device
        self.windows, self.seed = (len(tokens) - 1) // block_size, seed
        if self.windows < batch_size:
            raise CourseError(f"error: the training text holds {self.windows} windows of {block_size + 1} "
                              f"tokens, fewer than a batch of {batch_size}; use a longer --TEXT_FILE")
        self.epoch, self.position = 0, 0  # windows read so far in this epoch
        self.order = self._shuffled()  # (windows,)

    def _shuffled(self) -> torch.Tensor:
        return torch.randperm(self.windows, generator=torch.Generator().manual_seed(self.seed + self.epoch))

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        T, B = self.block_size, self.batch_size
        if self.position + B > self.windows:  # the epoch's last windows that do not fill a batch are skipped
            self.epoch, self.position = self.epoch + 1, 0
            self.order = self._shuffled()
        starts = self.order[self.position : self.position + B] * T  # (B,)
        self.position += B
        windows = np.stack([self.tokens[s : s + T + 1] for s in starts.tolist()])  # (B, T + 1)
        windows = torch.from_numpy(windows.astype(np.int64)).to(self.device)
        return windows[:, :-1], windows[:, 1:]  # (B, T) inputs, (B, T) targets


def scored_validation(tokens: np.ndarray, cfg: SimpleNamespace) -> np.ndarray:
    """The validation tokens every run is scored on: the first VAL_TOKENS, a whole number of windows, plus
    the one token the last window predicts."""
    count = min(cfg.VAL_TOKENS, len(tokens) - 1) // cfg.BLOCK_SIZE
    return np.asarray(tokens[: count * cfg.BLOCK_SIZE + 1], dtype=np.int64)


def baselines(train_tokens: np.ndarray, val_tokens: np.ndarray, cfg: SimpleNamespace,
              vocab_size: int) -> dict:
    """Unigram and bigram cross-entropy on the tokens the runs are scored on: what a run must beat."""
    scored = scored_validation(val_tokens, cfg)
    train = np.asarray(train_tokens, dtype=np.int64)
    return {"unigram": unigram_cross_entropy(train, scored[1:], vocab_size),
            "bigram": bigram_cross_entropy(train, scored, vocab_size)}


@torch.no_grad()
def validation_loss(model: GPT, tokens: np.ndarray, cfg: SimpleNamespace, device: torch.device) -> float:
    """Mean next-token loss over the first VAL_TOKENS validation tokens, in non-overlapping windows: the
    same tokens for every run, so every loss in the sweep is measured on the same text."""
    model.eval()
    T = cfg.BLOCK_SIZE
    windows = torch.from_numpy(scored_validation(tokens, cfg))
    count = (len(windows) - 1) // T
    x = windows[:-1].view(count, T)  # (count, T)
    y = windows[1:].view(count, T)  # (count, T)
    total = 0.0
    for i in range(0, count, 64):
        with autocast(device):
            total += model(x[i : i + 64].to(device), y[i : i + 64].to(device))[1].item() * len(x[i : i + 64])
    model.train()
    return total / count


def build(run: Run, vocab_size: int, train_tokens: np.ndarray, cfg: SimpleNamespace,
          device: torch.device) -> tuple[GPT, torch.optim.Optimizer, EpochBatches]:
    """The model of one run, its optimizer at the run's peak learning rate, and its batches."""
    seed_everything(run.seed)
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=run.n_layer,
                          n_head=run.n_embd // cfg.HEAD_SIZE, n_embd=run.n_embd)).to(device)
    assert model.num_parameters(non_embedding=True) == run.params
    peak_lr = kaplan_learning_rate(run.params, cfg.LR_SCALE)
    optimizer = adamw(model, peak_lr, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    return model, optimizer, EpochBatches(train_tokens, cfg.BLOCK_SIZE, cfg.BATCH_SIZE, device, run.seed)


def train_model(run: Run, vocab_size: int, train_tokens: np.ndarray, val_tokens: np.ndarray,
                cfg: SimpleNamespace, device: torch.device, interrupt: GracefulInterrupt, bar,
                settings: dict) -> dict | None:
    """One point of the sweep, start to end; its row for results.jsonl, or None if Ctrl-C stopped it."""
    model, optimizer, batches = build(run, vocab_size, train_tokens, cfg, device)
    peak_lr = kaplan_learning_rate(run.params, cfg.LR_SCALE)
    warmup = max(1, round(cfg.WARMUP_FRACTION * run.steps))
    cycle = round(cfg.COSINE_STRETCH * (run.steps - 1))  # the cosine's length; 1.0: floor at the last step
    start = time.perf_counter()
    for step in range(run.steps):
        if interrupt.requested:
            return None
        set_lr(optimizer, warmup_cosine(step, peak_lr=peak_lr, warmup_steps=warmup, total_steps=cycle,
                                        floor=cfg.MIN_LR_RATIO))
        x, y = batches.next()  # (B, T), (B, T)
        with autocast(device):
            _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0 or step == run.steps - 1:
            loss = loss.item()
            check_finite(loss, step, None)
            bar.set_postfix_str(f"{run.name} step {step + 1}/{run.steps} loss {loss:.3f}", refresh=False)
        bar.update(cfg.BATCH_SIZE * cfg.BLOCK_SIZE)
    wall = time.perf_counter() - start
    chinchilla_per_token = flops_per_token(model.config, "chinchilla")
    return {
        "name": run.name, "counting": run.counting, "budget": run.budget, "params": run.params,
        "params_total": model.num_parameters(), "tokens": run.tokens, "flops": 6 * run.params * run.tokens,
        "flops_chinchilla": chinchilla_per_token * run.tokens,
        "epochs": round(run.tokens / len(train_tokens), 3),
        "val_loss": validation_loss(model, val_tokens, cfg, device),
        "wall_s": round(wall, 2), "tokens_per_s": round(run.tokens / wall),
        "n_layer": run.n_layer, "d_model": run.n_embd, "steps": run.steps, "peak_lr": peak_lr,
        "seed": run.seed, "repeat": run.repeat,
        "settings": settings,
    }


def dry_run_sweep(runs: list[Run], vocab_size: int, train_tokens: np.ndarray, cfg: SimpleNamespace) -> dict:
    """--DRY_RUN=True: one step of each shape measured on the CPU; the whole sweep's FLOPs and laptop-GPU
    time, and the peak memory of its largest shape. Nothing is trained."""
    def step_cost(run: Run) -> dry_run.StepCost:
        model, optimizer, batches = build(run, vocab_size, train_tokens, cfg, torch.device("cpu"))
        return dry_run.measure_step(model, optimizer, lambda: model(*batches.next())[1],
                                    dry_run.dtype_for(cfg.PRESET))

    costs = {}  # (n_layer, n_embd) -> the cost of one step of that shape
    for run in runs:
        if (run.n_layer, run.n_embd) not in costs:
            costs[run.n_layer, run.n_embd] = step_cost(run)
    flops = sum(costs[run.n_layer, run.n_embd].flops * run.steps for run in runs)
    seconds = sum(costs[run.n_layer, run.n_embd].laptop_seconds * run.steps for run in runs)
    largest = max(costs.values(), key=lambda cost: cost.memory_bytes)
    print(f"the sweep's largest shape ({largest.parameters:,} parameters) below; FLOPs and time are all "
          f"{len(runs)} runs'")
    print(dry_run.describe(largest, preset=cfg.PRESET, flops=flops, seconds=seconds,
                           what=f"{len(runs)} runs, {sum(run.steps for run in runs):,} steps of "
                                f"{cfg.BATCH_SIZE} x {cfg.BLOCK_SIZE} tokens"))
    return dry_run.summary(largest, flops, seconds)


def main(argv: list[str] | None = None) -> list[dict] | dict:
    refuse_stubs("phase1_foundation.project4_scaling")  # a learn task started and not yet written
    cfg = load_config(config, argv)
    device = torch.device("cpu" if cfg.DRY_RUN else cfg.DEVICE)
    enable_tf32()
    print(f"device: {describe(device)}")

    data_dir = prepare(cfg)
    meta = read_meta(data_dir)
    train_tokens, val_tokens = load_tokens(data_dir, "train"), load_tokens(data_dir, "val")
    runs, too_short = planned_runs(cfg, meta["vocab_size"])
    runs, too_long = affordable_runs(runs, len(train_tokens), cfg.MAX_EPOCHS)
    if too_long:
        print(f"left out {len(too_long)} runs that would read the text more than "
              f"MAX_EPOCHS={cfg.MAX_EPOCHS:g} times (see download_data.py)")
    if too_short:
        print(f"left out {len(too_short)} runs of fewer than MIN_STEPS={cfg.MIN_STEPS} steps")
    repeats = [run for run in runs if run.repeat]
    if repeats:
        budgets = ", ".join(f"{budget:g}" for budget in sorted({run.budget for run in repeats}))
        print(f"noise: at C = {budgets} (kaplan counting) every shape is trained with {cfg.NOISE_SEEDS} "
              f"seeds, {len(repeats)} runs more")
    if cfg.DRY_RUN:  # what the sweep would cost on a laptop GPU, from steps measured here: nothing trains
        return dry_run_sweep(runs, meta["vocab_size"], train_tokens, cfg)

    results = Path(cfg.OUT_DIR) / "results.jsonl"
    floor = baselines(train_tokens, val_tokens, cfg, meta["vocab_size"])
    print(f"to beat, on the same validation tokens: unigram {floor['unigram']:.3f}, "
          f"bigram {floor['bigram']:.3f} nats per character")
    settings = settings_of(cfg, SWEEP_SETTINGS, data=data_dir.name)
    rows = read_results(results, settings=settings, missing_ok=True)
    order = {run.name: i for i, run in enumerate(runs)}  # rows as the runs: by counting, budget, then size
    only = {name.strip() for name in cfg.ONLY.split(",") if name.strip()}
    if only:
        unknown = only - {run.name for run in runs}
        if unknown:
            raise CourseError(f"error: no run named {', '.join(sorted(unknown))} in this sweep; its runs are "
                              f"{', '.join(run.name for run in runs)}")
        runs = [run for run in runs if run.name in only]
        rows = [row for row in rows if row["name"] not in only]
    done = {row["name"] for row in rows}
    todo = [run for run in runs if run.name not in done]
    print(f"{len(runs)} runs, {len(runs) - len(todo)} already in {results}; {len(todo)} to train on "
          f"{sum(run.tokens for run in todo):,} tokens in all; the training text holds {len(train_tokens):,}")

    bar = progress_bar(total=sum(run.tokens for run in todo), unit="tok", unit_scale=True, desc="sweep")
    with GracefulInterrupt("Ctrl-C: stopping the sweep; the finished runs are kept") as interrupt:
        for run in todo:
            row = train_model(run, meta["vocab_size"], train_tokens, val_tokens, cfg, device, interrupt, bar,
                              settings)
            if row is None:
                bar.close()
                print(f"stopped during {run.name}; {len(rows)} finished runs are in {results}. Run the same "
                      "command again to go on: the interrupted run starts again from its first step")
                return rows
            rows = sorted(rows + [row], key=lambda r: order.get(r["name"], len(order)))
            write_results(results, rows)
            bar.write(f"{run.name:>20}  N {run.params:>7,}  D {run.tokens:>10,}  val {row['val_loss']:.4f}  "
                      f"{row['wall_s']:6.1f} s  {row['tokens_per_s']:,} tok/s")
    bar.close()
    seconds = sum(row["wall_s"] for row in rows)
    print(f"trained {sum(row['tokens'] for row in rows):,} tokens in {seconds:.0f} s of runs; this device "
          f"multiplies matrices at {matmul_flops(device) / 1e9:,.0f} GFLOP/s just now")
    summary = {"runs": len(rows), "results": portable(results), "baselines": floor, "trained": len(todo),
               "data_dir": portable(data_dir), "val_losses": {row["name"]: row["val_loss"] for row in rows}}
    save_summary(Path(cfg.OUT_DIR), summary)
    reference.report(config, cfg, summary)  # "is my loss right?": every run's loss beside the course's
    print(f"results: {results}\nnext: uv run python phase1_foundation/project4_scaling/laws.py")
    return rows


if __name__ == "__main__":
    run_main(main)
