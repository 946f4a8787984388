"""Kaplan et al. 2020's scaling laws: the loss as a power law in the model size N alone (Eq. 1.1), and in N
and the tokens D together (Eq. 1.5), with the paper's constants and a fit of each to a sweep.

Kaplan's N is the non-embedding count (§2.1) and C = 6ND, so laws.py fits these to the sweep's kaplan
counting only. Their answer to how a budget should be split, N_opt ∝ C^0.73 (Eq. 6.1), is printed beside
Chinchilla's three approaches (chinchilla.PAPER_EXPONENTS), which measure the same thing another way.
"""

import numpy as np
from scipy.optimize import least_squares

from phase1_foundation.project4_scaling.results import Sweep

KAPLAN_ALPHA_N = 0.076  # PAPER: Kaplan Eq. 1.5, Table 2
KAPLAN_ALPHA_D = 0.103  # PAPER: Kaplan Eq. 1.5, Table 2
KAPLAN_N_C = 6.4e13  # PAPER: Kaplan Eq. 1.5, Table 2 (non-embedding parameters)
KAPLAN_D_C = 1.8e13  # PAPER: Kaplan Eq. 1.5, Table 2 (tokens)
KAPLAN_ALLOCATION = (0.73, 0.27)  # PAPER: Kaplan Eq. 6.1: (a, b) of N_opt ∝ C^a and D_opt ∝ C^b


def fit_power_law_in_n(n, loss) -> tuple[float, float]:
    """(N_c, α_N) of L(N) = (N_c/N)^α_N (Kaplan Eq. 1.1), by least squares on log L against log N.

    A straight line on log-log axes, as Kaplan's losses lay over their range. A small sweep bends away from
    it: the loss flattens towards the entropy of text, not zero, and every run here is limited by its tokens
    as well as by N.
    """
    slope, intercept = np.polyfit(np.log(n), np.log(np.asarray(loss, dtype=float)), 1)
    alpha_n = -slope
    return float(np.exp(intercept / alpha_n)), float(alpha_n)


def fit_kaplan_loss(n, d, loss) -> dict[str, float]:
    """Kaplan's L(N, D) = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D (Eq. 1.5) fitted to the runs by least squares on
    log L, started from the paper's constants.

    Written in logs, log L = α_D · log(exp((α_N/α_D)(log N_c - log N)) + exp(log D_c - log D)), so the
    optimizer moves log N_c and log D_c, numbers of order 30 rather than 1e13. Returns alpha_n, alpha_d,
    n_c and d_c.
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


def fit_kaplan_laws(sweep: Sweep) -> dict[str, dict[str, float]]:
    """Both laws fitted to a sweep: L(N) over each size's best run, L(N, D) over every run.

    Kaplan's L(N) wants each size trained as long as it can be, so it takes each size's lowest loss; L(N, D)
    has D in it and takes every run as it is.
    """
    sizes = np.unique(sweep.n)  # (sizes,)
    best = [sweep.loss[sweep.n == size].min() for size in sizes]  # (sizes,) each size's lowest loss
    return {"Kaplan L(N)": dict(zip(("n_c", "alpha_n"), fit_power_law_in_n(sizes, best), strict=True)),
            "Kaplan L(N, D)": fit_kaplan_loss(sweep.n, sweep.d, sweep.loss)}
