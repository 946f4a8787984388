"""Scaling laws fitted to a sweep of models you trained, under both ways the papers count N and C, side by
side; and a plan that turns minutes into a model size.

    uv run python phase1_foundation/project4_scaling/laws.py                   # after train.py's sweep
    uv run python phase1_foundation/project4_scaling/laws.py --OUT_DIR=<a sweep's folder>
    uv run python phase1_foundation/project4_scaling/laws.py --PLAN_MINUTES=10  # and plan a 10-minute run

train.py trains a sweep: at each of a few compute budgets C several model sizes N, each on the D tokens the
budget buys, and writes one line per finished run. It does so twice, once per counting (results.COUNTINGS):

- kaplan: N is the non-embedding count and C = 6ND (Kaplan et al. 2020, §2.1), so D = C / (6N);
- chinchilla: N counts every parameter and C every matmul (Hoffmann et al. 2022, App. F), so D = C / (App. F
  FLOPs per token of the shape).

At the sizes a laptop trains, the embeddings are a large share of all parameters and the attention over the
context a large share of the FLOPs, so the two countings can give different exponents for the same kind of
runs: one of the reasons proposed for the papers' disagreement (README). Nothing here trains; it asks each
counting's sweep the two papers' questions, each answered in a file named after its paper:

- kaplan.py: how does the loss fall with N alone (Eq. 1.1), and with N and D together (Eq. 1.5)?
- chinchilla.py: how should a budget be split between N and D? Three ways, as in the paper: the run with the
  lowest loss at each budget (Approach 1), the minimum of a parabola through each budget's losses
  (Approach 2), and a loss surface L(N, D) = E + A/N^α + B/D^β fitted to every run (Approach 3). Each gives
  N_opt ∝ C^a and D_opt ∝ C^b. The papers disagree, Kaplan a ≈ 0.73 against Chinchilla's a ≈ 0.5, and a
  bootstrap interval (bootstrap.py) beside each exponent says how much a sweep this small can tell the two
  apart.

Then planning (planner.py): ChinchillaPlanner splits a budget by Chinchilla's closed form, from the paper's
constants, a replication's, or the kaplan counting's own fit; plan_for_minutes starts from the minutes you
can spend. The figures are law_plots.py's.
"""

from pathlib import Path

import numpy as np

from common.config import load_config
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.bootstrap import bootstrap
from phase1_foundation.project4_scaling.chinchilla import (
    PAPER_EXPONENTS,
    Allocation,
    LossSurface,
    approach1,
    approach2,
    fit_parametric,
)
from phase1_foundation.project4_scaling.kaplan import KAPLAN_ALPHA_N, fit_kaplan_laws
from phase1_foundation.project4_scaling.law_plots import (
    plot_allocation,
    plot_isoflops,
    plot_loss_vs_compute,
    plot_parametric,
)
from phase1_foundation.project4_scaling.planner import PUBLISHED_SURFACES, plan
from phase1_foundation.project4_scaling.results import (
    COUNTINGS,
    SWEEP_FIELDS,
    Sweep,
    countings_in,
    read_results,
)

APPROACHES = ("Approach 1", "Approach 2", "Approach 3")


def fit_sweep(sweep: Sweep, resamples: int) -> tuple[dict, dict[str, Allocation], LossSurface]:
    """Every fit of one counting's sweep: the numbers (each approach's exponents with a bootstrap interval,
    the fitted surface, and under the kaplan counting Kaplan's laws), Approaches 1 and 2's points, and the
    surface."""
    surface = fit_parametric(sweep.n, sweep.d, sweep.loss)
    allocations = {"Approach 1": approach1(sweep), "Approach 2": approach2(sweep)}
    numbers = {name: fit.exponents() for name, fit in allocations.items()}
    numbers["Approach 2"] |= {"flagged": allocations["Approach 2"].flagged,
                              "used": len(allocations["Approach 2"].compute)}
    # Under the chinchilla counting too, a = β/(α+β) and b = α/(α+β): that is how the paper converts its fit
    # (§3.3), by the closed form for C = 6ND, although its N counts every parameter and its C is App. F's.
    numbers["Approach 3"] = surface.exponents() | {"E": surface.E, "A": surface.A, "B": surface.B}
    estimates = {
        "Approach 1": lambda s: approach1(s).exponents(),
        "Approach 2": lambda s: approach2(s).exponents(),
        "Approach 3": lambda s: fit_parametric(s.n, s.d, s.loss, start=surface).exponents(),
    }
    for name, estimate in estimates.items():
        numbers[name]["interval"] = bootstrap(sweep, estimate, resamples)
    numbers["runs"], numbers["budgets"] = len(sweep.loss), len(sweep.budgets())
    if sweep.counting == "kaplan":  # Kaplan's laws are in Kaplan's N: non-embedding
        numbers |= fit_kaplan_laws(sweep)
    return numbers, allocations, surface


def _with_interval(fit: dict, key: str) -> str:
    """'0.45 [0.41, 0.49]': the estimate and its bootstrap interval, or why there is none."""
    if not np.isfinite(fit[key]):
        return "no fit"
    low, high = fit["interval"].get(key, (np.nan, np.nan))
    return f"{fit[key]:.2f} [{low:.2f}, {high:.2f}]"


def report_counting(counting: str, numbers: dict) -> None:
    """One counting's exponents beside the papers', the budgets Approach 2 left out, the fitted surface
    beside Chinchilla's, and under the kaplan counting α_N beside Kaplan's."""
    print(f"\n{counting} counting ({COUNTINGS[counting]}): {numbers['runs']} runs at {numbers['budgets']} "
          "budgets")
    print(f"{'':<12}{'a':<20}{'b':<20}paper a / b")
    for name in APPROACHES:
        fit, (paper_a, paper_b) = numbers[name], PAPER_EXPONENTS[f"Chinchilla {name}"]
        print(f"{name:<12}{_with_interval(fit, 'a'):<20}{_with_interval(fit, 'b'):<20}"
              f"{paper_a:.2f} / {paper_b:.2f} (Chinchilla)")
    kaplan_a, kaplan_b = PAPER_EXPONENTS["Kaplan"]
    print(f"{'':<52}{kaplan_a:.2f} / {kaplan_b:.2f} (Kaplan)")
    second = numbers["Approach 2"]
    print(f"Approach 2: from {second['used']} budget{'' if second['used'] == 1 else 's'} with interior minima"
          f"{' (two needed for an exponent)' if second['used'] < 2 else ''}")
    for budget, problem in second["flagged"].items():
        print(f"Approach 2 left out C = {budget:.3g}: {problem}")
    if counting == "chinchilla":
        print("Approach 3: a = beta/(alpha+beta), b = alpha/(alpha+beta), as the paper converts its fit (its "
              "closed form assumes C = 6ND)")
    ours, paper = numbers["Approach 3"], PUBLISHED_SURFACES["paper-rounded"]
    print(f"Approach 3, L = E + A/N^alpha + B/D^beta{'E':>8}{'A':>10}{'B':>10}{'alpha':>8}{'beta':>8}")
    print(f"{'ours':<39}{ours['E']:>8.3f}{ours['A']:>10.4g}{ours['B']:>10.4g}{ours['alpha']:>8.3f}"
          f"{ours['beta']:>8.3f}   alpha {_with_interval(ours, 'alpha')}, "
          f"beta {_with_interval(ours, 'beta')}")
    print(f"{'Chinchilla':<39}{paper.E:>8.3f}{paper.A:>10.4g}{paper.B:>10.4g}{paper.alpha:>8.3f}"
          f"{paper.beta:>8.3f}")
    if "Kaplan L(N)" in numbers:
        print(f"Kaplan alpha_N: {numbers['Kaplan L(N)']['alpha_n']:.3f} from L(N) over each size's best run, "
              f"{numbers['Kaplan L(N, D)']['alpha_n']:.3f} from L(N, D) over every run "
              f"(paper {KAPLAN_ALPHA_N})")


def report(numbers: dict[str, dict], resamples: int) -> None:
    """Each counting's fits, then, when the sweep has both, a by approach under each side by side."""
    countings = [counting for counting in COUNTINGS if counting in numbers]
    print(f"\nN_opt ∝ C^a, D_opt ∝ C^b; intervals: 10th to 90th percentile of {resamples} bootstrap "
          "resamples")
    for counting in countings:
        report_counting(counting, numbers[counting])
    if len(countings) < 2:
        return
    print(f"\n{'a by approach':<14}" + "".join(f"{f'{c} counting':<22}" for c in countings) + "paper")
    for name in APPROACHES:
        print(f"{name:<14}" + "".join(f"{_with_interval(numbers[c][name], 'a'):<22}" for c in countings)
              + f"{PAPER_EXPONENTS[f'Chinchilla {name}'][0]:.2f} (Chinchilla)")
    print(f"{'':<14}{'':<22}{'':<22}{PAPER_EXPONENTS['Kaplan'][0]:.2f} (Kaplan)")


def main(argv: list[str] | None = None) -> dict:
    """Fit each counting of the sweep in OUT_DIR/results.jsonl, print the report, write the plots beside it,
    and with PLAN_MINUTES plan a run. Returns the numbers: one dict per counting fitted, keyed by the
    counting, and the plots (and the plan)."""
    cfg = load_config(config, argv)
    out_dir = Path(cfg.OUT_DIR)
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
        raise SystemExit(f"error: the runs in {results} of each counting have one budget; an exponent needs "
                         "runs at two budgets at least")

    fits = {counting: fit_sweep(sweep, cfg.RESAMPLES) for counting, sweep in sweeps.items()}
    numbers = {counting: fit[0] for counting, fit in fits.items()}
    report(numbers, cfg.RESAMPLES)
    allocations = {counting: fit[1] for counting, fit in fits.items()}
    surfaces = {counting: fit[2] for counting, fit in fits.items()}
    numbers["plots"] = [
        *(plot_isoflops(sweep, out_dir / f"isoflops_{counting}.png") for counting, sweep in sweeps.items()),
        plot_allocation(allocations, surfaces, out_dir / "allocation.png"),
        plot_parametric(sweeps, surfaces, out_dir / "parametric.png"),
        plot_loss_vs_compute(sweeps, surfaces, out_dir / "loss_vs_compute.png"),
    ]
    print("\nplots: " + ", ".join(str(path) for path in numbers["plots"]))
    if cfg.PLAN_MINUTES > 0:  # "ours" is the kaplan counting's surface: the planner counts 6N, as Kaplan
        numbers["plan"] = plan(cfg, surfaces.get("kaplan"), cfg.DEVICE)
    return numbers


if __name__ == "__main__":
    main()
