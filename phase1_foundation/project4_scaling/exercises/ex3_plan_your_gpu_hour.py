"""Exercise 3: plan an hour on a GPU. How large a model, on how many tokens, and how sure can you be?

An hour on a GPU is a compute budget: C = seconds x the GPU's peak FLOP/s x the share of the peak a training
run keeps busy (model FLOPs utilisation, MFU). Chinchilla's closed form (planner.ChinchillaPlanner, Eq. 4)
splits C into N_opt parameters and D_opt tokens. Plan the hour with each published set of constants
(planner.PUBLISHED_SURFACES: the paper's printed fit, the same fit unrounded, Epoch AI's 2024 refit) and
with your own, fitted to your sweep's results (chinchilla.fit_parametric on the runs in
OUT_DIR/results.jsonl, N counted as the constants count it: every parameter); for each, the shape
planner.model_shape gives (d_model / n_layer = PLAN_ASPECT_RATIO, heads of HEAD_SIZE, every parameter
counted, GPT-2's vocabulary and context by default: --VOCAB_SIZE, --CONTEXT) and the minutes that shape
takes on D_opt tokens at the same rate.

    uv run python phase1_foundation/project4_scaling/exercises/ex3_plan_your_gpu_hour.py
    uv run python phase1_foundation/project4_scaling/exercises/ex3_plan_your_gpu_hour.py --GPU=A100
    uv run python phase1_foundation/project4_scaling/exercises/ex3_plan_your_gpu_hour.py "--GPU=RTX 4090" \
        --PLAN_MINUTES=600
    uv run python phase1_foundation/project4_scaling/exercises/ex3_plan_your_gpu_hour.py --PEAK_TFLOPS=50 \
        --MFU=0.2

--GPU names a card of common/training/metrics.py's table of dense bf16 peaks (NVIDIA's datasheets and
whitepapers, never the 2x "with sparsity" figures: H100 989.5 TFLOP/s, A100 312, RTX 4090 165.2, ...);
--PEAK_TFLOPS gives any other device's peak. --MFU=0.3 is an ASSUMPTION, planner.plan_for_minutes' default,
not a measurement: the large runs in PaLM's Table 3 (Chowdhery et al. 2022) reached 21% (GPT-3) to 46% (PaLM),
and chapter 2's train.py shows the MFU of yours in its progress bar. --PLAN_MINUTES (60 here) is the time;
OUT_DIR is the sweep whose fit is planned with (default: the chapter's). The shapes have heads of the
chapter's HEAD_SIZE=8; --HEAD_SIZE=64 gives GPT-2's. It trains nothing. After the run's numbers the script
prints what the course measured.

Predict before you run it: in an hour of an H100 at 30% MFU, how many parameters will the paper's constants
ask for: about 1M, 100M or 10B, and on about how many tokens per parameter? At GPT-3's budget the refit
asks for the largest model of the three published sets (README, "The planner, and what rounding does");
which set will ask for the largest at an H100 hour? And what will the fit of your own sweep, made between
3e10 and 1.2e11 FLOPs (its Chinchilla counting), ask for?
"""

from pathlib import Path

import numpy as np

from common.course.exercises import print_measured
from common.errors import CourseError, run_main
from common.training.config import load_config
from common.training.metrics import PEAK_TFLOPS
from phase1_foundation.project4_scaling import chinchilla, config, planner
from phase1_foundation.project4_scaling.exercises import own_settings
from phase1_foundation.project4_scaling.results import SWEEP_FIELDS, Sweep, read_results

SETTINGS = ["--PLAN_MINUTES=60"]  # your own --NAME=value settings come after this one, so they win
# the exercise's settings; PEAK_TFLOPS 0: from GPU. A model of an hour of a GPU reads subwords: GPT-2's
# vocabulary and context size its tables
OWN = {"GPU": "H100", "PEAK_TFLOPS": 0.0, "MFU": 0.3, "VOCAB_SIZE": 50257, "CONTEXT": 1024}


def main(argv: list[str] | None = None) -> dict:
    own, settings = own_settings(argv, OWN)
    cfg = load_config(config, [*SETTINGS, *settings])
    if own["PEAK_TFLOPS"] <= 0 and own["GPU"] not in PEAK_TFLOPS:
        raise CourseError(f"error: no peak listed for --GPU={own['GPU']}; choose one of "
                          f"{', '.join(PEAK_TFLOPS)}, or pass --PEAK_TFLOPS=<its dense bf16 peak>")
    if cfg.PLAN_MINUTES <= 0 or not 0 < own["MFU"] <= 1:
        raise CourseError("error: --PLAN_MINUTES must be above 0 and --MFU between 0 and 1")
    peak = 1e12 * (own["PEAK_TFLOPS"] if own["PEAK_TFLOPS"] > 0 else PEAK_TFLOPS[own["GPU"]])
    device = f"a {peak / 1e12:g} TFLOP/s device" if own["PEAK_TFLOPS"] > 0 else own["GPU"]

    surfaces = dict(planner.PUBLISHED_SURFACES)
    results = Path(cfg.OUT_DIR) / "results.jsonl"
    budgets = None  # your sweep's budgets
    if results.is_file():
        rows = read_results(results, fields=SWEEP_FIELDS)
        rows = [row for row in rows if np.isfinite(float(row["val_loss"]))]
        planned = "chinchilla" if any(row["counting"] == "chinchilla" for row in rows) else "kaplan"
        runs = Sweep.from_rows(rows, planned, counted_as="chinchilla")  # N as the constants count it
        fit = chinchilla.fit_parametric(runs.n, runs.d, runs.loss)
        if fit.problem:
            print(f"your sweep's Approach 3 fit has no exponents to plan with: {fit.problem}")
        else:
            surfaces["your sweep"] = fit
        budgets = runs.budgets()
    else:
        print(f"no sweep at {results}: the plan uses the published constants only (train.py's sweep adds "
              "your own)")

    plans = {}
    for name, surface in surfaces.items():  # the same C for each, split by its own constants
        split = planner.ChinchillaPlanner(surface)
        compute, n_opt, d_opt = planner.plan_for_minutes(cfg.PLAN_MINUTES, peak, split,
                                                         utilisation=own["MFU"])
        shape = planner.model_shape(n_opt, own["VOCAB_SIZE"], own["CONTEXT"], cfg.PLAN_ASPECT_RATIO,
                                    cfg.HEAD_SIZE)
        n_shape = planner.all_parameters(*shape, own["VOCAB_SIZE"], own["CONTEXT"])
        plans[name] = {"a": surface.a, "n_opt": n_opt, "d_opt": d_opt, "shape": shape, "n_shape": n_shape,
                       "minutes": 6 * n_shape * d_opt / (peak * own["MFU"]) / 60}
    print(f"\n{cfg.PLAN_MINUTES:g} minutes on {device}: {peak:.3g} FLOP/s peak x MFU {own['MFU']:g} "
          f"(assumed) = C {compute:.3g} FLOPs")
    print(f"{'constants':<17}{'a':>6}{'N_opt':>11}{'D_opt':>11}{'D/N':>9}{'shape':>11}{'its N':>11}"
          f"{'minutes':>9}")
    for name, plan in plans.items():
        layers, width = plan["shape"]
        print(f"{name:<17}{plan['a']:>6.2f}{plan['n_opt']:>11.3g}{plan['d_opt']:>11.3g}"
              f"{plan['d_opt'] / plan['n_opt']:>9.3g}{f'{layers}x{width}':>11}{plan['n_shape']:>11.3g}"
              f"{plan['minutes']:>9.1f}")

    published = [plans[name]["n_opt"] for name in planner.PUBLISHED_SURFACES]
    print(f"\nthe published constants alone disagree on N_opt by {max(published) / min(published):.2f}x "
          f"({min(published):.3g} to {max(published):.3g} parameters) for the same hour")
    if "your sweep" in plans:
        ours, paper = plans["your sweep"], plans["paper-rounded"]
        fitted, beyond = np.log10(budgets[-1] / budgets[0]), np.log10(compute / budgets[-1])
        print(f"your sweep's fit (a = {ours['a']:.2f}) asks for {ours['n_opt'] / paper['n_opt']:.3g}x the "
              f"paper's N_opt, on {ours['d_opt'] / ours['n_opt']:.3g} tokens per parameter; its largest "
              f"budget was {budgets[-1]:.3g} FLOPs: exponents fitted over {fitted:.1f} decades of compute, "
              f"extrapolated {beyond:.1f} decades beyond them. A guess, not a plan")
    print_measured(WHAT_WE_MEASURED)
    return {"compute": compute, "peak_flops": peak, "plans": plans}


# The answer, kept at the end of the file: read it after your run.
WHAT_WE_MEASURED = """
The default command (4 s on a 2-core CPU, with the chapter's cpu sweep in checkpoints/project4): an hour of an
H100 at 30% is C = 1.07e18 FLOPs. The paper's printed constants spend it on N_opt = 83M parameters and D_opt =
2.1B tokens (26 per parameter; shape 17x544, 88M parameters with GPT-2's tables), the unrounded ones on 98M
and 1.8B (19 per parameter; here the largest of the three, where at GPT-3's budget the refit asks for the
largest), Besiroglu et al.'s refit on 83M and 2.1B: the three agree within 17% here, although their exponents
differ (a = 0.45, 0.46, 0.51), because their lines happen to cross near this budget; they part further out (at
GPT-3's 3.14e23 FLOPs, 24.5B against 53.0B parameters: see planner.ChinchillaPlanner). Your own sweep's fit
says something absurd: its Approach 3 surface (every parameter counted) has a = 0.14, a fit only 65 of
laws.py's 100 bootstrap refits could identify at all, and it asks for 47k parameters on 3.7e12 tokens. Its
exponents were fitted over 0.6 decades of compute (3e10 to 1.2e11 FLOPs) and are extrapolated 6.9 decades
beyond them, from models of a few thousand parameters reading characters; at that distance a change of 0.1 in
a moves N_opt by a factor of 10^0.69 = 4.9. A sweep's fit is a plan only near the budgets it was measured at:
plan with constants fitted at scales near the run, and use your own sweep to check them.
"""


if __name__ == "__main__":
    run_main(main)
