"""Chinchilla's own runs, fitted by this chapter's code the paper's three ways: `laws.py --DATA=chinchilla`.

chinchilla_runs.csv holds 245 of Hoffmann et al.'s runs (N, C, final loss), read off the paper's Figure 4 by
Besiroglu et al. 2024. On them:

- Approach 2 as the paper's Figure 3 draws it: the runs at its nine IsoFLOP budgets, a parabola through each
  budget's losses, and a line through the parabolas' minima, N_opt ∝ C^a;
- Approaches 1 and 3 on the same runs, beside the paper's Table 2 and Besiroglu et al.'s refit;
- the paper's printed surface against the refit, run by run: Besiroglu et al.'s finding that it misfits the
  paper's own runs;
- what the choice of loss does to Approach 3: Huber with δ = 1e-3, the paper's, against least squares;
- the counting alone, Pearce & Song's demonstration on the refit surface (pearce_song.py).
"""

from pathlib import Path

import numpy as np

from phase1_foundation.project4_scaling import pearce_song
from phase1_foundation.project4_scaling.bootstrap import bootstrap, resampled, with_interval
from phase1_foundation.project4_scaling.chinchilla import (
    HUBER_DELTA,
    PAPER_EXPONENTS,
    Allocation,
    LossSurface,
    approach1,
    approach2,
    approach2_refit,
    exponents_of,
    fit_parametric,
    parabola_residuals,
    surface_residuals,
)
from phase1_foundation.project4_scaling.planner import PUBLISHED_SURFACES
from phase1_foundation.project4_scaling.results import Sweep
from phase1_foundation.project4_scaling.sweep_figures import (
    plot_chinchilla_runs,
    plot_isoflops,
    plot_surface_residuals,
)

CSV = Path(__file__).with_name("chinchilla_runs.csv")
OUTLIERS = 5  # PAPER: Besiroglu et al. 2024, §3: the five runs of highest loss are left out of their fit
# PAPER: Chinchilla §3.2 (Figure 3): nine IsoFLOP budgets from 6e18 to 3e21 FLOPs
ISOFLOP_BUDGETS = (6e18, 1e19, 3e19, 6e19, 1e20, 3e20, 6e20, 1e21, 3e21)
# A run read off the plot belongs to a budget when its C lies within this factor of it; the file's other runs
# were trained for Approaches 1 and 3
WITHIN = 1.2
LEAST_SQUARES = 1.0  # a Huber δ larger than every residual in ln L: the fit becomes least squares
BESIROGLU_APPROACH_3 = PUBLISHED_SURFACES["epoch-2024"].a


def read_runs(path: Path = CSV) -> Sweep:
    """Chinchilla's runs as a sweep: N (every parameter), C (the paper's FLOPs) and the loss of each, with
    D = C / 6N as the paper's IsoFLOP runs had it; the OUTLIERS runs of highest loss left out."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    table = np.loadtxt(lines[1:], delimiter=",", ndmin=2)  # (runs, 3): N, C, L (lines[0]: the column names)
    table = table[np.argsort(table[:, 2])[: len(table) - OUTLIERS]]
    n, compute, loss = table.T
    return Sweep("chinchilla", compute, n, compute / (6 * n), compute, loss)


def at_isoflop_budgets(sweep: Sweep) -> Sweep:
    """The runs within WITHIN of one of the paper's nine budgets, each with that budget as its own."""
    budgets = np.array(ISOFLOP_BUDGETS)
    distance = np.abs(np.log(sweep.flops)[:, None] - np.log(budgets)[None, :])  # (runs, budgets)
    nearest = distance.argmin(axis=1)
    keep = distance.min(axis=1) <= np.log(WITHIN)
    binned = sweep.take(keep)
    return Sweep("chinchilla", budgets[nearest[keep]], binned.n, binned.d, binned.flops, binned.loss)


def fit(resamples: int, out_dir: Path) -> dict:
    """Every fit of Chinchilla's runs, printed beside the paper's and Besiroglu et al.'s, and the figures."""
    runs = read_runs()
    binned = at_isoflop_budgets(runs)
    surface = fit_parametric(runs.n, runs.d, runs.loss)
    # The noise each approach is refitted under: the scatter of the runs about the model it fits, the
    # IsoFLOP parabolas (Approaches 1 and 2) or the surface (Approach 3); Approach 2 under the surface's too
    noise = surface_residuals(runs, surface)
    parabola_noise = parabola_residuals(binned)
    parabola_noise = parabola_noise[np.isfinite(parabola_noise)]
    allocations = {"Approach 1": approach1(binned), "Approach 2": approach2(binned)}
    numbers = {name: fit.exponents() for name, fit in allocations.items()}
    estimates = {"Approach 1": lambda s: approach1(s).exponents(),
                 "Approach 2": approach2_refit(len(ISOFLOP_BUDGETS))}
    for name, estimate in estimates.items():
        numbers[name]["interval"] = bootstrap(binned, estimate, parabola_noise, resamples)
    numbers["Approach 2, surface noise"] = allocations["Approach 2"].exponents() | {"interval": bootstrap(
        binned, estimates["Approach 2"], surface_residuals(binned, surface), resamples)}
    numbers["Approach 3"] = exponents_of(surface) | {"E": surface.E, "A": surface.A, "B": surface.B,
                                                     "problem": surface.problem}
    numbers["Approach 3"]["interval"] = bootstrap(
        runs, lambda s: exponents_of(fit_parametric(s.n, s.d, s.loss)), noise, resamples)
    least_squares = fit_parametric(runs.n, runs.d, runs.loss, delta=LEAST_SQUARES)
    counts = np.bincount(np.searchsorted(ISOFLOP_BUDGETS, binned.budget), minlength=len(ISOFLOP_BUDGETS))
    paper = PUBLISHED_SURFACES["paper-unrounded"]
    misfit = {"the paper's (unrounded)": surface_residuals(runs, paper), "the refit (ours)": noise}
    report(numbers, allocations["Approach 2"], least_squares, misfit, resamples, counts, len(runs.loss))
    cloud = [approach2(again) for again in resampled(binned, parabola_noise, resamples)]
    plots = [
        plot_isoflops(binned, out_dir / "chinchilla_isoflops.png", minima=cloud,
                      title="Chinchilla's runs at the paper's nine IsoFLOP budgets (its Figure 3)"),
        plot_surface_residuals(runs, {"the paper's fit (App. D.2, unrounded)": paper,
                                      "refit by fit_parametric (Besiroglu et al.'s)": surface},
                               out_dir / "chinchilla_residuals.png"),
        plot_chinchilla_runs(runs, surface, {name: PUBLISHED_SURFACES[name]
                                             for name in ("epoch-2024", "paper-unrounded")},
                             out_dir / "chinchilla_runs.png"),
    ]
    print("\nplots: " + ", ".join(str(path) for path in plots))
    return {"chinchilla-runs": numbers["Approach 3"], "approaches": numbers, "runs": len(runs.loss),
            "isoflop-runs": counts.tolist(), "least-squares": least_squares, "plots": plots}


def report(numbers: dict, second: Allocation, least_squares: LossSurface, misfit: dict[str, np.ndarray],
           resamples: int, counts: np.ndarray, runs: int) -> None:
    """The three approaches beside the papers, the loss's effect, the printed surface's misfit against the
    refit's, and the counting alone."""
    print(f"Chinchilla's runs ({CSV.name}: {runs} of Hoffmann et al.'s runs, read off their Figure 4 by "
          f"Besiroglu et al. 2024; the {OUTLIERS} of highest loss left out, as theirs)")
    print(f"intervals: 10th to 90th percentile (80%) over {resamples} resamples, each run's ln L moved by "
          f"one of the residuals of the model fitted (the parabolas, or the surface for Approach 3); "
          f"(k/{resamples}): how many gave an exponent")
    print(f"\nApproach 2 on the {sum(counts)} runs within a factor {WITHIN} of the paper's nine IsoFLOP "
          f"budgets ({min(counts)} to {max(counts)} runs each):")
    for compute, n_opt in zip(second.compute, second.n_opt, strict=True):
        print(f"  C = {compute:.2g}: N_opt = {n_opt / 1e6:,.0f}M")
    for budget, problem in second.flagged.items():
        print(f"  C = {budget:.2g} left out: {problem}")
    print(f"\n{'a (N_opt ∝ C^a)':<16}{'ours, on these runs':<34}{'the paper (Table 2)':<22}Besiroglu et al.")
    besiroglu = {"Approach 3": f"{BESIROGLU_APPROACH_3:.2f} (refit)"}
    for name in ("Approach 1", "Approach 2", "Approach 3"):
        print(f"{name:<16}{with_interval(numbers[name], 'a'):<34}"
              f"{PAPER_EXPONENTS[f'Chinchilla {name}'][0]:<22.2f}{besiroglu.get(name, '-')}")
    print(f"Approach 2, each run moved by the surface's residuals instead: "
          f"{with_interval(numbers['Approach 2, surface noise'], 'a')}")
    print("Approach 1 here is each budget's best final run; the paper's is the lowest loss over every run's "
          "training curve, which the file does not hold")
    third = numbers["Approach 3"]
    print(f"Approach 3: E {third['E']:.3f}, A {third['A']:.4g}, B {third['B']:.4g}, alpha "
          f"{with_interval(third, 'alpha')}, beta {with_interval(third, 'beta')}")
    size = np.abs(misfit["the refit (ours)"])
    print(f"the loss it minimises: Huber with delta = {HUBER_DELTA:g}, the paper's; the median |residual| is "
          f"{np.median(size):.4f} and {np.mean(size <= HUBER_DELTA):.0%} lie within delta, so the fit is "
          f"nearly least absolute deviations. Least squares on the same runs: alpha "
          f"{least_squares.alpha:.3f}, beta {least_squares.beta:.3f}, a {least_squares.a:.3f} (Huber: "
          f"{third['a']:.3f})")
    print("\nthe surfaces' misfit to the runs, ln L minus the surface's ln L (median; share of runs above "
          "the surface; root mean square):")
    for name, residual in misfit.items():
        above, rms = np.mean(residual > 0), np.sqrt(np.mean(residual**2))
        print(f"  {name:<26}{np.median(residual):+.4f}; {above:.0%}; {rms:.4f}")
    print("\nthe counting alone (Pearce & Song 2024): Besiroglu et al.'s surface, asked for the best "
          "non-embedding N at Kaplan's C = 6 N_E D (GPT-2 shapes, d_model = 64 n_layer, vocabulary 50,257)")
    for low, high, a in pearce_song.local_exponents(PUBLISHED_SURFACES["epoch-2024"]):
        print(f"  C from {low:.0e} to {high:.0e}: a = {a:.2f}")
    print(f"  the surface itself, every parameter counted: a = {BESIROGLU_APPROACH_3:.2f}; Kaplan's: "
          f"{PAPER_EXPONENTS['Kaplan'][0]:.2f}")
