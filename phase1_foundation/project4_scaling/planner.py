"""Planning a run: a compute budget split into a model size and tokens by Chinchilla's closed form, from the
paper's constants, a replication's, or your own sweep's fit; and the step from minutes on a device to that
budget, to a model shape, to the command that trains it.

    ChinchillaPlanner   (N_opt, D_opt) for a budget C, Eq. 4
    plan_for_minutes    C from minutes and a device's peak FLOP/s, then the planner
    model_shape         an (n_layer, d_model) whose every parameter counted is N_opt
    plan                what laws.py --PLAN_MINUTES prints: the device's speed measured, then all of the above

The constants count N as Chinchilla does, every parameter, and the closed form takes C = 6ND, so a plan
counts that way throughout: N_opt sizes the whole model, embeddings included, and the speed is measured in
6N FLOP/s of that N. "ours" is the sweep's own Approach 3 fit, N counted the same way.
"""

import math
from pathlib import Path

import numpy as np

from common.errors import CourseError
from phase1_foundation.project4_scaling.chinchilla import Allocation, LossSurface

SMALLEST_FITTED = 1.4e18  # PAPER: Besiroglu et al. 2024's runs (chinchilla_runs.csv): the least compute

PUBLISHED_SURFACES = {
    # PAPER: Chinchilla App. D.2, Eq. 10: the fit as printed, rounded.
    "paper-rounded": LossSurface(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28),
    # PAPER: the same fit unrounded, from the paper's LaTeX source, as Besiroglu et al. 2024 (arXiv
    # 2404.10102) report it; what the rounding changes: README, "The planner, and what rounding does"
    "paper-unrounded": LossSurface(E=1.6934, A=406.4, B=410.7, alpha=0.3392, beta=0.2849),
    # PAPER: Besiroglu et al. 2024 (arXiv 2404.10102): their refit of the Approach 3 data, read off the
    # paper's plots.
    "epoch-2024": LossSurface(E=1.817, A=482.0, B=2085.4, alpha=0.348, beta=0.366),
}


class ChinchillaPlanner:
    """Compute-optimal model size and tokens for a budget C, by Chinchilla's closed form (Eq. 4):
    N_opt = G (C/6)^a, D_opt = (C/6)^b / G, G = (αA / (βB))^(1/(α+β)).

    The constants are Besiroglu et al.'s refit by default, the fit that Chinchilla's own runs support
    (chinchilla_runs.py); "paper-rounded", "paper-unrounded" or a LossSurface of your own (fit_parametric's
    result) choose others. The constants of a fitted surface (E, A, B, α, β) are correlated, each fitted with
    the others: rounding α and β without refitting E, A and B describes another surface, so the plans differ
    already at the paper's own budgets, not only far beyond them (README, "The planner, and what rounding
    does").
    """

    def __init__(self, constants: str | LossSurface = "epoch-2024"):
        if isinstance(constants, str):
            if constants not in PUBLISHED_SURFACES:
                choices = ", ".join(PUBLISHED_SURFACES)
                raise ValueError(f"unknown constants {constants!r}; choose {choices} or a LossSurface")
            constants = PUBLISHED_SURFACES[constants]
        self.surface = constants

    def get_optimal_params_and_tokens(self, compute):
        """(N_opt, D_opt) for a budget of `compute` FLOPs (a number or an array of them): Chinchilla Eq. 4."""
        s = self.surface
        g = (s.alpha * s.A / (s.beta * s.B)) ** (1 / (s.alpha + s.beta))
        return g * (compute / 6) ** s.a, (compute / 6) ** s.b / g


def plan_for_minutes(minutes: float, flops_per_second: float, planner: ChinchillaPlanner | None = None,
                     utilisation: float = 0.3) -> tuple[float, float, float]:
    """(C, N_opt, D_opt) for a run of `minutes` on a device of peak `flops_per_second`.

    `utilisation` is the share of the peak a training run keeps busy (model FLOPs utilisation, MFU). The
    default, 0.3, is an assumption, not a measurement: on a GPU whose peak is known the progress bar shows
    the MFU your runs reach; pass that.
    """
    compute = minutes * 60 * flops_per_second * utilisation
    n_opt, d_opt = (planner or ChinchillaPlanner()).get_optimal_params_and_tokens(compute)
    return compute, n_opt, d_opt


def all_parameters(n_layer: int, d_model: int, vocab_size: int, block_size: int) -> int:
    """N as Chinchilla counts it, exactly, for this chapter's model: the blocks' weights, biases and
    LayerNorms (12·d² + 13·d each, ≈ Kaplan's 12·n_layer·d_model², Eq. 2.1) and the final LayerNorm, plus
    the tables a token looks up, (vocabulary + context) x d_model (the head is the token table). Written out
    here so that planning needs no torch; tests/test_laws.py holds it equal to model.total_parameters."""
    return n_layer * (12 * d_model**2 + 13 * d_model) + 2 * d_model + (vocab_size + block_size) * d_model


def model_shape(n_params: float, vocab_size: int, block_size: int, aspect_ratio: float = 64,
                head_size: int = 64) -> tuple[int, int]:
    """(n_layer, d_model) whose parameters, every one counted (all_parameters), come closest to `n_params`
    (by ratio), with d_model ≈ aspect_ratio · n_layer rounded to whole heads of `head_size`.

    Every one, because the planner's constants count every parameter (Chinchilla's N): with a vocabulary of
    50k, the tables are a third of a 100M-parameter model, and sizing only the blocks to N_opt would plan a
    model a third too large. The default ratio, 64, is GPT-2 small's (768 / 12); Kaplan found the loss
    depends on the shape far less than on N."""
    def shape(n_layer: int) -> tuple[int, int]:
        return n_layer, max(head_size, round(aspect_ratio * n_layer / head_size) * head_size)

    def distance(candidate: tuple[int, int]) -> float:
        return abs(np.log(all_parameters(*candidate, vocab_size, block_size) / n_params))

    # the blocks alone, 12·L·(aspect·L)² = N, solved for L, bounds the depth from above; every depth up to
    # a little past it is tried, as the tables and the rounding of d_model to whole heads move the count
    most = round((n_params / (12 * aspect_ratio**2)) ** (1 / 3)) + 2
    return min((shape(n_layer) for n_layer in range(1, most + 1)), key=distance)


def flops_per_second(n_layer: int, n_embd: int, vocab_size: int, cfg, device) -> float:
    """The 6N FLOPs per second this code reaches training a model of this shape on this device, N every
    parameter as the planner counts it (the tables included), from a few timed steps on random tokens of
    the sweep's vocabulary (after two untimed ones, which pay for warming up)."""
    import time  # torch and the model only when planning: the fits need neither

    import torch

    from common.training.device import autocast
    from common.training.optim import adamw
    from phase1_foundation.project4_scaling.model import GPT, GPTConfig

    device, steps = torch.device(device), 5
    model = GPT(GPTConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=n_layer,
                          n_head=n_embd // cfg.HEAD_SIZE, n_embd=n_embd)).to(device)
    optimizer = adamw(model, 1e-3, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    x = torch.randint(vocab_size, (cfg.BATCH_SIZE, cfg.BLOCK_SIZE), device=device)  # (B, T)
    loss, start = None, 0.0
    for step in range(steps + 2):
        if step == 2:
            loss.item()  # waits for the device to finish the untimed steps
            start = time.perf_counter()
        with autocast(device):
            _, loss = model(x, x)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    loss.item()
    seconds = time.perf_counter() - start
    return 6 * model.num_parameters() * x.numel() * steps / seconds


def plan(cfg, surface: LossSurface | None, device, sweep_fit: Allocation | None = None) -> dict:
    """The step from minutes to a run: C from the minutes and this device's measured speed, (N, D) from the
    planner, a shape for N, and the command that trains it.

    One counting throughout, the closed form's: N every parameter, C = 6ND. The speed is measured on the
    planned shape (speed depends on size, so plan, measure, plan again), and since it is what a run
    achieves, no utilisation factor is assumed.

    `surface` is "ours", used when PLAN_CONSTANTS is "ours": an Approach 3 fit of the sweep's runs with N
    every parameter, as the closed form counts it; None when there is none. `sweep_fit`, the sweep's own
    Approach 2 under Kaplan's counting, is carried to the planned budget and printed beside the plan.

    Published constants were fitted to subword tokens at 1.4e18 FLOPs and more: at a laptop's budget, on
    characters, a plan made from them is an extrapolation by many decades, and says so.
    """
    from common.data.tokens import read_meta
    from phase1_foundation.project4_scaling.download_data import prepare
    from phase1_foundation.project4_scaling.model import non_embedding_parameters

    if cfg.PLAN_CONSTANTS == "ours" and (surface is None or surface.problem):
        why = surface.problem if surface is not None else "there is no sweep"
        raise CourseError(f"error: --PLAN_CONSTANTS=ours plans with the sweep's own Approach 3 fit, and it "
                          f"has none to give ({why}); pass --PLAN_CONSTANTS=epoch-2024")
    ours = cfg.PLAN_CONSTANTS == "ours"
    planner = ChinchillaPlanner(surface if ours else cfg.PLAN_CONSTANTS)
    constants = "ours (Approach 3, every parameter)" if ours else cfg.PLAN_CONSTANTS
    meta = read_meta(prepare(cfg))  # the sweep's vocabulary (the tables' size) and its training text
    vocab, text = meta["vocab_size"], meta["train_tokens"]
    shape, rate = (2, 64), None
    for _ in range(2):
        rate = flops_per_second(*shape, vocab, cfg, device)
        compute, n_opt, d_opt = plan_for_minutes(cfg.PLAN_MINUTES, rate, planner, utilisation=1.0)
        shape = model_shape(n_opt, vocab, cfg.BLOCK_SIZE, cfg.PLAN_ASPECT_RATIO, cfg.HEAD_SIZE)
    # train.py's kaplan counting reads a budget as C = 6ND with N without the tables: this budget buys the
    # shape D_opt tokens
    budget = float(f"{6 * non_embedding_parameters(*shape) * d_opt:.3g}")
    passes = d_opt / text
    fits = "within" if passes <= cfg.MAX_EPOCHS else "more than"
    # train.py leaves out a run that reads the text more than MAX_EPOCHS times: the command raises it
    rereads = "" if passes <= cfg.MAX_EPOCHS else f" --MAX_EPOCHS={math.ceil(passes)}"
    command = (f"uv run python phase1_foundation/project4_scaling/train.py --BUDGETS={budget:.3g} "
               f"--SHAPES={shape[0]}x{shape[1]} --COUNTINGS=kaplan --MIN_STEPS=1 --NOISE_SEEDS=1{rereads} "
               f"--OUT_DIR={Path(cfg.OUT_DIR) / 'plan'}")
    print(f"\nplan for {cfg.PLAN_MINUTES:g} minutes on {device}, with the {constants} constants: "
          f"{rate:.3g} FLOP/s measured (6N FLOPs per token, N every parameter), so C = {compute:.3g} FLOPs; "
          f"N_opt = {n_opt:,.0f}, D_opt = {d_opt:,.0f} tokens ({d_opt / n_opt:.0f} per parameter, "
          f"{passes:.2f} passes over the training text: {fits} MAX_EPOCHS={cfg.MAX_EPOCHS:g}); shape "
          f"{shape[0]}x{shape[1]}, {all_parameters(*shape, vocab, cfg.BLOCK_SIZE):,.0f} parameters\n"
          f"train it: {command}")
    if not ours:
        below = np.log10(SMALLEST_FITTED / compute)
        where = f"{below:.1f} decades above this budget, and" if below > 0 else "and"
        print(f"an extrapolation: the {cfg.PLAN_CONSTANTS} constants were fitted to subword tokens at "
              f"{SMALLEST_FITTED:.1e} FLOPs and more, {where} these tokens are characters")
    if sweep_fit is not None and np.isfinite(sweep_fit.a):
        own = sweep_fit.n_scale * budget**sweep_fit.a
        print(f"the sweep's own Approach 2 (kaplan counting, N_opt ∝ C^{sweep_fit.a:.2f}), carried to C = "
              f"{budget:.3g} (6ND, N without the tables): N_opt {own:,.0f} non-embedding parameters, where "
              f"the plan's shape has {non_embedding_parameters(*shape):,}")
    return {"flops_per_second": rate, "compute": compute, "n_opt": n_opt, "d_opt": d_opt, "shape": shape,
            "passes": passes, "command": command}
