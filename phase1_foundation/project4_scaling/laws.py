"""Scaling laws fitted to a sweep of models you trained, under both ways the papers count N and C, side by
side; and a plan that turns minutes into a model size.

    uv run python phase1_foundation/project4_scaling/laws.py                   # after train.py's sweep
    uv run python phase1_foundation/project4_scaling/laws.py --OUT_DIR=<a sweep's folder>
    uv run python phase1_foundation/project4_scaling/laws.py --PLAN_MINUTES=10  # and plan a 10-minute run
    uv run python phase1_foundation/project4_scaling/laws.py --DATA=chinchilla  # Chinchilla's own runs

Nothing here trains. Each counting's sweep (results.COUNTINGS) is asked the two papers' questions: kaplan.py
fits L(N) and L(N, D), chinchilla.py splits a budget between N and D by Approaches 1 to 3, each exponent with
a bootstrap interval (bootstrap.py). prediction.py carries the budgets' minima PLAN_AHEAD times further and
planner.py splits a budget by Chinchilla's closed form; the figures are sweep_figures.py's. What the fits
mean and what the cpu sweep gave: README, "Results: the sweep on two CPU cores".
"""

import json
from pathlib import Path

import numpy as np

from common.errors import CourseError, run_main
from common.training.config import load_config
from phase1_foundation.project4_scaling import chinchilla_runs, config, prediction
from phase1_foundation.project4_scaling.bootstrap import (
    MAX_WIDTH,
    MIN_SHARE,
    NEAREST_POINTS,
    bootstrap,
    noise_by_length,
    pools_of,
    resampled,
    seed_deviations,
    with_interval,
)
from phase1_foundation.project4_scaling.chinchilla import (
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
from phase1_foundation.project4_scaling.kaplan import KAPLAN_ALPHA_N, fit_kaplan_laws
from phase1_foundation.project4_scaling.planner import PUBLISHED_SURFACES, plan
from phase1_foundation.project4_scaling.results import (
    COUNTING_COLUMNS,
    COUNTINGS,
    SWEEP_FIELDS,
    Sweep,
    countings_in,
    read_results,
)
from phase1_foundation.project4_scaling.sweep_figures import (
    plot_allocation,
    plot_isoflops,
    plot_loss_vs_compute,
    plot_parametric,
)

APPROACHES = ("Approach 1", "Approach 2", "Approach 3")
Noise = np.ndarray | list[np.ndarray]  # deviations in ln L: one pool for every run, or one pool per run
LEAST_SQUARES = chinchilla_runs.LEAST_SQUARES


def fit_sweep(sweep: Sweep, noise: Noise, resamples: int) -> tuple[dict, dict[str, Allocation],
                                                                   LossSurface]:
    """Every fit of one sweep, N and C as it counts them: each approach's exponents with a bootstrap
    interval, the fitted surface, and under the kaplan counting Kaplan's laws; Approaches 1 and 2's points,
    and the surface."""
    surface = fit_parametric(sweep.n, sweep.d, sweep.loss)
    allocations = {"Approach 1": approach1(sweep), "Approach 2": approach2(sweep)}
    numbers = {name: fit.exponents() for name, fit in allocations.items()}
    second = allocations["Approach 2"]
    numbers["Approach 2"] |= {"flagged": second.flagged, "used": len(second.compute),
                              "compute": second.compute.tolist(), "n_opt": second.n_opt.tolist()}
    # Under the chinchilla counting too, a = β/(α+β) and b = α/(α+β): that is how the paper converts its fit
    # (§3.3), by the closed form for C = 6ND, although its N counts every parameter and its C is App. F's.
    numbers["Approach 3"] = exponents_of(surface) | {"E": surface.E, "A": surface.A, "B": surface.B,
                                                     "problem": surface.problem}
    estimates = {
        "Approach 1": lambda s: approach1(s).exponents(),
        "Approach 2": approach2_refit(len(second.compute)),
        "Approach 3": lambda s: exponents_of(fit_parametric(s.n, s.d, s.loss)),
    }
    if surface.problem:  # no exponents to put an interval around
        del estimates["Approach 3"]
        numbers["Approach 3"]["interval"] = {}
    for name, estimate in estimates.items():
        numbers[name]["interval"] = bootstrap(sweep, estimate, noise, resamples)
    numbers["runs"], numbers["budgets"] = len(sweep.loss), len(sweep.budgets())
    misfit = parabola_residuals(sweep)
    fitted = np.isfinite(misfit)  # the runs of budgets with more sizes than a parabola's three coefficients
    numbers["misfit"] = float(np.sqrt(np.mean(misfit[fitted] ** 2))) if fitted.any() else np.nan
    numbers["seeds' scatter"] = np.nan  # the seeds' scatter at the same runs' lengths, to hold the misfit to
    if isinstance(noise, list) and fitted.any():
        numbers["seeds' scatter"] = float(np.sqrt(np.mean([np.mean(noise[i] ** 2)
                                                           for i in np.flatnonzero(fitted)])))
    numbers["Approach 2"]["lost"] = lost_budgets(sweep, noise, resamples)
    numbers["correlation"] = float(np.corrcoef(np.log(sweep.n), np.log(sweep.d))[0, 1])
    squares = fit_parametric(sweep.n, sweep.d, sweep.loss, delta=LEAST_SQUARES)
    numbers["least squares"] = exponents_of(squares) | {"problem": squares.problem}
    if sweep.counting == "kaplan" and sweep.counted_as == "kaplan":  # Kaplan's laws are in Kaplan's N
        numbers |= fit_kaplan_laws(sweep)
    return numbers, allocations, surface


def lost_budgets(sweep: Sweep, noise: Noise, resamples: int) -> dict[str, int]:
    """How often the bootstrap's refits (the same draws as bootstrap's) lost each budget's minimum, and
    how: "1e+10: below the sizes" counts the refits whose parabola's minimum fell below the smallest model."""
    lost: dict[str, int] = {}
    for again in resampled(sweep, noise, resamples):
        for budget, problem in approach2(again).flagged.items():
            how = ("opens downward" if "downward" in problem else "below the sizes" if "smaller" in problem
                   else "above the sizes")
            lost[f"{budget:.3g}: {how}"] = lost.get(f"{budget:.3g}: {how}", 0) + 1
    return lost


def on_shared_budgets(planned: Sweep, counted: Sweep, deviations: Noise, resamples: int) -> dict:
    """Approach 2's a under both countings on the budgets where both have an interior minimum, when one
    counting lost a budget the other kept: the same runs and budgets, only the counting differs. {} when
    both used the same budgets (the table says it already) or share fewer than two."""
    used = [set(planned.budgets()) - set(approach2(sweep).flagged) for sweep in (planned, counted)]
    shared = used[0] & used[1]
    if used[0] == used[1] or len(shared) < 2:
        return {}
    runs = np.isin(planned.budget, sorted(shared))
    fits = {}
    for sweep in (planned.take(runs), counted.take(runs)):
        fits[sweep.counted_as] = approach2(sweep).exponents()
        fits[sweep.counted_as]["interval"] = bootstrap(sweep, approach2_refit(len(shared)),
                                                       pools_of(deviations, runs), resamples)
    return fits | {"budgets": sorted(shared)}


def one_depth(rows: list[dict], counting: str, noise: Noise, resamples: int) -> dict:
    """Approach 2 from the one-layer shapes alone, the same runs otherwise: what mixing depths along N does
    to the parabolas. {} when fewer than two budgets keep a minimum inside their one-layer sizes."""
    mine = [row for row in rows if row["counting"] == counting and not row.get("repeat")]
    shallow = np.array([row["n_layer"] == 1 for row in mine])
    if not shallow.any():
        return {}
    runs = Sweep.from_rows([row for row in mine if row["n_layer"] == 1], counting)
    fit = approach2(runs)
    if len(fit.compute) < 2:
        return {}
    return fit.exponents() | {"used": len(fit.compute), "interval": bootstrap(
        runs, approach2_refit(len(fit.compute)), pools_of(noise, shallow), resamples)}


def report_counting(counting: str, numbers: dict) -> None:
    """One counting's exponents beside the papers', the budgets Approach 2 left out, how far its parabolas
    miss the runs, the fitted surface beside Chinchilla's, and under the kaplan counting α_N beside
    Kaplan's."""
    print(f"\n{counting} counting ({COUNTINGS[counting]}): {numbers['runs']} runs at {numbers['budgets']} "
          "budgets")
    print(f"{'':<12}{'a':<40}{'b':<40}paper a / b")
    for name in APPROACHES:
        fit, (paper_a, paper_b) = numbers[name], PAPER_EXPONENTS[f"Chinchilla {name}"]
        print(f"{name:<12}{with_interval(fit, 'a'):<40}{with_interval(fit, 'b'):<40}"
              f"{paper_a:.2f} / {paper_b:.2f} (Chinchilla)")
    kaplan_a, kaplan_b = PAPER_EXPONENTS["Kaplan"]
    print(f"{'':<92}{kaplan_a:.2f} / {kaplan_b:.2f} (Kaplan)")
    second = numbers["Approach 2"]
    minima = ", ".join(f"{n:,.0f} at {c:.3g}"
                       for c, n in zip(second["compute"], second["n_opt"], strict=True))
    print(f"Approach 2: from {second['used']} budget{'' if second['used'] == 1 else 's'} with interior minima"
          f"{' (two needed for an exponent)' if second['used'] < 2 else ''}: N_opt {minima or 'none'}")
    for budget, problem in second["flagged"].items():
        print(f"Approach 2 left out C = {budget:.3g}: {problem}")
    if second["lost"]:
        print("Approach 2's refits lost a minimum at C = " + "; ".join(
            f"{where} {count} times" for where, count in sorted(second["lost"].items())))
    misfit, scatter = numbers["misfit"], numbers["seeds' scatter"]
    if np.isfinite(misfit):
        verdict = ""
        if np.isfinite(scatter):
            held = "a misfit the intervals do not hold" if misfit > scatter else "within the seeds' noise"
            verdict = f", against the seeds' {scatter:.3f} at the same run lengths: {held}"
        print(f"Approach 2's parabolas miss the runs by {misfit:.3f} in ln L (root mean square){verdict}")
    print(f"ln N and ln D across the runs correlate at {numbers['correlation']:.2f}")
    if numbers.get("one layer"):
        shallow = numbers["one layer"]
        print(f"Approach 2 from the one-layer shapes alone ({shallow['used']} budgets): a = "
              f"{with_interval(shallow, 'a')}")
    report_surface(numbers["Approach 3"], conversion=counting == "chinchilla")
    squares = numbers["least squares"]
    print("Approach 3 by least squares instead of Huber: " + (
        f"a = {squares['a']:.2f}" if squares["problem"] is None else f"not determined: {squares['problem']}"))
    if "Kaplan L(N)" in numbers:
        print(f"Kaplan alpha_N: {numbers['Kaplan L(N)']['alpha_n']:.3f} from L(N) over each size's best run, "
              f"{numbers['Kaplan L(N, D)']['alpha_n']:.3f} from L(N, D) over every run "
              f"(paper {KAPLAN_ALPHA_N})")


def report_surface(ours: dict, conversion: bool, published: tuple[str, ...] = ("paper-rounded",)) -> None:
    """Approach 3's fit beside published ones, or why its exponents are not determined."""
    if conversion:
        print("Approach 3: a = beta/(alpha+beta), b = alpha/(alpha+beta), as the paper converts its fit (its "
              "closed form assumes C = 6ND)")
    if ours["problem"]:
        print(f"Approach 3: not determined: {ours['problem']}")
        return
    print(f"Approach 3, L = E + A/N^alpha + B/D^beta{'E':>8}{'A':>10}{'B':>10}{'alpha':>8}{'beta':>8}"
          f"{'a':>8}")
    print(f"{'ours':<39}{ours['E']:>8.3f}{ours['A']:>10.4g}{ours['B']:>10.4g}{ours['alpha']:>8.3f}"
          f"{ours['beta']:>8.3f}{ours['a']:>8.3f}   alpha {with_interval(ours, 'alpha')}, "
          f"beta {with_interval(ours, 'beta')}")
    for name in published:
        paper = PUBLISHED_SURFACES[name]
        print(f"{name:<39}{paper.E:>8.3f}{paper.A:>10.4g}{paper.B:>10.4g}{paper.alpha:>8.3f}"
              f"{paper.beta:>8.3f}{paper.a:>8.3f}")


def report(numbers: dict[str, dict], crossed: dict[str, dict], resamples: int, noise: str) -> None:
    """Each counting's fits; then the same runs counted both ways, so that only the counting differs."""
    countings = [counting for counting in COUNTINGS if counting in numbers]
    print(f"\nN_opt ∝ C^a, D_opt ∝ C^b; intervals: 10th to 90th percentile (80%) over {resamples} resamples, "
          f"{noise}; (k/{resamples}): how many gave an exponent. Determined: at least {MIN_SHARE:.0%} gave "
          f"one, and the interval is at most {MAX_WIDTH:g} wide (else: too wide)")
    for counting in countings:
        report_counting(counting, numbers[counting])
    if not crossed:
        return
    print("\nwhat the counting alone does: the same runs, N and C counted both ways (Pearce & Song 2024)")
    print(f"{'runs planned under':<20}{'a, counted as':<16}{'Approach 2':<44}Approach 3")
    for planned in countings:
        for counted_as in COUNTINGS:
            fits = numbers[planned] if counted_as == planned else crossed[planned]
            used = fits["Approach 2"]["used"]
            second = f"{with_interval(fits['Approach 2'], 'a')}, {used} budget{'s' * (used != 1)}"
            print(f"{planned:<20}{counted_as:<16}{second:<44}{with_interval(fits['Approach 3'], 'a')}")
            for budget, problem in fits["Approach 2"]["flagged"].items():
                print(f"{'':<36}Approach 2 left out C = {budget:.3g}: {problem}")
        shared = crossed[planned].get("shared", {})
        if shared:
            print(f"{planned:<20}on the {len(shared['budgets'])} budgets both countings can use "
                  f"({', '.join(f'{b:.3g}' for b in shared['budgets'])}), Approach 2: "
                  + "; ".join(f"{c} {with_interval(shared[c], 'a')}" for c in COUNTINGS))


def noise_of(rows: list[dict]) -> tuple[list[tuple[float, np.ndarray]], dict[str, list[float]]]:
    """Each point trained with several seeds: its tokens D and its seeds' deviations in ln L
    (bootstrap.seed_deviations), and its losses, by the name of its SEED run; in the same order."""
    groups: dict[str, list[float]] = {}
    tokens: dict[str, float] = {}
    repeated = {row["name"].rsplit("_seed", 1)[0] for row in rows if row.get("repeat")}
    for row in rows:
        point = row["name"].rsplit("_seed", 1)[0] if row.get("repeat") else row["name"]
        if point in repeated:
            groups.setdefault(point, []).append(float(row["val_loss"]))
            tokens[point] = float(row["tokens"])  # every seed of a point reads the same D
    groups = {point: losses for point, losses in groups.items() if len(losses) > 1}
    measured = [(tokens[point], seed_deviations([np.array(losses)])) for point, losses in groups.items()]
    return measured, groups


def noise_for(sweep: Sweep, measured: list[tuple[float, np.ndarray]]) -> Noise:
    """Each run's pool of deviations from the seeds at the nearest run lengths; without seeds, the Approach 3
    fit's residuals for every run."""
    return noise_by_length(sweep.d, measured) if measured else residuals(sweep)


def seed_spread(rows: list[dict], counting: str, repeated: dict[str, list[float]]
                ) -> dict[tuple[float, float], list[float]]:
    """The repeated points of one counting as the IsoFLOP figure places them: (budget, N) -> the losses."""
    by_name, n_key = {row["name"]: row for row in rows}, COUNTING_COLUMNS[counting][0]
    return {(float(by_name[name]["budget"]), float(by_name[name][n_key])): losses
            for name, losses in repeated.items() if name in by_name and by_name[name]["counting"] == counting}


def residuals(sweep: Sweep) -> np.ndarray:
    """ln L minus the Approach 3 surface's prediction, run by run, scaled by √(n / (n - 5)) for the five
    constants fitted: the noise when no seeds were repeated; empty when there is no surface to subtract."""
    residual = surface_residuals(sweep)
    if not np.all(np.isfinite(residual)) or residual.size <= 5:
        return np.array([])
    return residual * np.sqrt(residual.size / (residual.size - 5))


def baselines_of(out_dir: Path) -> dict[str, float]:
    """The unigram and bigram losses train.py measured on the same validation tokens, when it left them."""
    summary = out_dir / "summary.json"
    if not summary.is_file():
        return {}
    found = json.loads(summary.read_text(encoding="utf-8")).get("baselines", {})
    return {f"{name} model": float(found[name]) for name in ("bigram", "unigram") if name in found}


def print_noise(measured: list[tuple[float, np.ndarray]], repeated: dict[str, list[float]]) -> str:
    """The seeds' spread, point by point; what the bootstrap says it moved each loss by."""
    if not measured:
        return "each loss moved by one of the Approach 3 fit's residuals (no seeds repeated)"
    deviations = np.concatenate([deviation for _, deviation in measured])
    seeds = max(map(len, repeated.values()))
    print(f"noise: {len(measured)} points trained with {seeds} seeds; one run's ln L scatters by "
          f"{np.std(deviations):.3f} (standard deviation, from the deviations from each point's mean scaled "
          f"by sqrt(k/(k-1))), the largest deviation {np.abs(deviations).max():.3f}")
    for (tokens, deviation), (point, losses) in zip(measured, repeated.items(), strict=True):
        print(f"  {point:<24}D {tokens:>11,.0f}" + "".join(f"{loss:8.3f}" for loss in losses)
              + f"   highest - lowest {max(losses) - min(losses):.3f}, sd {np.std(deviation):.3f}")
    return (f"each loss moved by one of the seed deviations of the {min(NEAREST_POINTS, len(measured))} "
            "repeated points nearest its run length")


def main(argv: list[str] | None = None) -> dict:
    """Fit each counting of the sweep in OUT_DIR/results.jsonl, print the report, predict a larger budget,
    write the plots beside it, and with PLAN_MINUTES plan a run; with --DATA=chinchilla, fit Chinchilla's
    own runs instead. Returns the numbers: one dict per counting fitted, keyed by the counting, the same
    runs counted the other way ("crossed"), the prediction, and the plots (and the plan)."""
    cfg = load_config(config, argv)
    out_dir = Path(cfg.OUT_DIR)
    if cfg.DATA == "chinchilla":
        return chinchilla_runs.fit(cfg.RESAMPLES, out_dir)
    if cfg.DATA != "sweep":
        raise CourseError(f"error: unknown --DATA={cfg.DATA}; choose sweep (your runs in OUT_DIR) or "
                          "chinchilla")
    results = out_dir / "results.jsonl"
    rows = read_results(results, fields=SWEEP_FIELDS)
    diverged = [row["name"] for row in rows if not np.isfinite(float(row["val_loss"]))]
    if diverged:
        print(f"left out {len(diverged)} runs whose loss is not a number: {', '.join(diverged)}")
        rows = [row for row in rows if np.isfinite(float(row["val_loss"]))]
    sweeps = {}
    for counting in countings_in(rows):
        sweep = Sweep.from_rows(rows, counting)
        if len(sweep.budgets()) < 2:
            print(f"left out the {counting} counting: its runs are all at C = {sweep.budget[0]:.3g}, and an "
                  "exponent needs runs at two budgets at least")
        else:
            sweeps[counting] = sweep
    if not sweeps:
        raise CourseError(f"error: the runs in {results} of each counting have one budget; an exponent needs "
                          "runs at two budgets at least")

    measured, repeated = noise_of(rows)
    noise = print_noise(measured, repeated)
    fits, crossed, crossed_surfaces, pools = {}, {}, {}, {}
    for counting, sweep in sweeps.items():
        pools[counting] = noise_for(sweep, measured)
        fits[counting] = fit_sweep(sweep, pools[counting], cfg.RESAMPLES)
        fits[counting][0]["one layer"] = one_depth(rows, counting, pools[counting], cfg.RESAMPLES)
        other = next(name for name in COUNTINGS if name != counting)
        counted = Sweep.from_rows(rows, counting, counted_as=other)
        scatter = noise_for(counted, measured)
        crossed[counting], _, crossed_surfaces[counting] = fit_sweep(counted, scatter, cfg.RESAMPLES)
        crossed[counting]["shared"] = on_shared_budgets(sweep, counted, scatter, cfg.RESAMPLES)
    numbers = {counting: fit[0] for counting, fit in fits.items()}
    report(numbers, crossed, cfg.RESAMPLES, noise)
    numbers["crossed"] = crossed
    if "kaplan" in sweeps:
        numbers["prediction"] = prediction.prediction(sweeps["kaplan"], cfg.PLAN_AHEAD, pools["kaplan"],
                                                      cfg.RESAMPLES)
        numbers["measured"] = prediction.report(numbers["prediction"], out_dir, cfg.RESAMPLES)
    allocations = {counting: fit[1] for counting, fit in fits.items()}
    surfaces = {counting: fit[2] for counting, fit in fits.items()}
    numbers["plots"] = [
        *(plot_isoflops(sweep, out_dir / f"isoflops_{counting}.png", seed_spread(rows, counting, repeated),
                        [approach2(again) for again in resampled(sweep, pools[counting], cfg.RESAMPLES)],
                        baselines_of(out_dir))
          for counting, sweep in sweeps.items()),
        plot_allocation(allocations, surfaces, out_dir / "allocation.png"),
        plot_parametric(sweeps, surfaces, out_dir / "parametric.png"),
        plot_loss_vs_compute(sweeps, surfaces, out_dir / "loss_vs_compute.png"),
    ]
    print("\nplots: " + ", ".join(str(path) for path in numbers["plots"]))
    if cfg.PLAN_MINUTES > 0:  # "ours" counts every parameter, as the planner's closed form does: the
        # chinchilla counting's fit, or else the kaplan runs' counted that way
        ours = surfaces.get("chinchilla") or crossed_surfaces["kaplan"]
        numbers["plan"] = plan(cfg, ours, cfg.DEVICE, allocations.get("kaplan", {}).get("Approach 2"))
    return numbers


if __name__ == "__main__":
    run_main(main)
