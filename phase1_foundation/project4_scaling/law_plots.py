"""The figures laws.py writes beside a sweep's results: one IsoFLOP plot per counting, and three figures with
a panel (or a row of panels) per counting, so the kaplan and chinchilla countings of N and C sit side by side.

    isoflops_<counting>.png  each budget's losses against N, its parabola and minimum (Approach 2)
    allocation.png           N_opt and D_opt against C, ours and the papers' slopes
    parametric.png           the fitted loss surface, the runs and the efficient frontier (Approach 3)
    loss_vs_compute.png      every run's loss against the compute it spent
"""

from pathlib import Path

import numpy as np

from phase1_foundation.project4_scaling.chinchilla import (
    PAPER_EXPONENTS,
    Allocation,
    LossSurface,
    isoflop_minimum,
    isoflop_parabola,
)
from phase1_foundation.project4_scaling.planner import ChinchillaPlanner
from phase1_foundation.project4_scaling.plots import new_figure, save_figure
from phase1_foundation.project4_scaling.results import Sweep

N_LABEL = {"kaplan": "non-embedding parameters N", "chinchilla": "all parameters N (embeddings included)"}
C_LABEL = {"kaplan": "C = 6ND FLOPs", "chinchilla": "C = App. F FLOPs"}


def plot_isoflops(sweep: Sweep, path: Path) -> Path:
    """Loss against N at each budget of one counting, with each budget's parabola and, where it is trusted,
    its minimum (Approach 2)."""
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
    ax.set(xscale="log", xlabel=N_LABEL[sweep.counting], ylabel="final validation loss (nats/token)",
           title=f"IsoFLOP curves, {sweep.counting} counting ({C_LABEL[sweep.counting]});\n"
                 "stars: each parabola's minimum")
    ax.legend(fontsize="small")
    return save_figure(fig, path)


def plot_allocation(allocations: dict[str, dict[str, Allocation]], surfaces: dict[str, LossSurface],
                    path: Path) -> Path:
    """N_opt and D_opt against C, a row per counting: each approach's points and fitted line, and the
    papers' slopes.

    The papers' lines show slopes only (their N_opt at our budgets is not ours: other data, another
    tokenizer), so each is drawn through the centre of our Approach 1 points. Approach 3's line is the
    closed form, which reads C as 6ND: under the chinchilla counting its slope is the paper's conversion.
    """
    fig = new_figure(11, 4.6 * len(allocations))
    for row, (counting, fits) in enumerate(allocations.items()):
        reference = fits["Approach 1"]
        compute = np.geomspace(reference.compute.min() / 2, reference.compute.max() * 2, 50)  # (50,)
        ours = {name: (fit.n_scale * compute**fit.a, fit.d_scale * compute**fit.b, fit.a, fit.b)
                for name, fit in fits.items()}
        n_opt, d_opt = ChinchillaPlanner(surfaces[counting]).get_optimal_params_and_tokens(compute)
        ours["Approach 3"] = (n_opt, d_opt, surfaces[counting].a, surfaces[counting].b)
        for index, label in enumerate((f"N_opt ({N_LABEL[counting]})", "D_opt (tokens)")):
            ax = fig.add_subplot(len(allocations), 2, 2 * row + index + 1)
            for i, (name, line) in enumerate(ours.items()):
                if name in fits:
                    points = (fits[name].n_opt, fits[name].d_opt)[index]
                    ax.scatter(fits[name].compute, points, color=f"C{i}")
                ax.plot(compute, line[index], color=f"C{i}", label=f"{name}: C^{line[2 + index]:.2f}")
            centre = np.exp(np.log((reference.n_opt, reference.d_opt)[index]).mean())
            centre_c = np.exp(np.log(reference.compute).mean())
            for paper, exponents in PAPER_EXPONENTS.items():
                slope = exponents[index]
                ax.plot(compute, centre * (compute / centre_c) ** slope, ":", linewidth=1,
                        color="black" if paper == "Kaplan" else "grey", label=f"{paper}: C^{slope:.2f}")
            ax.set(xscale="log", yscale="log", xlabel=f"compute {C_LABEL[counting]}", ylabel=label,
                   title=f"{counting} counting")
            ax.legend(fontsize="x-small")
    fig.suptitle("Compute-optimal allocation: ours (colours) and the papers' slopes (dotted)")
    return save_figure(fig, path)


def plot_parametric(sweeps: dict[str, Sweep], surfaces: dict[str, LossSurface], path: Path) -> Path:
    """Contours of each counting's fitted L(N, D), the runs, each budget's runs joined (an IsoFLOP line), and
    the efficient frontier where C = 6ND: the point of each line N·D = C/6 on the lowest contour it reaches.
    Under the chinchilla counting the runs' IsoFLOP lines are App. F's, not N·D = C/6."""
    fig = new_figure(6.4 * len(sweeps), 4.8)
    for index, (counting, sweep) in enumerate(sweeps.items()):
        surface = surfaces[counting]
        ax = fig.add_subplot(1, len(sweeps), index + 1)
        n = np.geomspace(sweep.n.min() / 3, sweep.n.max() * 3, 200)  # (200,)
        d = np.geomspace(sweep.d.min() / 3, sweep.d.max() * 3, 200)  # (200,)
        grid_n, grid_d = np.meshgrid(n, d)  # (200, 200) each
        contours = ax.contour(grid_n, grid_d, surface.loss(grid_n, grid_d), levels=15, cmap="viridis")
        ax.clabel(contours, fontsize="x-small")
        for i, budget in enumerate(sweep.budgets()):
            at = np.flatnonzero(sweep.budget == budget)
            at = at[np.argsort(sweep.n[at])]
            ax.plot(sweep.n[at], sweep.d[at], "--", color=f"C{i % 10}", linewidth=1,
                    label=f"C = {budget:.2g}")
        compute = np.geomspace(6 * n[0] * d[0], 6 * n[-1] * d[-1], 50)
        ax.plot(*ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute), "r", linewidth=2,
                label="efficient frontier (C = 6ND)")
        ax.scatter(sweep.n, sweep.d, color="black", s=10, label="runs")
        ax.set(xscale="log", yscale="log", xlim=(n[0], n[-1]), ylim=(d[0], d[-1]), xlabel=N_LABEL[counting],
               ylabel="D (tokens)",
               title=f"{counting} counting: fitted L(N, D), a = {surface.a:.2f}, b = {surface.b:.2f}")
        ax.legend(fontsize="x-small")
    return save_figure(fig, path)


def plot_loss_vs_compute(sweeps: dict[str, Sweep], surfaces: dict[str, LossSurface], path: Path) -> Path:
    """Every run's final loss against the compute it spent, coloured by N, a panel per counting, and under
    the kaplan counting the loss the fitted surface predicts on its efficient frontier. The closed form
    reads C as 6ND, so it has no frontier on the chinchilla counting's axis of App. F FLOPs."""
    fig = new_figure(6.4 * len(sweeps), 4.8)
    for index, (counting, sweep) in enumerate(sweeps.items()):
        ax = fig.add_subplot(1, len(sweeps), index + 1)
        points = ax.scatter(sweep.flops, sweep.loss, c=np.log10(sweep.n), cmap="viridis")
        fig.colorbar(points, ax=ax, label="log10 N")
        if counting == "kaplan":
            compute = np.geomspace(sweep.flops.min(), sweep.flops.max(), 50)
            surface = surfaces[counting]
            frontier = surface.loss(*ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute))
            ax.plot(compute, frontier, "r", label="Approach 3 frontier")
            ax.legend()
        ax.set(xscale="log", xlabel=f"compute spent, {C_LABEL[counting]}",
               ylabel="final validation loss (nats/token)", title=f"{counting} counting: every run")
    return save_figure(fig, path)
