"""Hoffmann et al. 2022 (Chinchilla): how should a compute budget C be split between parameters N and
tokens D? Three ways, as in the paper, each giving N_opt ∝ C^a and D_opt ∝ C^b:

    approach1       the run with the lowest loss at each budget
    approach2       the minimum of a parabola through each budget's losses (an IsoFLOP profile)
    fit_parametric  Approach 3: a loss surface L(N, D) = E + A/N^α + B/D^β fitted to every run

Each works on one counting of a sweep (results.Sweep): N and C as Kaplan counts them (non-embedding N,
C = 6ND) or as Chinchilla does (every parameter, App. F's FLOPs). The paper found a ≈ 0.5 by all three,
against Kaplan's 0.73; bootstrap.py says how sure a sweep this small can be of its own a.
"""

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.ndimage import minimum_filter
from scipy.optimize import minimize
from scipy.special import logsumexp

from phase1_foundation.project4_scaling.kaplan import KAPLAN_ALLOCATION
from phase1_foundation.project4_scaling.results import Sweep

PAPER_EXPONENTS = {  # (a, b) of N_opt ∝ C^a and D_opt ∝ C^b, to print and draw beside our own
    "Kaplan": KAPLAN_ALLOCATION,  # PAPER: Kaplan Eq. 6.1
    "Chinchilla Approach 1": (0.50, 0.50),  # PAPER: Chinchilla Table 2
    "Chinchilla Approach 2": (0.49, 0.51),  # PAPER: Chinchilla Table 2
    "Chinchilla Approach 3": (0.46, 0.54),  # PAPER: Chinchilla Table 2
}

# PAPER: Chinchilla App. D.2. Most residuals in ln L are larger than this, so the fit is nearly a median fit,
# not a least-squares one (laws.py --DATA=chinchilla prints how many)
HUBER_DELTA = 1e-3
# Approach 3's search: every (α, β) on this grid, each with the (E, A, B) that fits best there (a linear
# solve); L-BFGS then starts from the best point of each of the best few valleys. The paper's grid of
# starts (App. D.2) spans 0 to 2 for both.
EXPONENT_GRID = np.round(np.arange(0.02, 2.501, 0.02), 2)  # α and β: 125 values each, 15,625 pairs
REFINED_STARTS = 3  # L-BFGS starts: the best (α, β) of the grid's best valleys, each with its (E, A, B)


# ---- Approaches 1 and 2: one compute-optimal point per budget ----------------------------------------------


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

    The paper takes the lowest loss at each FLOP count over every run's whole training curve; each run here
    reports only its final loss, so the envelope is the best run per budget. Its N_opt can only be one of the
    sizes trained, and noise can pick a neighbour: the bootstrap interval shows how far it can wander.
    """
    at_budget = [np.flatnonzero(sweep.budget == budget) for budget in sweep.budgets()]
    best = [runs[np.argmin(sweep.loss[runs])] for runs in at_budget]
    return fit_allocation(sweep.flops[best], sweep.n[best], sweep.d[best])


def isoflop_parabola(x, loss) -> np.ndarray:
    """Coefficients (c2, c1, c0) of loss ≈ c2·u² + c1·u + c0 with u = ln x, through one budget's runs; x is
    their N or their D."""
    return np.polyfit(np.log(x), loss, 2)


# what a minimum outside the runs asks for, by the quantity on the x axis: at a fixed budget more tokens
# means a smaller model, so a D above every run's wants smaller models
_OUTSIDE = {"N": ("sizes trained", "larger", "smaller"), "D": ("token counts trained", "smaller", "larger")}


def isoflop_minimum(x, loss, quantity: str = "N") -> tuple[float, str | None]:
    """The x at the minimum of one budget's parabola, and None; or, when it cannot be trusted, why not.
    `quantity` ("N" or "D") says which x the runs are placed by, for the message."""
    x, loss = np.asarray(x, dtype=float), np.asarray(loss, dtype=float)
    if len(np.unique(x)) < 3:
        return np.nan, f"fewer than 3 values of {quantity}: no parabola"
    c2, c1, _ = isoflop_parabola(x, loss)
    if c2 <= 0:
        return np.nan, "the parabola opens downward: no minimum"
    x_min = float(np.exp(-c1 / (2 * c2)))
    if not x.min() <= x_min <= x.max():
        trained, above, below = _OUTSIDE[quantity]
        return x_min, (f"minimum at {quantity} = {x_min:.3g}, outside the {trained} ({x.min():.3g} to "
                       f"{x.max():.3g}): add {above if x_min > x.max() else below} models")
    return x_min, None


def compute_at(n, flops, n_opt: float) -> float:
    """The compute C of a budget's optimum, as the sweep counts it. Runs planned under the sweep's own
    counting all spent C (within half a step); counted the other way, a budget's runs spend more or less
    with their size, so C is read off the line through their log C against log N, at N_opt."""
    slope, intercept = np.polyfit(np.log(n), np.log(flops), 1)
    return float(np.exp(intercept + slope * np.log(n_opt)))


def approach2(sweep: Sweep) -> Allocation:
    """Chinchilla Approach 2: through each budget's final losses, a parabola in log N whose minimum is
    N_opt(C), and one in log D whose minimum is D_opt(C).

    D_opt is read off the runs as N_opt is, not computed from it. Under the kaplan counting every run of a
    budget has D = C / (6N), so log D = log(C/6) - log N is affine in log N, the two parabolas are the same
    curve mirrored, and D_opt = C / (6 N_opt) exactly. Under the chinchilla counting D = C / (App. F FLOPs
    per token of the shape), which is not C / (6N) nor proportional to 1/N (the embeddings and the attention
    cost per token do not scale with N), so C / (6 N_opt) would not be the tokens the optimal run reads.

    A budget whose parabola opens downward, or whose minimum lies outside the runs trained there (an
    extrapolation the sweep cannot check), is left out of the power laws and named in `flagged`.
    """
    used, flagged = [], {}
    for budget in sweep.budgets():
        at = sweep.budget == budget
        n_opt, problem = isoflop_minimum(sweep.n[at], sweep.loss[at], "N")
        d_opt = np.nan
        if problem is None:
            d_opt, problem = isoflop_minimum(sweep.d[at], sweep.loss[at], "D")
        if problem:
            flagged[float(budget)] = problem
        else:
            used.append((compute_at(sweep.n[at], sweep.flops[at], n_opt), n_opt, d_opt))
    compute, n_opt, d_opt = np.array(used, dtype=float).reshape(-1, 3).T
    return fit_allocation(compute, n_opt, d_opt, flagged)


# ---- Approach 3: a loss surface ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LossSurface:
    """L(N, D) = E + A/N^α + B/D^β (PAPER: Chinchilla §3.3, Eq. 2): E the entropy of text no model removes,
    A/N^α what a finite model costs, B/D^β what finite data costs. At fixed C = 6ND its minimum has
    N_opt ∝ C^a, D_opt ∝ C^b with a = β/(α+β) and b = α/(α+β) (Eq. 4).

    The paper converts its fit this way although it counts C by App. F, close to 6ND at its sizes. At ours
    the attention and the embeddings cost more than 6N per token, so under the chinchilla counting these a
    and b are the paper's conversion, not the slope of the surface's frontier in App. F FLOPs."""

    E: float
    A: float
    B: float
    alpha: float
    beta: float
    problem: str | None = None  # why the exponents cannot be read off this fit, when they cannot

    def loss(self, n, d):  # PAPER: Chinchilla Eq. 2
        return self.E + self.A / np.asarray(n) ** self.alpha + self.B / np.asarray(d) ** self.beta

    @property
    def a(self) -> float:  # PAPER: Chinchilla Eq. 4, a = β/(α+β)
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def exponents(self) -> dict[str, float]:
        return {"a": self.a, "b": self.b, "alpha": self.alpha, "beta": self.beta}


def _huber(residual: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    """Huber_δ: quadratic within δ of zero, linear beyond, so a few bad runs pull the fit less than in least
    squares."""
    small = np.abs(residual) <= delta
    return np.where(small, 0.5 * residual**2, delta * (np.abs(residual) - 0.5 * delta))


def _huber_and_gradient(params, log_n, log_d, log_loss, delta: float = HUBER_DELTA
                        ) -> tuple[float, np.ndarray]:
    """Σ Huber_δ(LSE(a - α log N, b - β log D, e) - log L) over the runs (Chinchilla App. D.2), and its
    gradient in (a, b, e, α, β). Fitting log L through a log-sum-exp keeps every term positive without
    constraints and the numbers of order one."""
    a, b, e, alpha, beta = params
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])  # (3, runs)
    predicted = logsumexp(terms, axis=0)  # (runs,) the predicted log L
    residual = predicted - log_loss  # (runs,)
    # d huber / d term = clip(residual, ±δ) · softmax(terms): each term's share of the predicted loss
    pull = np.clip(residual, -delta, delta) * np.exp(terms - predicted)  # (3, runs)
    gradient = [pull[0].sum(), pull[1].sum(), pull[2].sum(), -(pull[0] * log_n).sum(),
                -(pull[1] * log_d).sum()]
    return float(_huber(residual, delta).sum()), np.array(gradient)


def grid_starts(n, d, loss, count: int = REFINED_STARTS, delta: float = HUBER_DELTA) -> np.ndarray:
    """The best points of the `count` best valleys of a search over (α, β), as L-BFGS starts in
    (ln A, ln B, ln E, α, β), best first.

    For fixed α and β the surface E + A·N^-α + B·D^-β is linear in (E, A, B), so every pair of the grid gets
    the (E, A, B) that fits best by least squares in L, one small linear solve each (variable projection);
    each pair is then scored by the Huber loss of log L that the fit minimises. A pair whose best E, A or B
    is negative has no surface of this form, and is skipped.
    """
    loss = np.asarray(loss, dtype=float)
    x = np.asarray(n, dtype=float)[None, :] ** -EXPONENT_GRID[:, None]  # (exponents, runs) N^-α
    y = np.asarray(d, dtype=float)[None, :] ** -EXPONENT_GRID[:, None]  # (exponents, runs) D^-β
    x, y = x / x.max(axis=1, keepdims=True), y / y.max(axis=1, keepdims=True)  # scaled: well conditioned
    runs, k = loss.size, EXPONENT_GRID.size
    # the normal equations of [1, x, y] for every pair (α, β) at once: (k, k, 3, 3) and (k, k, 3)
    gram = np.empty((k, k, 3, 3))
    gram[..., 0, 0] = runs
    gram[..., 0, 1] = gram[..., 1, 0] = x.sum(axis=1)[:, None]
    gram[..., 0, 2] = gram[..., 2, 0] = y.sum(axis=1)[None, :]
    gram[..., 1, 1] = (x * x).sum(axis=1)[:, None]
    gram[..., 2, 2] = (y * y).sum(axis=1)[None, :]
    gram[..., 1, 2] = gram[..., 2, 1] = x @ y.T
    moments = np.stack(np.broadcast_arrays(loss.sum(), (x @ loss)[:, None], (y @ loss)[None, :]), axis=-1)
    with np.errstate(all="ignore"):
        e, a, b = np.moveaxis(np.linalg.solve(gram + 1e-12 * np.eye(3), moments[..., None])[..., 0], -1, 0)
        # score the whole grid by the objective itself, Huber of log L (k, k, runs)
        predicted = e[..., None] + a[..., None] * x[:, None, :] + b[..., None] * y[None, :, :]
        score = _huber(np.log(predicted) - np.log(loss), delta).sum(axis=-1)  # (k, k)
    score[~((e > 0) & (a > 0) & (b > 0)) | ~np.isfinite(score)] = np.inf
    # the best point of each valley of the grid, so that the starts are not neighbours in one valley
    valleys = np.isfinite(score) & (score == minimum_filter(score, size=3, mode="nearest"))
    i, j = np.nonzero(valleys)
    order = np.argsort(score[i, j])[:count]
    i, j = i[order], j[order]
    alpha, beta = EXPONENT_GRID[i], EXPONENT_GRID[j]
    # each column was divided by its largest entry, N_min^-α (D_min^-β): A = (its coefficient) · N_min^α
    log_a = np.log(a[i, j]) + alpha * np.log(np.min(n))
    log_b = np.log(b[i, j]) + beta * np.log(np.min(d))
    return np.column_stack([log_a, log_b, np.log(e[i, j]), alpha, beta])  # (count, 5)


def fit_parametric(n, d, loss, start: LossSurface | None = None, delta: float = HUBER_DELTA) -> LossSurface:
    """Chinchilla Approach 3: E + A/N^α + B/D^β fitted to every run as App. D.2 does it, minimising the
    Huber loss (δ = 1e-3) of log L with L-BFGS from the best point of each of the grid's best valleys over
    (α, β) (grid_starts), keeping the best fit; with `start`, from that surface only (the learn task's check).
    A larger `delta` than every residual makes it a least-squares fit.

    PAPER: App. D.2 starts L-BFGS from each of a grid of 4,500 points. A fit started from one point can stay
    in its valley, so each fit, the bootstrap's refits included, starts where the whole grid says; when the
    grid's best pair lies on its edge, the best fit may lie beyond it, and the result says so.

    The Huber loss is tiny (δ · |residual| per run), so the stopping tolerances are far below their defaults:
    Besiroglu et al. 2024 (arXiv 2404.10102) traced the paper's own fit to an optimizer stopped too early.

    The result's `problem` says when the fit cannot be read as exponents (see identification_problem).
    """
    log_n, log_d, log_loss = np.log(n), np.log(d), np.log(loss)
    if start is None:
        starts = grid_starts(n, d, loss, delta=delta)
        if len(starts) == 0:
            return LossSurface(np.nan, np.nan, np.nan, np.nan, np.nan, problem="no (alpha, beta) on the grid "
                               "gives a surface with positive E, A and B")
    else:
        starts = [(np.log(start.A), np.log(start.B), np.log(start.E), start.alpha, start.beta)]
    best = None
    for x0 in starts:
        fit = minimize(_huber_and_gradient, np.array(x0), args=(log_n, log_d, log_loss, delta), jac=True,
                       method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})
        if best is None or fit.fun < best.fun:
            best = fit
    a, b, e, alpha, beta = best.x
    with np.errstate(over="ignore"):  # a degenerate fit (a huge α with ln A to match) gives A = inf
        surface = LossSurface(E=float(np.exp(e)), A=float(np.exp(a)), B=float(np.exp(b)), alpha=float(alpha),
                              beta=float(beta))
    edge = None
    if start is None and not all(EXPONENT_GRID[0] < value < EXPONENT_GRID[-1] for value in starts[0][3:]):
        edge = (f"the grid's best (alpha, beta) = ({starts[0][3]:g}, {starts[0][4]:g}) lies on its edge: the "
                "best fit may lie beyond it; not identified")
    return replace(surface, problem=edge or identification_problem(surface, n, d, loss))


def identification_problem(surface: LossSurface, n, d, loss) -> str | None:
    """Why the fitted exponents say nothing, or None.

    An exponent outside the grid searched (a fit that ran off to α = 35, say, where A/N^α is a step between
    two sizes) describes the runs no better than any larger value would; a term that changes the loss by
    less than the Huber δ across the runs leaves its exponent free (the data cannot see it); and a floor E
    that fell to nearly 0 left the two power laws to carry all of the loss, which they can then trade
    against each other.
    """
    low, high = EXPONENT_GRID[0], EXPONENT_GRID[-1]
    for name, value in (("alpha", surface.alpha), ("beta", surface.beta)):
        if not np.isfinite(value) or not low <= value <= high:
            return f"{name} = {value:.3g}, outside the grid searched ({low:g} to {high:g}): not identified"
    mean_loss = float(np.mean(surface.loss(n, d)))
    for name, quantity, term in (("alpha", "N", surface.A / np.asarray(n, dtype=float) ** surface.alpha),
                                 ("beta", "D", surface.B / np.asarray(d, dtype=float) ** surface.beta)):
        if np.ptp(term) < HUBER_DELTA * mean_loss:
            return f"the {quantity} term moves the loss by under 0.1% across the runs: {name} not identified"
    if surface.E < 0.01 * np.min(loss):
        return f"E = {surface.E:.2g}, no floor under the loss: alpha and beta not identified"
    return None


def exponents_of(surface: LossSurface) -> dict[str, float]:
    """The surface's exponents, NaN when they cannot be read off it (its `problem`)."""
    numbers = surface.exponents()
    return {key: np.nan for key in numbers} if surface.problem else numbers


def approach2_refit(budgets: int):
    """Approach 2 as the bootstrap refits it: a refit that lost one of the `budgets` the fit used (its
    parabola's minimum left the sizes) gave no exponent, rather than one from fewer budgets."""
    def estimate(sweep: Sweep) -> dict[str, float]:
        fit = approach2(sweep)
        return fit.exponents() if len(fit.compute) == budgets else {"a": np.nan, "b": np.nan}

    return estimate


def surface_residuals(sweep: Sweep, surface: LossSurface | None = None) -> np.ndarray:
    """ln L minus a surface's prediction, run by run (the sweep's own Approach 3 fit unless one is given)."""
    surface = surface or fit_parametric(sweep.n, sweep.d, sweep.loss)
    return np.log(sweep.loss) - np.log(surface.loss(sweep.n, sweep.d))


def parabola_residuals(sweep: Sweep) -> np.ndarray:
    """ln L minus its budget's IsoFLOP parabola, run by run, scaled by √(k / (k - 3)) for the three
    coefficients fitted to a budget's k runs; NaN at a budget of 3 sizes or fewer, which a parabola fits
    exactly. How far the parabolas miss the runs: their misfit."""
    residual = np.full(sweep.loss.size, np.nan)
    for budget in sweep.budgets():
        at = sweep.budget == budget
        if len(np.unique(sweep.n[at])) > 3:
            fitted = np.polyval(isoflop_parabola(sweep.n[at], sweep.loss[at]), np.log(sweep.n[at]))
            residual[at] = (np.log(sweep.loss[at]) - np.log(fitted)) * np.sqrt(at.sum() / (at.sum() - 3))
    return residual
