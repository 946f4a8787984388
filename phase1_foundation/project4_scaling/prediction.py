"""Predict, then train: what a scaling law is for.

A law fitted to cheap runs says, before a larger run is paid for, which model size it should train and what
loss that model will reach. Here the law is the sweep's own, under Kaplan's counting, fitted as Approach 2
does: each budget's IsoFLOP parabola gives its best size N_opt(C) and the loss at that size L_opt(C); both
are straight lines in log-log, N_opt ∝ C^a (Chinchilla §3.2) and L_opt ∝ C^-γ (Kaplan's L(C_min), Eq. 1.3),
and both are carried to a budget PLAN_AHEAD times the sweep's largest. The bootstrap moves every loss by the
seeds' noise and predicts again: the interval. laws.py prints the prediction and the train.py command that
trains an IsoFLOP profile at that budget; once it has run, laws.py sets what the runs measured beside it.
"""

from pathlib import Path

import numpy as np

from phase1_foundation.project4_scaling.bootstrap import MIN_SHARE, bootstrap
from phase1_foundation.project4_scaling.chinchilla import isoflop_minimum, isoflop_parabola
from phase1_foundation.project4_scaling.results import SWEEP_FIELDS, Sweep, read_results

FOLDER = "prediction"  # the predicted budget's runs: OUT_DIR/prediction/results.jsonl


def minima(sweep: Sweep) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(C, N_opt, L_opt) of each budget whose parabola has its lowest point inside the sizes trained: where
    that point lies, in N and in loss."""
    points = []
    for budget in sweep.budgets():
        at = sweep.budget == budget
        n_opt, problem = isoflop_minimum(sweep.n[at], sweep.loss[at])
        if problem is None:
            points.append((budget, n_opt, np.polyval(isoflop_parabola(sweep.n[at], sweep.loss[at]),
                                                     np.log(n_opt))))
    return np.array(points, dtype=float).reshape(-1, 3).T


def predict(sweep: Sweep, budget: float) -> dict[str, float]:
    """N_opt and L_opt at `budget`, from the lines through every budget's minimum; NaN when a budget has no
    minimum inside its sizes (a prediction from fewer budgets is another measurement)."""
    compute, n_opt, loss = minima(sweep)
    if len(compute) < max(2, len(sweep.budgets())):
        return {"n_opt": np.nan, "loss": np.nan, "a": np.nan, "gamma": np.nan}
    a, log_n = np.polyfit(np.log(compute), np.log(n_opt), 1)
    slope, log_loss = np.polyfit(np.log(compute), np.log(loss), 1)  # PAPER: Kaplan Eq. 1.3, L(C_min)
    return {"n_opt": float(np.exp(log_n + a * np.log(budget))),
            "loss": float(np.exp(log_loss + slope * np.log(budget))), "a": float(a), "gamma": float(-slope)}


def prediction(sweep: Sweep, ahead: float, deviations, resamples: int) -> dict:
    """The prediction at `ahead` times the sweep's largest budget, with its bootstrap intervals."""
    budget = float(f"{ahead * sweep.budgets().max():.3g}")
    point = predict(sweep, budget)
    intervals = bootstrap(sweep, lambda s: predict(s, budget), deviations, resamples, max_width=np.inf)
    return {"budget": budget, **point, "interval": intervals}


def measured(path: Path, budget: float) -> dict | None:
    """What the runs at the predicted budget measured: their parabola's lowest point and their best run; None
    before they have run."""
    if not path.is_file():
        return None
    rows = [row for row in read_results(path, fields=SWEEP_FIELDS) if row["counting"] == "kaplan"
            and float(row["budget"]) == budget and np.isfinite(float(row["val_loss"]))]
    if not rows:
        return None
    sweep = Sweep.from_rows(rows, "kaplan")
    best = int(np.argmin(sweep.loss))
    n_opt, problem = isoflop_minimum(sweep.n, sweep.loss)
    loss = np.polyval(isoflop_parabola(sweep.n, sweep.loss), np.log(n_opt)) if problem is None else np.nan
    return {"runs": len(rows), "n_opt": n_opt, "loss": float(loss), "problem": problem,
            "best_n": float(sweep.n[best]), "best_loss": float(sweep.loss[best])}


def describe(predicted: dict, resamples: int) -> None:
    """Print the prediction and its intervals, and say when too few refits gave one for the interval to be
    more than the interval of those that did."""
    budget, interval = predicted["budget"], predicted["interval"]
    kept = interval["n_opt"].succeeded
    print(f"\npredict, then train: the kaplan counting's minima carried to C = {budget:.3g} "
          f"(N_opt ∝ C^{predicted['a']:.2f}, L_opt ∝ C^-{predicted['gamma']:.3f}); 80% intervals over "
          f"{resamples} resamples of the measured noise, {kept}/{resamples} of which kept every budget's "
          "minimum" + ("" if interval["n_opt"].enough else f" (under {MIN_SHARE:.0%}: the intervals are of "
                                                           f"those {kept} alone)"))
    if not np.isfinite(predicted["n_opt"]):
        print("  no prediction: a budget's parabola has no minimum inside its sizes")
        return
    print(f"  predicted: N_opt {predicted['n_opt']:,.0f} [{interval['n_opt'].low:,.0f}, "
          f"{interval['n_opt'].high:,.0f}] non-embedding parameters, loss at it {predicted['loss']:.3f} "
          f"[{interval['loss'].low:.3f}, {interval['loss'].high:.3f}]")


def compare(predicted: dict, out_dir: Path) -> dict | None:
    """Print what the runs at the predicted budget measured, or, before they have run, the command that
    trains them."""
    budget, folder = predicted["budget"], out_dir / FOLDER
    result = measured(folder / "results.jsonl", budget)
    if result is None:
        print(f"  train it (every shape of SHAPES the budget can feed):\n    uv run python "
              f"phase1_foundation/project4_scaling/train.py --COUNTINGS=kaplan --BUDGETS={budget:.3g} "
              f"--OUT_DIR={folder}\n  then run laws.py again to see the prediction beside the runs")
        return None
    where = (f"N_opt {result['n_opt']:,.0f}, loss at it {result['loss']:.3f}" if result["problem"] is None
             else f"no parabola minimum ({result['problem']})")
    print(f"  measured ({result['runs']} runs in {folder}): {where}; best run N {result['best_n']:,.0f}, "
          f"loss {result['best_loss']:.3f}")
    return result


def report(predicted: dict, out_dir: Path, resamples: int) -> dict | None:
    """Print the prediction, and the command that tests it or what that command measured."""
    describe(predicted, resamples)
    return compare(predicted, out_dir)
