"""The figures laws.py writes beside a sweep's results: one IsoFLOP plot per counting, and three figures with
a panel (or a row of panels) per counting, so the kaplan and chinchilla countings of N and C sit side by side.

    isoflops_<counting>.png  each budget's losses against N, its parabola and minimum, and the minima against
                             C (Approach 2); chinchilla_isoflops.png the same for Chinchilla's runs
    chinchilla_residuals.png two fits of Chinchilla's surface against the runs, run by run
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
    approach2,
    isoflop_minimum,
    isoflop_parabola,
)
from phase1_foundation.project4_scaling.figure import new_figure, save_figure
from phase1_foundation.project4_scaling.planner import ChinchillaPlanner
from phase1_foundation.project4_scaling.results import Sweep

N_LABEL = {"kaplan": "non-embedding parameters N", "chinchilla": "all parameters N (embeddings included)"}
C_LABEL = {"kaplan": "C = 6ND FLOPs", "chinchilla": "C = App. F FLOPs"}


def plot_isoflops(sweep: Sweep, path: Path, seeds: dict[tuple[float, float], list[float]] | None = None,
                  minima: list[Allocation] = (), baselines: dict[str, float] | None = None,
                  title: str = "") -> Path:
    """Chinchilla's Figure 3 for one counting of a sweep: on the left, loss against N at each budget, each
    budget's parabola and its minimum (Approach 2); on the right, those minima against C and the line through
    them, N_opt ∝ C^a. Where a point was trained with several seeds (`seeds`: (budget, N) -> their losses),
    every seed's loss and a bar from the lowest to the highest; `minima`, the bootstrap's refits, as a cloud
    of minima on the right; `baselines` (name -> loss), a horizontal line each."""
    from matplotlib.ticker import NullFormatter  # matplotlib only when drawing (figure.py)

    fig = new_figure(12.8, 4.8)
    ax, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    fit = approach2(sweep)
    for i, budget in enumerate(sweep.budgets()):
        n, loss, colour = sweep.n[sweep.budget == budget], sweep.loss[sweep.budget == budget], f"C{i % 10}"
        ax.scatter(n, loss, color=colour, s=16, label=f"C = {budget:.2g}")
        spread = [(size, losses) for (at, size), losses in (seeds or {}).items() if at == budget]
        for j, (size, losses) in enumerate(spread):
            ax.vlines(size, min(losses), max(losses), color=colour, linewidth=1)
            ax.scatter([size] * len(losses), losses, color=colour, marker="_", s=60,
                       label=f"C = {budget:.2g}: {len(losses)} seeds, lowest to highest" if j == 0 else None)
        if len(np.unique(n)) < 3:
            continue
        parabola = isoflop_parabola(n, loss)
        x = np.linspace(np.log(n.min()), np.log(n.max()), 100)
        ax.plot(np.exp(x), np.polyval(parabola, x), color=colour)
        n_min, problem = isoflop_minimum(n, loss)
        if problem is None:
            ax.plot(n_min, np.polyval(parabola, np.log(n_min)), "k*", markersize=11)
    for k, (name, loss) in enumerate((baselines or {}).items()):
        ax.axhline(loss, color="grey", linestyle=("--", ":")[k % 2], linewidth=1, label=f"{name}: {loss:.3f}")
    ax.set(xscale="log", xlabel=N_LABEL[sweep.counted_as], ylabel="final validation loss (nats/token)",
           title="loss against size at each budget; stars: each parabola's minimum")
    ax.legend(fontsize="x-small")
    for k, refit in enumerate(minima):
        right.scatter(refit.compute, refit.n_opt, color="grey", alpha=0.25, s=8,
                      label=f"the minima of {len(minima)} bootstrap refits" if k == 0 else None)
    right.scatter(fit.compute, fit.n_opt, color="black", marker="*", s=90, zorder=3, label="the minima")
    if np.isfinite(fit.a):
        compute = np.geomspace(fit.compute.min(), fit.compute.max(), 20)
        right.plot(compute, fit.n_scale * compute**fit.a, "r", label=f"N_opt ∝ C^{fit.a:.2f}")
    right.set(xscale="log", yscale="log", xlabel=f"compute, {C_LABEL[sweep.counted_as]}",
              ylabel=f"N_opt ({N_LABEL[sweep.counted_as]})", title="the minima against compute (Approach 2)")
    if len(sweep.budgets()) <= 4:  # a factor of a few: label the budgets, not a bare 10^k
        right.set_xticks(sweep.budgets(), [f"{c:.2g}" for c in sweep.budgets()])
        right.xaxis.set_minor_formatter(NullFormatter())
    right.legend(fontsize="x-small")
    fig.suptitle(title or f"IsoFLOP profiles, {sweep.counting} counting ({C_LABEL[sweep.counting]})")
    return save_figure(fig, path)


def plot_surface_residuals(sweep: Sweep, surfaces: dict[str, LossSurface], path: Path) -> Path:
    """Each surface's misfit run by run, ln L minus the surface's ln L against the run's compute: a surface
    that describes the runs scatters about zero at every C."""
    fig = new_figure(7.2, 4.8)
    ax = fig.add_subplot()
    for i, (name, surface) in enumerate(surfaces.items()):
        residual = np.log(sweep.loss) - np.log(surface.loss(sweep.n, sweep.d))
        above = np.mean(residual > 0)
        ax.scatter(sweep.flops, residual, s=10, color=f"C{i}", alpha=0.7,
                   label=f"{name}: median {np.median(residual):+.4f}, {above:.0%} of runs above")
    ax.axhline(0, color="black", linewidth=1)
    ax.set(xscale="log", xlabel="training FLOPs C", ylabel="ln L - ln L(surface)",
           title=f"{sweep.loss.size} of Chinchilla's runs against two fits of the same surface")
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
    from matplotlib.ticker import NullFormatter  # matplotlib only when drawing (figure.py)

    fig = new_figure(11, 4.6 * len(allocations))
    for row, (counting, fits) in enumerate(allocations.items()):
        reference = fits["Approach 1"]
        compute = np.geomspace(reference.compute.min() / 2, reference.compute.max() * 2, 50)  # (50,)
        ours = {name: (fit.n_scale * compute**fit.a, fit.d_scale * compute**fit.b, fit.a, fit.b)
                for name, fit in fits.items()}
        if not surfaces[counting].problem:  # an exponent not identified has no line to draw
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
            for paper, style in (("Kaplan", "--"), ("Chinchilla Approach 2", ":")):
                slope = PAPER_EXPONENTS[paper][index]
                ax.plot(compute, centre * (compute / centre_c) ** slope, style, linewidth=1.2, color="black",
                        label=f"{paper.split()[0]}: C^{slope:.2f}")
            ax.set(xscale="log", yscale="log", xlabel=f"compute {C_LABEL[counting]}", ylabel=label,
                   title=f"{counting} counting")
            for axis in (ax.xaxis, ax.yaxis):  # a factor of a few on a log axis: minor labels would collide
                axis.set_minor_formatter(NullFormatter())
            ax.set_xticks(reference.compute, [f"{c:.2g}" for c in reference.compute])  # the budgets
            ax.legend(fontsize="x-small")
    fig.suptitle("Compute-optimal allocation: ours (colours) and the papers' slopes (black), drawn through "
                 "the centre of our Approach 1 points")
    return save_figure(fig, path)


def plot_parametric(sweeps: dict[str, Sweep], surfaces: dict[str, LossSurface], path: Path) -> Path:
    """Contours of each counting's fitted L(N, D), the runs, each budget's runs joined (an IsoFLOP line), and
    the efficient frontier where C = 6ND: the point of each line N·D = C/6 on the lowest contour it reaches.
    Under the chinchilla counting the runs' IsoFLOP lines are App. F's, not N·D = C/6. A fit whose exponents
    are not identified has no surface worth drawing: its panel shows the runs and says why."""
    fig = new_figure(6.4 * len(sweeps), 4.8)
    for index, (counting, sweep) in enumerate(sweeps.items()):
        surface = surfaces[counting]
        ax = fig.add_subplot(1, len(sweeps), index + 1)
        n = np.geomspace(sweep.n.min() / 3, sweep.n.max() * 3, 200)  # (200,)
        d = np.geomspace(sweep.d.min() / 3, sweep.d.max() * 3, 200)  # (200,)
        if surface.problem:
            title = f"{counting} counting: Approach 3 not determined"
            ax.text(0.97, 0.97, surface.problem.replace(": ", ":\n"), transform=ax.transAxes,
                    fontsize="small", ha="right", va="top")
        else:
            grid_n, grid_d = np.meshgrid(n, d)  # (200, 200) each
            contours = ax.contour(grid_n, grid_d, surface.loss(grid_n, grid_d), levels=15, cmap="viridis")
            ax.clabel(contours, fontsize="x-small")
            compute = np.geomspace(6 * n[0] * d[0], 6 * n[-1] * d[-1], 50)
            ax.plot(*ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute), "r", linewidth=2,
                    label="efficient frontier (C = 6ND)")
            title = f"{counting} counting: fitted L(N, D), a = {surface.a:.2f}, b = {surface.b:.2f}"
        for i, budget in enumerate(sweep.budgets()):
            at = np.flatnonzero(sweep.budget == budget)
            at = at[np.argsort(sweep.n[at])]
            ax.plot(sweep.n[at], sweep.d[at], "--", color=f"C{i % 10}", linewidth=1,
                    label=f"C = {budget:.2g}")
        ax.scatter(sweep.n, sweep.d, color="black", s=10, label="runs")
        ax.set(xscale="log", yscale="log", xlim=(n[0], n[-1]), ylim=(d[0], d[-1]), xlabel=N_LABEL[counting],
               ylabel="D (tokens)", title=title)
        ax.legend(fontsize="x-small", loc="lower left")
    return save_figure(fig, path)


def plot_loss_vs_compute(sweeps: dict[str, Sweep], surfaces: dict[str, LossSurface], path: Path) -> Path:
    """Every run's final loss against the compute it spent, coloured by N, a panel per counting; and, where
    the counting's C is 6ND (the kaplan counting) and its Approach 3 fit is identified, the loss the fitted
    surface predicts at each C's best split. That line is the surface's, not a run's: it can run below
    every run where no run was trained at the split it calls best."""
    from matplotlib.ticker import NullFormatter  # matplotlib only when drawing (figure.py)

    fig = new_figure(6.4 * len(sweeps), 4.8)
    for index, (counting, sweep) in enumerate(sweeps.items()):
        ax = fig.add_subplot(1, len(sweeps), index + 1)
        points = ax.scatter(sweep.flops, sweep.loss, c=np.log10(sweep.n), cmap="viridis")
        fig.colorbar(points, ax=ax, label="log10 N")
        surface = surfaces[counting]
        if counting == "kaplan" and not surface.problem:
            compute = np.geomspace(sweep.flops.min(), sweep.flops.max(), 50)
            frontier = surface.loss(*ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute))
            ax.plot(compute, frontier, "r", label="Approach 3: the fitted surface at its best (N, D) per C")
            ax.legend(fontsize="small")
        ax.set(xscale="log", xlabel=f"compute spent, {C_LABEL[counting]}",
               ylabel="final validation loss (nats/token)", title=f"{counting} counting: every run")
        if counting == sweep.counted_as:  # the runs spent their budgets: label those, not a bare 10^k
            ax.set_xticks(sweep.budgets(), [f"{c:.2g}" for c in sweep.budgets()])
            ax.xaxis.set_minor_formatter(NullFormatter())
    return save_figure(fig, path)


def plot_chinchilla_runs(sweep: Sweep, surface: LossSurface, published: dict[str, LossSurface],
                         path: Path) -> Path:
    """Chinchilla's runs where the paper's Figure 4 drew them, N against C coloured by their loss, with the
    efficient frontier N_opt(C) of our fit to them and of the published fits."""
    fig = new_figure(7.2, 4.8)
    ax = fig.add_subplot()
    points = ax.scatter(sweep.flops, sweep.n, c=sweep.loss, cmap="viridis_r", s=14)
    fig.colorbar(points, ax=ax, label="final loss (nats/token)")
    compute = np.geomspace(sweep.flops.min(), sweep.flops.max(), 50)  # (50,)
    lines = {f"our fit to these runs: a = {surface.a:.2f}": (surface, "r", "-", 5)}  # wide: others lie on it
    lines |= {f"{name}: a = {fit.a:.2f}": (fit, "black", style, 2)
              for (name, fit), style in zip(published.items(), ("--", ":"), strict=True)}
    for label, (fit, colour, style, width) in lines.items():
        n_opt, _ = ChinchillaPlanner(fit).get_optimal_params_and_tokens(compute)
        ax.plot(compute, n_opt, style, color=colour, linewidth=width, alpha=0.8, label=label)
    ax.set(xscale="log", yscale="log", xlabel="training FLOPs C", ylabel="parameters N",
           title=f"Chinchilla's runs ({sweep.loss.size}) and the efficient frontier N_opt ∝ C^a")
    ax.legend(fontsize="small")
    return save_figure(fig, path)
