"""Scaling laws fitted to a sweep of models you trained, and a planner that turns compute into a model size.

    uv run python phase1_foundation/project4_scaling/laws.py                   # after train.py's sweep
    uv run python phase1_foundation/project4_scaling/laws.py --OUT_DIR=<a sweep's folder>
    uv run python phase1_foundation/project4_scaling/laws.py --PLAN_MINUTES=10  # and plan a 10-minute run

train.py trains a sweep: at each of a few compute budgets C (FLOPs) several model sizes N, each on the
D = C / (6N) tokens the budget buys, and writes one line per finished run. Nothing here trains; it asks the
sweep the two papers' questions:

- Kaplan et al. 2020: how does the loss fall with N alone (Eq. 1.1), and with N and D together (Eq. 1.5)?
- Hoffmann et al. 2022 (Chinchilla): how should a budget be split between N and D? Three ways, as in the
  paper: the run with the lowest loss at each budget (Approach 1), the minimum of a parabola through each
  budget's losses (Approach 2), and a loss surface L(N, D) = E + A/N^α + B/D^β fitted to every run
  (Approach 3). Each gives N_opt ∝ C^a and D_opt ∝ C^b. The papers disagree, Kaplan a ≈ 0.73 against
  Chinchilla's a ≈ 0.5, and a bootstrap interval beside each exponent says how much a sweep this small can
  tell the two apart.

Then planning: ChinchillaPlanner splits a budget by Chinchilla's closed form, from the paper's constants, a
replication's, or your own fit; plan_for_minutes starts from the minutes you can spend.

N is the row's `params` throughout: the non-embedding count (Kaplan's N), the one that 6·N·D counts. At the
sizes a laptop trains, the embeddings are a large share of all parameters, so counting them (`params_total`)
would move every exponent; Kaplan found the laws cleaner without them.
"""

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares, minimize
from scipy.special import logsumexp

from common.config import load_config
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.plots import new_figure, save_figure

FIELDS = ("name", "budget", "params", "tokens", "flops", "val_loss")  # what the fits read from each run

KAPLAN_ALPHA_N = 0.076  # PAPER: Kaplan Eq. 1.5, Table 2
KAPLAN_ALPHA_D = 0.103  # PAPER: Kaplan Eq. 1.5, Table 2
KAPLAN_N_C = 6.4e13  # PAPER: Kaplan Eq. 1.5, Table 2 (non-embedding parameters)
KAPLAN_D_C = 1.8e13  # PAPER: Kaplan Eq. 1.5, Table 2 (tokens)

PAPER_EXPONENTS = {  # (a, b) of N_opt ∝ C^a and D_opt ∝ C^b, to print and draw beside our own
    "Kaplan": (0.73, 0.27),  # PAPER: Kaplan Eq. 6.1
    "Chinchilla Approach 1": (0.50, 0.50),  # PAPER: Chinchilla Table 2
    "Chinchilla Approach 2": (0.49, 0.51),  # PAPER: Chinchilla Table 2
    "Chinchilla Approach 3": (0.46, 0.54),  # PAPER: Chinchilla Table 2
}

HUBER_DELTA = 1e-3  # PAPER: Chinchilla App. D.2
# PAPER: Chinchilla App. D.2, the grid of L-BFGS starts (5 x 5 x 5 x 6 x 6 = 4,500 of them)
GRID_ALPHA = GRID_BETA = (0.0, 0.5, 1.0, 1.5, 2.0)
GRID_E = (-1.0, -0.5, 0.0, 0.5, 1.0)
GRID_A = GRID_B = (0.0, 5.0, 10.0, 15.0, 20.0, 25.0)


# ---- the sweep ---------------------------------------------------------------------------------------------


def read_results(path: str | Path) -> list[dict]:
    """The finished runs of a sweep, one dict per line of `path`; one clear line when there is nothing to
    fit."""
    path = Path(path)
    train = "uv run python phase1_foundation/project4_scaling/train.py"
    if not path.is_file():
        raise SystemExit(f"error: no results at {path}; run the sweep first ({train}) or pass --OUT_DIR=<its "
                         "folder>")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise SystemExit(f"error: line {number} of {path} is not JSON; delete that line and rerun its run"
                             ) from None
        missing = [name for name in FIELDS if name not in row]
        if missing:
            raise SystemExit(f"error: line {number} of {path} has no {', '.join(missing)}; "
                             f"it was not written by train.py ({train})")
        rows.append(row)
    if not rows:
        raise SystemExit(f"error: {path} holds no runs yet; run the sweep first ({train})")
    return rows


@dataclass(frozen=True)
class Sweep:
    """A sweep's runs as columns, one entry per run."""

    budget: np.ndarray  # the FLOP budget C the run was planned for
    n: np.ndarray  # non-embedding parameters N
    d: np.ndarray  # tokens trained on D
    flops: np.ndarray  # 6·N·D actually spent
    loss: np.ndarray  # final validation loss, nats per token

    @classmethod
    def from_rows(cls, rows: list[dict]) -> "Sweep":
        def column(key):
            return np.array([float(row[key]) for row in rows])

        return cls(column("budget"), column("params"), column("tokens"), column("flops"), column("val_loss"))

    def take(self, index: np.ndarray) -> "Sweep":
        return Sweep(self.budget[index], self.n[index], self.d[index], self.flops[index], self.loss[index])

    def budgets(self) -> np.ndarray:
        return np.unique(self.budget)


# ---- Kaplan et al. 2020 ------------------------------------------------------------------------------------


def fit_power_law_in_n(n, loss, irreducible: float = 0.0) -> tuple[float, float]:
    """(N_c, α_N) of L(N) = (N_c/N)^α_N (Kaplan Eq. 1.1), by least squares on log L against log N.

    Kaplan's form is a straight line on log-log axes, and over their range (models big enough, each trained
    on enough data) the losses lay on one. A small sweep bends away from it. Text has an entropy no model
    goes below, so the loss flattens towards that floor instead of falling towards zero as the pure power
    law says; and every run here is limited by its tokens as well as by N, which flattens the smallest and
    the largest models of a budget differently. Pass `irreducible` (e.g. the E of an Approach 3 fit) to fit
    L - E = (N_c/N)^α_N instead; with irreducible=0 this is the law as Kaplan wrote it.
    """
    slope, intercept = np.polyfit(np.log(n), np.log(np.asarray(loss, dtype=float) - irreducible), 1)
    alpha_n = -slope
    return float(np.exp(intercept / alpha_n)), float(alpha_n)


def kaplan_loss(n, d, alpha_n: float = KAPLAN_ALPHA_N, alpha_d: float = KAPLAN_ALPHA_D,
                n_c: float = KAPLAN_N_C, d_c: float = KAPLAN_D_C):
    """L(N, D) = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D (Kaplan Eq. 1.5), with the paper's constants by default."""
    return ((n_c / np.asarray(n)) ** (alpha_n / alpha_d) + d_c / np.asarray(d)) ** alpha_d


def fit_kaplan_loss(n, d, loss) -> dict[str, float]:
    """Kaplan's L(N, D) fitted to the runs by least squares on log L, started from the paper's constants.

    Written in logs, log L = α_D · log(exp((α_N/α_D)(log N_c - log N)) + exp(log D_c - log D)), so the
    optimizer moves log N_c and log D_c, numbers of order 30 rather than 1e13. Returns the keywords of
    kaplan_loss.
    """
    log_n, log_d, log_loss = np.log(n), np.log(d), np.log(loss)

    def residuals(p):
        alpha_n, alpha_d, log_n_c, log_d_c = p
        return alpha_d * np.logaddexp(alpha_n / alpha_d * (log_n_c - log_n), log_d_c - log_d) - log_loss

    start = [KAPLAN_ALPHA_N, KAPLAN_ALPHA_D, np.log(KAPLAN_N_C), np.log(KAPLAN_D_C)]
    lower = [1e-4, 1e-4, -np.inf, -np.inf]  # positive exponents: the loss falls with N and with D
    alpha_n, alpha_d, log_n_c, log_d_c = least_squares(residuals, start, bounds=(lower, np.inf)).x
    return {"alpha_n": float(alpha_n), "alpha_d": float(alpha_d), "n_c": float(np.exp(log_n_c)),
            "d_c": float(np.exp(log_d_c))}


# ---- Chinchilla Approaches 1 and 2: one compute-optimal point per budget -----------------------------------


@dataclass
class Allocation:
    """N_opt = n_scale · C^a and D_opt = d_scale · C^b, fitted by least squares in log space to one point per
    budget. `flagged` names the budgets left out and why (Approach 2)."""

    a: float
    b: float
    n_scale: float
    d_scale: float
    compute: np.ndarray  # the points fitted: C, N_opt(C), D_opt(C)
    n_opt: np.ndarray
    d_opt: np.ndarray
    flagged: dict[float, str] = field(default_factory=dict)

    def exponents(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b}


def fit_allocation(compute, n_opt, d_opt, flagged: dict[float, str] | None = None) -> Allocation:
    """Power laws N_opt ∝ C^a and D_opt ∝ C^b through the points; NaN exponents below two budgets."""
    compute, n_opt, d_opt = (np.asarray(x, dtype=float) for x in (compute, n_opt, d_opt))
    if len(np.unique(compute)) < 2:
        return Allocation(np.nan, np.nan, np.nan, np.nan, compute, n_opt, d_opt, flagged or {})
    a, log_n_scale = np.polyfit(np.log(compute), np.log(n_opt), 1)
    b, log_d_scale = np.polyfit(np.log(compute), np.log(d_opt), 1)
    return Allocation(float(a), float(b), float(np.exp(log_n_scale)), float(np.exp(log_d_scale)),
                      compute, n_opt, d_opt, flagged or {})


def approach1(sweep: Sweep) -> Allocation:
    """Chinchilla Approach 1: at each budget, the run with the lowest loss gives N_opt and D_opt.

    The paper takes the lowest loss reached at each FLOP count over every run's whole training curve. Each
    run here reports only its final loss, so the envelope is the best run per budget, at the FLOPs it
    spent. Its N_opt can only be one of the sizes trained: a sweep whose sizes are a factor 2 apart places
    each optimum to within a factor √2 at best, and noise can pick a neighbour. On synthetic sweeps of five
    budgets with 1% noise in the losses, that misses the true a by more than 0.03 in most sweeps, where
    Approach 2, which uses every run, rarely does; the bootstrap interval shows how far it can wander.
    """
    at_budget = [np.flatnonzero(sweep.budget == budget) for budget in sweep.budgets()]
    best = [runs[np.argmin(sweep.loss[runs])] for runs in at_budget]
    return fit_allocation(sweep.flops[best], sweep.n[best], sweep.d[best])


def isoflop_parabola(n, loss) -> np.ndarray:
    """Coefficients (c2, c1, c0) of loss ≈ c2·x² + c1·x + c0 with x = ln N, through one budget's runs."""
    return np.polyfit(np.log(n), loss, 2)


def isoflop_minimum(n, loss) -> tuple[float, str | None]:
    """The N at the minimum of one budget's parabola, and None; or, when it cannot be trusted, why not."""
    n, loss = np.asarray(n, dtype=float), np.asarray(loss, dtype=float)
    if len(np.unique(n)) < 3:
        return np.nan, "fewer than 3 sizes: no parabola"
    c2, c1, _ = isoflop_parabola(n, loss)
    if c2 <= 0:
        return np.nan, "the parabola opens downward: no minimum"
    n_min = float(np.exp(-c1 / (2 * c2)))
    if not n.min() <= n_min <= n.max():
        side = "larger" if n_min > n.max() else "smaller"
        return n_min, (f"minimum at N = {n_min:.3g}, outside the sizes trained ({n.min():.3g} to "
                       f"{n.max():.3g}): add {side} models")
    return n_min, None


def approach2(sweep: Sweep) -> Allocation:
    """Chinchilla Approach 2: a parabola in log N through each budget's final losses; its minimum is N_opt(C)
    and D_opt = C / (6 N_opt).

    A budget whose parabola opens downward, or whose minimum lies outside the sizes trained there (an
    extrapolation the sweep cannot check), is left out of the power laws and named in `flagged`.
    """
    used, flagged = [], {}
    for budget in sweep.budgets():
        at = sweep.budget == budget
        n_opt, problem = isoflop_minimum(sweep.n[at], sweep.loss[at])
        if problem:
            flagged[float(budget)] = problem
        else:
            used.append((budget, n_opt))
    compute, n_opt = np.array(used, dtype=float).reshape(-1, 2).T
    return fit_allocation(compute, n_opt, compute / (6 * n_opt), flagged)


# ---- Chinchilla Approach 3: a loss surface -----------------------------------------------------------------


@dataclass(frozen=True)
class LossSurface:
    """L(N, D) = E + A/N^α + B/D^β (Chinchilla §3.3): E the entropy of text no model removes, A/N^α what a
    finite model costs, B/D^β what finite data costs. Minimising it at fixed C = 6ND gives N_opt ∝ C^a,
    D_opt ∝ C^b with a = β/(α+β) and b = α/(α+β) (Eq. 4)."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    def loss(self, n, d):
        return self.E + self.A / np.asarray(n) ** self.alpha + self.B / np.asarray(d) ** self.beta

    @property
    def a(self) -> float:
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def exponents(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b, "alpha": self.alpha, "beta": self.beta}


def _huber(residual: np.ndarray) -> np.ndarray:
    """Huber_δ: quadratic within δ of zero, linear beyond, so a few bad runs pull the fit less than in least
    squares."""
    small = np.abs(residual) <= HUBER_DELTA
    return np.where(small, 0.5 * residual**2, HUBER_DELTA * (np.abs(residual) - 0.5 * HUBER_DELTA))


def _huber_and_gradient(params, log_n, log_d, log_loss) -> tuple[float, np.ndarray]:
    """Σ Huber_δ(LSE(a - α log N, b - β log D, e) - log L) over the runs (Chinchilla App. D.2), and its
    gradient in (a, b, e, α, β). Fitting log L through a log-sum-exp keeps every term positive without
    constraints and the numbers of order one."""
    a, b, e, alpha, beta = params
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    predicted = logsumexp(terms, axis=0)
    residual = predicted - log_loss
    # d huber / d term = clip(residual, ±δ) · softmax(terms): each term's share of the predicted loss
    pull = np.clip(residual, -HUBER_DELTA, HUBER_DELTA) * np.exp(terms - predicted)
    gradient = [pull[0].sum(), pull[1].sum(), pull[2].sum(), -(pull[0] * log_n).sum(),
                -(pull[1] * log_d).sum()]
    return float(_huber(residual).sum()), np.array(gradient)


def grid_starts(log_n, log_d, log_loss) -> np.ndarray:
    """One L-BFGS start per (α, β) of the paper's grid: the grid's (a, b, e) that fits best at that pair.

    The whole grid is scored in one array operation, (4,500 starts) x (runs), in (a, b, e, α, β) order.
    """
    grid = np.array(list(itertools.product(GRID_A, GRID_B, GRID_E, GRID_ALPHA, GRID_BETA)))
    a, b, e, alpha, beta = (column[:, None] for column in grid.T)
    predicted = np.logaddexp(np.logaddexp(a - alpha * log_n, b - beta * log_d), e)
    score = _huber(predicted - log_loss).sum(axis=1)
    starts = []
    for pair in itertools.product(GRID_ALPHA, GRID_BETA):
        at = np.flatnonzero((grid[:, 3:] == pair).all(axis=1))
        starts.append(grid[at[np.argmin(score[at])]])
    return np.array(starts)


def fit_parametric(n, d, loss, start: LossSurface | None = None) -> LossSurface:
    """Chinchilla Approach 3: E + A/N^α + B/D^β fitted to every run as App. D.2 does it, minimising the
    Huber loss (δ = 1e-3) of log L with L-BFGS from the paper's grid of starts, and keeping the best.

    The paper starts L-BFGS from every one of the grid's 4,500 points; that takes minutes here. We score
    the whole grid at once and start once from each of its 25 (α, β) pairs, with the (a, b, e) of the grid
    that fits best there (grid_starts): a second or two. On a synthetic sweep, all 4,500 starts found the
    same optimum as these 25, to twelve digits of the Huber loss. With `start`, from that surface only:
    the bootstrap refits each resample from the full data's fit, to stay fast.

    The Huber loss is tiny (δ · |residual| per run, about 1e-5), so the stopping tolerances are set far below
    their defaults: Besiroglu et al. 2024 (arXiv 2404.10102) traced the paper's own fit to an optimizer that
    stopped before converging for this reason.
    """
    log_n, log_d, log_loss = np.log(n), np.log(d), np.log(loss)
    if start is None:
        starts = grid_starts(log_n, log_d, log_loss)
    else:
        # exp() of a very negative log can round a fitted constant to 0; start just above it instead
        tiny = np.finfo(float).tiny
        starts = [(np.log(max(start.A, tiny)), np.log(max(start.B, tiny)), np.log(max(start.E, tiny)),
                   start.alpha, start.beta)]
    best = None
    for x0 in starts:
        fit = minimize(_huber_and_gradient, np.array(x0), args=(log_n, log_d, log_loss), jac=True,
                       method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})
        if best is None or fit.fun < best.fun:
            best = fit
    a, b, e, alpha, beta = best.x
    return LossSurface(E=float(np.exp(e)), A=float(np.exp(a)), B=float(np.exp(b)), alpha=float(alpha),
                       beta=float(beta))


# ---- how sure: the bootstrap -------------------------------------------------------------------------------


def bootstrap(sweep: Sweep, estimate: Callable[[Sweep], dict[str, float]], resamples: int = 100,
              seed: int = 0, percentiles: tuple[float, float] = (10, 90)) -> dict[str, tuple[float, float]]:
    """Percentile intervals of `estimate`'s numbers over resampled sweeps.

    Each resample draws every budget's runs from that budget with replacement, as many as it had, so every
    IsoFLOP curve stays in. A resample whose estimate is not finite (e.g. Approach 2 with fewer than two
    trusted budgets) is dropped; {} if none is left.
    """
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(sweep.budget == budget) for budget in sweep.budgets()]
    draws = []
    for _ in range(resamples):
        index = np.concatenate([rng.choice(group, size=len(group)) for group in groups])
        numbers = estimate(sweep.take(index))
        if all(np.isfinite(value) for value in numbers.values()):
            draws.append(numbers)
    if not draws:
        return {}
    return {key: tuple(float(p) for p in np.percentile([draw[key] for draw in draws], percentiles))
            for key in draws[0]}


# ---- planning ----------------------------------------------------------------------------------------------

PUBLISHED_SURFACES = {
    # PAPER: Chinchilla App. D.2, Eq. 10: the fit as printed, rounded.
    "paper-rounded": LossSurface(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28),
    # PAPER: the same fit as it stands in the paper's LaTeX source, unrounded, as Besiroglu et al. 2024
    # (arXiv 2404.10102) report it. At the 2.21e19 FLOPs of the paper's 400M-parameter row (Table A3: 400M
    # parameters, 9.2B tokens) these give 389M and 9.5B; the rounded ones give 326M and 11.3B.
    "paper-unrounded": LossSurface(E=1.6934, A=406.4, B=410.7, alpha=0.3392, beta=0.2849),
    # PAPER: Besiroglu et al. 2024 (arXiv 2404.10102): their refit of the Approach 3 data, read off the
    # paper's plots.
    "epoch-2024": LossSurface(E=1.82, A=482.0, B=2085.4, alpha=0.348, beta=0.366),
}


class ChinchillaPlanner:
    """Compute-optimal model size and tokens for a budget C, by Chinchilla's closed form (Eq. 4):
    N_opt = G (C/6)^a, D_opt = (C/6)^b / G, G = (αA / (βB))^(1/(α+β)).

    The constants are the paper's as printed by default; "paper-unrounded", "epoch-2024" or a LossSurface of
    your own (fit_parametric's result) choose others. They matter more than their size suggests. At the
    budget of the paper's 400M-parameter row, 2.21e19 FLOPs (Table A3: 400M parameters, 9.2B tokens), the
    printed constants give 326M parameters and 11.3B tokens, the unrounded ones 389M and 9.5B: rounding
    α = 0.3392 to 0.34 and β = 0.2849 to 0.28 alone takes 16% off the parameters and adds 19% to the
    tokens. At GPT-3's budget, 3.14e23 FLOPs, the printed constants give 24.5B parameters and 2.14T tokens
    (not the 15B and 3.5T sometimes quoted), the unrounded ones 30.6B and 1.71T, and the 2024 refit 53.0B
    and 0.99T (19 tokens per parameter, near the 20 that the paper's Approach 1 table implies). The
    exponents are raised to powers over many decades of compute, so their third digit matters.
    """

    def __init__(self, constants: str | LossSurface = "paper-rounded"):
        if isinstance(constants, str):
            if constants not in PUBLISHED_SURFACES:
                choices = ", ".join(PUBLISHED_SURFACES)
                raise ValueError(f"unknown constants {constants!r}; choose {choices} or a LossSurface")
            constants = PUBLISHED_SURFACES[constants]
        self.surface = constants

    def get_optimal_params_and_tokens(self, compute):
        """(N_opt, D_opt) for a budget of `compute` FLOPs (a number or an array of them)."""
        s = self.surface
        g = (s.alpha * s.A / (s.beta * s.B)) ** (1 / (s.alpha + s.beta))
        return g * (compute / 6) ** s.a, (compute / 6) ** s.b / g

    def loss(self, n, d):
        """The loss the surface predicts for N parameters trained on D tokens."""
        return self.surface.loss(n, d)


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


def model_shape(n_params: float, aspect_ratio: float = 64, head_size: int = 64) -> tuple[int, int]:
    """(n_layer, d_model) whose non-embedding count 12·n_layer·d_model² (Kaplan Eq. 2.1) is closest to
    `n_params` (by ratio), with d_model ≈ aspect_ratio · n_layer rounded to whole heads of `head_size`.
    The default ratio, 64, is GPT-2 small's (768 / 12); Kaplan found the loss depends on the shape far less
    than on N."""
    def shape(n_layer: int) -> tuple[int, int]:
        return n_layer, max(head_size, round(aspect_ratio * n_layer / head_size) * head_size)

    # 12·L·(aspect·L)² = N solved for L, then the whole depths around it: the rounding of d_model to whole
    # heads moves the count, so the nearest depth is not always the best
    guess = round((n_params / (12 * aspect_ratio**2)) ** (1 / 3))
    candidates = [shape(n_layer) for n_layer in range(max(1, guess - 2), guess + 3)]
    return min(candidates, key=lambda s: abs(np.log(12 * s[0] * s[1] ** 2 / n_params)))


# ---- plots -------------------------------------------------------------------------------------------------


def plot_isoflops(sweep: Sweep, path: Path) -> Path:
    """Loss against N at each budget, with each budget's parabola and, where it is trusted, its minimum
    (Approach 2)."""
    fig = new_figure()
    ax = fig.add_subplot()
    for i, budget in enumerate(sweep.budgets()):
        n, loss, colour = sweep.n[sweep.budget == budget], sweep.loss[sweep.budget == budget], f"C{i % 10}"
        ax.scatter(n, loss, color=colour, label=f"C = {budget:.2g}")
        if len(np.unique(n)) < 3:
            continue
        parabola = isoflop_parabola(n, loss)
        x = np.linspace(np.log(n.min()), np.log(n.max()), 100)
        ax.plot(np.exp(x), np.polyval(parabola, x), color=colour)
        n_min, problem = isoflop_minimum(n, loss)
        if problem is None:
            ax.plot(n_min, np.polyval(parabola, np.log(n_min)), "k*", markersize=12)
    ax.set(xscale="log", xlabel="non-embedding parameters N", ylabel="final validation loss (nats/token)",
           title="IsoFLOP curves; stars: each parabola's minimum")
    ax.legend(fontsize="small")
    return save_figure(fig, path)


def plot_allocation(allocations: dict[str, Allocation], surface: LossSurface, path: Path) -> Path:
    """N_opt and D_opt against C: each approach's points and fitted line, and the papers' slopes.

    The papers' lines show slopes only (their N_opt at our budgets is not ours: other data, another
    tokenizer), so each is drawn through the centre of our Approach 1 points.
    """
    fig = new_figure(11, 4.6)
    reference = allocations["Approach 1"]
    compute = np.geomspace(reference.compute.min() / 2, reference.compute.max() * 2, 50)
    ours = {name: (fit.n_scale * compute**fit.a, fit.d_scale * compute**fit.b, fit.a, fit.b)
            for name, fit in allocations.items()}
    n_opt, d_opt = ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute)
    ours["Approach 3"] = (n_opt, d_opt, surface.a, surface.b)
    for index, label in enumerate(("N_opt (non-embedding parameters)", "D_opt (tokens)")):
        ax = fig.add_subplot(1, 2, index + 1)
        for i, (name, line) in enumerate(ours.items()):
            if name in allocations:
                points = (allocations[name].n_opt, allocations[name].d_opt)[index]
                ax.scatter(allocations[name].compute, points, color=f"C{i}")
            ax.plot(compute, line[index], color=f"C{i}", label=f"{name}: C^{line[2 + index]:.2f}")
        centre = np.exp(np.log((reference.n_opt, reference.d_opt)[index]).mean())
        centre_c = np.exp(np.log(reference.compute).mean())
        for paper, exponents in PAPER_EXPONENTS.items():
            slope = exponents[index]
            ax.plot(compute, centre * (compute / centre_c) ** slope, ":", linewidth=1,
                    color="black" if paper == "Kaplan" else "grey", label=f"{paper}: C^{slope:.2f}")
        ax.set(xscale="log", yscale="log", xlabel="compute C (FLOPs)", ylabel=label)
        ax.legend(fontsize="x-small")
    fig.suptitle("Compute-optimal allocation: ours (colours) and the papers' slopes (dotted)")
    return save_figure(fig, path)


def plot_parametric(sweep: Sweep, surface: LossSurface, path: Path) -> Path:
    """Contours of the fitted L(N, D), each budget's IsoFLOP line N·D = C/6, the runs, and the efficient
    frontier: the point of each IsoFLOP line on the lowest contour it reaches."""
    fig = new_figure()
    ax = fig.add_subplot()
    n = np.geomspace(sweep.n.min() / 3, sweep.n.max() * 3, 200)
    d = np.geomspace(sweep.d.min() / 3, sweep.d.max() * 3, 200)
    grid_n, grid_d = np.meshgrid(n, d)
    contours = ax.contour(grid_n, grid_d, surface.loss(grid_n, grid_d), levels=15, cmap="viridis")
    ax.clabel(contours, fontsize="x-small")
    for i, budget in enumerate(sweep.budgets()):
        ax.plot(n, budget / (6 * n), "--", color=f"C{i % 10}", linewidth=1, label=f"C = {budget:.2g}")
    compute = np.geomspace(6 * n[0] * d[0], 6 * n[-1] * d[-1], 50)
    ax.plot(*ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute), "r", linewidth=2,
            label="efficient frontier")
    ax.scatter(sweep.n, sweep.d, color="black", s=10, label="runs")
    ax.set(xscale="log", yscale="log", xlim=(n[0], n[-1]), ylim=(d[0], d[-1]), xlabel="N (parameters)",
           ylabel="D (tokens)", title=f"fitted L(N, D): a = {surface.a:.2f}, b = {surface.b:.2f}")
    ax.legend(fontsize="x-small")
    return save_figure(fig, path)


def plot_loss_vs_compute(sweep: Sweep, surface: LossSurface, path: Path) -> Path:
    """Every run's final loss against the FLOPs it spent, coloured by N, and the loss the fitted surface
    predicts on its efficient frontier."""
    fig = new_figure()
    ax = fig.add_subplot()
    points = ax.scatter(sweep.flops, sweep.loss, c=np.log10(sweep.n), cmap="viridis")
    fig.colorbar(points, ax=ax, label="log10 N")
    compute = np.geomspace(sweep.flops.min(), sweep.flops.max(), 50)
    frontier = surface.loss(*ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute))
    ax.plot(compute, frontier, "r", label="Approach 3 frontier")
    ax.set(xscale="log", xlabel="compute spent 6ND (FLOPs)", ylabel="final validation loss (nats/token)",
           title="loss against compute, every run")
    ax.legend()
    return save_figure(fig, path)


# ---- the report --------------------------------------------------------------------------------------------


def fit_sweep(sweep: Sweep, resamples: int) -> tuple[dict, dict[str, Allocation], LossSurface]:
    """Every fit of the sweep: the numbers (each approach's exponents with a bootstrap interval, the fitted
    surface, Kaplan's laws), Approaches 1 and 2's points, and the surface."""
    surface = fit_parametric(sweep.n, sweep.d, sweep.loss)
    allocations = {"Approach 1": approach1(sweep), "Approach 2": approach2(sweep)}
    numbers = {name: fit.exponents() for name, fit in allocations.items()}
    numbers["Approach 2"]["flagged"] = allocations["Approach 2"].flagged
    numbers["Approach 3"] = surface.exponents() | {"E": surface.E, "A": surface.A, "B": surface.B}
    estimates = {
        "Approach 1": lambda s: approach1(s).exponents(),
        "Approach 2": lambda s: approach2(s).exponents(),
        "Approach 3": lambda s: fit_parametric(s.n, s.d, s.loss, start=surface).exponents(),
    }
    for name, estimate in estimates.items():
        numbers[name]["interval"] = bootstrap(sweep, estimate, resamples)
    sizes = np.unique(sweep.n)  # Kaplan's L(N) wants each size trained as long as it can: its best run
    best = [sweep.loss[sweep.n == size].min() for size in sizes]
    numbers["Kaplan L(N)"] = dict(zip(("n_c", "alpha_n"), fit_power_law_in_n(sizes, best), strict=True))
    numbers["Kaplan L(N, D)"] = fit_kaplan_loss(sweep.n, sweep.d, sweep.loss)
    return numbers, allocations, surface


def report(numbers: dict, runs: int, resamples: int) -> None:
    """The exponents beside the papers', the fitted surface beside Chinchilla's, α_N beside Kaplan's."""
    def interval(fit: dict, key: str) -> str:
        low, high = fit["interval"].get(key, (np.nan, np.nan))
        return f"[{low:.2f}, {high:.2f}]"

    print(f"\n{runs} runs; N_opt ∝ C^a, D_opt ∝ C^b; intervals: 10th to 90th percentile of {resamples} "
          f"bootstrap resamples")
    print(f"{'':<12}{'a':>6}{'':>15}{'b':>6}{'':>15}   paper a / b")
    for name in ("Approach 1", "Approach 2", "Approach 3"):
        fit, (paper_a, paper_b) = numbers[name], PAPER_EXPONENTS[f"Chinchilla {name}"]
        if not np.isfinite(fit["a"]):
            print(f"{name:<12}no fit: under two budgets have a minimum inside their sizes (below)"
                  f"   {paper_a:.2f} / {paper_b:.2f} (Chinchilla)")
            continue
        print(f"{name:<12}{fit['a']:>6.2f} {interval(fit, 'a'):>14}{fit['b']:>6.2f} {interval(fit, 'b'):>14}"
              f"   {paper_a:.2f} / {paper_b:.2f} (Chinchilla)")
    kaplan_a, kaplan_b = PAPER_EXPONENTS["Kaplan"]
    print(f"{'':<54}   {kaplan_a:.2f} / {kaplan_b:.2f} (Kaplan)")
    for budget, problem in numbers["Approach 2"]["flagged"].items():
        print(f"Approach 2 left out C = {budget:.3g}: {problem}")
    ours, paper = numbers["Approach 3"], PUBLISHED_SURFACES["paper-rounded"]
    print(f"\nApproach 3, L = E + A/N^alpha + B/D^beta{'E':>8}{'A':>10}{'B':>10}{'alpha':>8}{'beta':>8}")
    print(f"{'ours':<39}{ours['E']:>8.3f}{ours['A']:>10.4g}{ours['B']:>10.4g}{ours['alpha']:>8.3f}"
          f"{ours['beta']:>8.3f}   alpha {interval(ours, 'alpha')}, beta {interval(ours, 'beta')}")
    print(f"{'Chinchilla':<39}{paper.E:>8.3f}{paper.A:>10.4g}{paper.B:>10.4g}{paper.alpha:>8.3f}"
          f"{paper.beta:>8.3f}")
    print(f"\nKaplan alpha_N: {numbers['Kaplan L(N)']['alpha_n']:.3f} from L(N) over each size's best run, "
          f"{numbers['Kaplan L(N, D)']['alpha_n']:.3f} from L(N, D) over every run (paper {KAPLAN_ALPHA_N})")


def flops_per_second(n_layer: int, n_embd: int, cfg, device) -> float:
    """The 6N FLOPs per second this code reaches training a model of this shape on this device, from a few
    timed steps on random tokens (after two untimed ones, which pay for warming up)."""
    import time  # torch and the model only when planning: the fits need neither

    import torch

    from common.device import autocast
    from common.optim import adamw
    from phase1_foundation.project4_scaling.model import GPT, GPTConfig

    device, steps = torch.device(device), 5
    model = GPT(GPTConfig(vocab_size=256, block_size=cfg.BLOCK_SIZE, n_layer=n_layer,
                          n_head=n_embd // cfg.HEAD_SIZE, n_embd=n_embd)).to(device)
    optimizer = adamw(model, 1e-3, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    x = torch.randint(256, (cfg.BATCH_SIZE, cfg.BLOCK_SIZE), device=device)  # (B, T)
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
    return 6 * model.num_parameters(non_embedding=True) * x.numel() * steps / seconds


def plan(cfg, surface: LossSurface, device) -> dict:
    """The step from minutes to a run: C from the minutes and this device's measured speed, (N, D) from the
    planner, a shape for N, and the command that trains it.

    The speed is measured, not looked up: a few training steps of the planned shape, timed, give the 6N FLOPs
    per second this code reaches on this device (a model's speed depends on its size, so plan, measure the
    shape, and plan again). Since the rate is what a run achieves, no utilisation factor is assumed.
    """
    planner = ChinchillaPlanner(surface if cfg.PLAN_CONSTANTS == "ours" else cfg.PLAN_CONSTANTS)
    shape, rate = (2, 64), None
    for _ in range(2):
        rate = flops_per_second(*shape, cfg, device)
        compute, n_opt, d_opt = plan_for_minutes(cfg.PLAN_MINUTES, rate, planner, utilisation=1.0)
        shape = model_shape(n_opt, aspect_ratio=cfg.PLAN_ASPECT_RATIO, head_size=cfg.HEAD_SIZE)
    budget = float(f"{compute:.2g}")
    command = (f"uv run python phase1_foundation/project4_scaling/train.py --BUDGETS={budget:.2g} "
               f"--SHAPES={shape[0]}x{shape[1]} --MIN_STEPS=1 --OUT_DIR={Path(cfg.OUT_DIR) / 'plan'}")
    print(f"\nplan for {cfg.PLAN_MINUTES:g} minutes on {device}, with the {cfg.PLAN_CONSTANTS} constants: "
          f"{rate:.3g} FLOP/s measured (6N counting), so C = {compute:.3g} FLOPs; N_opt = {n_opt:,.0f}, "
          f"D_opt = {d_opt:,.0f} tokens ({d_opt / n_opt:.0f} per parameter); shape {shape[0]}x{shape[1]}\n"
          f"train it: {command}")
    return {"flops_per_second": rate, "compute": compute, "n_opt": n_opt, "d_opt": d_opt, "shape": shape,
            "command": command}


def main(argv: list[str] | None = None) -> dict:
    """Fit the sweep in OUT_DIR/results.jsonl, print the report, write the plots beside it, and with
    PLAN_MINUTES plan a run; returns the numbers."""
    cfg = load_config(config, argv)
    out_dir = Path(cfg.OUT_DIR)
    results = out_dir / "results.jsonl"
    rows = read_results(results)
    diverged = [row["name"] for row in rows if not np.isfinite(float(row["val_loss"]))]
    if diverged:
        print(f"left out {len(diverged)} runs whose loss is not a number: {', '.join(diverged)}")
        rows = [row for row in rows if row["name"] not in diverged]
    sweep = Sweep.from_rows(rows)
    if len(sweep.budgets()) < 2:
        raise SystemExit(f"error: every run in {results} has the same budget; an exponent needs runs at two "
                         "budgets at least")
    numbers, allocations, surface = fit_sweep(sweep, cfg.RESAMPLES)
    report(numbers, len(rows), cfg.RESAMPLES)
    numbers["plots"] = [
        plot_isoflops(sweep, out_dir / "isoflops.png"),
        plot_allocation(allocations, surface, out_dir / "allocation.png"),
        plot_parametric(sweep, surface, out_dir / "parametric.png"),
        plot_loss_vs_compute(sweep, surface, out_dir / "loss_vs_compute.png"),
    ]
    print("\nplots: " + ", ".join(str(path) for path in numbers["plots"]))
    if cfg.PLAN_MINUTES > 0:
        numbers["plan"] = plan(cfg, surface, cfg.DEVICE)
    return numbers


if __name__ == "__main__":
    main()
