"""The laws and laws.py: the planner against Chinchilla's closed form and the papers' numbers, Kaplan's laws,
each of Chinchilla's three approaches recovering a known loss surface from noisy synthetic sweeps under both
countings (kaplan: non-embedding N, C = 6ND; chinchilla: every parameter, C = App. F FLOPs), and the script
end to end on a results file holding both."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import check_grad, minimize_scalar

from common.errors import CourseError
from phase1_foundation.project4_scaling import (
    chinchilla,
    chinchilla_runs,
    kaplan,
    laws,
    pearce_song,
    planner,
    prediction,
)
from phase1_foundation.project4_scaling.bootstrap import (
    MAX_WIDTH,
    Interval,
    bootstrap,
    noise_by_length,
    pools_of,
    resampled,
    seed_deviations,
)
from phase1_foundation.project4_scaling.chinchilla import LossSurface, approach1, approach2, fit_parametric
from phase1_foundation.project4_scaling.model import (
    GPTConfig,
    flops_per_token,
    non_embedding_parameters,
    total_parameters,
)
from phase1_foundation.project4_scaling.planner import ChinchillaPlanner
from phase1_foundation.project4_scaling.results import SWEEP_FIELDS, Sweep, read_results, write_results

TRUE = LossSurface(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)  # the sweeps' truth: a = 0.452
BUDGETS = np.geomspace(1e17, 1e21, 5)


def synthetic_sweep(noise: float, seed: int = 0, budgets=BUDGETS, sizes: int = 7, spacing: float = 2.0,
                    centre_shift: float = 1.0) -> Sweep:
    """A kaplan-counting IsoFLOP sweep of TRUE: at each budget, `sizes` models a factor `spacing` apart around
    the true N_opt times `centre_shift`, each on D = C / 6N tokens, with multiplicative noise on the loss."""
    rng = np.random.default_rng(seed)
    n_opt, _ = ChinchillaPlanner(TRUE).get_optimal_params_and_tokens(np.asarray(budgets))
    steps = spacing ** (np.arange(sizes) - (sizes - 1) / 2)
    n = (np.outer(n_opt, steps) * centre_shift).ravel()
    budget = np.repeat(budgets, sizes)
    d = budget / (6 * n)
    loss = TRUE.loss(n, d) * np.exp(noise * rng.standard_normal(n.size))
    return Sweep("kaplan", budget, n, d, 6 * n * d, loss)


# ---- runs of real shapes, as train.py writes them ----------------------------------------------------------

VOCAB, CONTEXT, HEAD_SIZE = 500, 128, 8  # a vocabulary of characters like wiki-sample's 501; the chapter's


def row(n_layer: int, d_model: int, counting: str, budget: float, surface: LossSurface,
        loss_n: str = "params", vocab: int = VOCAB, head_size: int = HEAD_SIZE, noise: float = 0.0,
        rng=None) -> dict:
    """One run's row of results.jsonl, planned under `counting` at `budget`: D = C / (6N) for kaplan, D = C /
    (App. F FLOPs per token) for chinchilla. Its loss is `surface` at N = the row's `loss_n` ("params" or
    "params_total") and D, times exp(noise x a standard normal)."""
    config = GPTConfig(vocab_size=vocab, block_size=CONTEXT, n_layer=n_layer, n_head=d_model // head_size,
                       n_embd=d_model)
    params = non_embedding_parameters(n_layer, d_model)
    params_total = params + (vocab + CONTEXT) * d_model  # the token and position tables (tied head)
    per_token = flops_per_token(config, "chinchilla")  # App. F, every matmul
    tokens = budget / (6 * params) if counting == "kaplan" else budget / per_token
    counts = {"params": params, "params_total": params_total}
    loss = float(surface.loss(counts[loss_n], tokens))
    if noise:
        loss *= np.exp(noise * rng.standard_normal())
    return {"name": f"{counting}_{budget:.2g}_{n_layer}x{d_model}", "counting": counting, "budget": budget,
            "params": params, "params_total": params_total, "tokens": tokens, "flops": 6 * params * tokens,
            "flops_chinchilla": per_token * tokens, "val_loss": loss, "epochs": 1.0, "wall_s": 1.0,
            "tokens_per_s": 1.0, "n_layer": n_layer, "d_model": d_model, "steps": 1, "peak_lr": 1e-3,
            "settings": {}}


# ---- the planner -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("constants", list(planner.PUBLISHED_SURFACES))
@pytest.mark.parametrize("compute", [2.21e19, 3.14e23])
def test_the_closed_form_is_the_minimum_of_the_surface_on_the_isoflop_line(constants, compute):
    plans = ChinchillaPlanner(constants)
    along = minimize_scalar(lambda x: plans.surface.loss(np.exp(x), compute / (6 * np.exp(x))),
                            bounds=(10, 40), method="bounded", options={"xatol": 1e-10})
    n_opt, d_opt = plans.get_optimal_params_and_tokens(compute)
    assert n_opt == pytest.approx(np.exp(along.x), rel=1e-6)
    assert 6 * n_opt * d_opt == pytest.approx(compute, rel=1e-12)


@pytest.mark.parametrize("constants, compute, params, tokens", [
    ("paper-rounded", 3.14e23, "24.47B", "2.138T"),  # not the 15B / 3.5T sometimes quoted
    ("paper-unrounded", 3.14e23, "30.6B", "1.71T"),
    ("epoch-2024", 3.14e23, "53.0B", "0.99T"),
    ("paper-rounded", 2.21e19, "326M", "11.3B"),
    ("paper-unrounded", 2.21e19, "389M", "9.5B"),  # Chinchilla Table A3: 400M, 9.2B
])
def test_the_planner_gives_the_papers_numbers(constants, compute, params, tokens):
    def rounded(count: float, like: str) -> str:
        unit = {"M": 1e6, "B": 1e9, "T": 1e12}[like[-1]]
        decimals = len(like.split(".")[1]) - 1 if "." in like else 0
        return f"{count / unit:.{decimals}f}{like[-1]}"

    n_opt, d_opt = ChinchillaPlanner(constants).get_optimal_params_and_tokens(compute)
    assert (rounded(n_opt, params), rounded(d_opt, tokens)) == (params, tokens)


def test_the_2024_refit_gives_about_19_tokens_per_parameter_and_is_the_default():
    n_opt, d_opt = ChinchillaPlanner("epoch-2024").get_optimal_params_and_tokens(3.14e23)
    assert round(d_opt / n_opt) == 19
    assert ChinchillaPlanner().surface == planner.PUBLISHED_SURFACES["epoch-2024"]
    printed = ChinchillaPlanner("paper-rounded").surface
    assert printed.loss(1e9, 2e10) == pytest.approx(1.69 + 406.4 / 1e9**0.34 + 410.7 / 2e10**0.28)
    with pytest.raises(ValueError, match="paper-rounded, paper-unrounded, epoch-2024"):
        ChinchillaPlanner("paper")


def test_planning_from_minutes_and_a_model_shape():
    plans = ChinchillaPlanner(TRUE)
    compute, n_opt, d_opt = planner.plan_for_minutes(10, 1e12, plans, utilisation=0.5)
    assert compute == 10 * 60 * 1e12 * 0.5
    assert (n_opt, d_opt) == plans.get_optimal_params_and_tokens(compute)
    # GPT-2 small, every parameter: its blocks and its tables (50,257 tokens, 1,024 positions)
    gpt2_small = planner.all_parameters(12, 768, 50257, 1024)
    assert planner.model_shape(gpt2_small, vocab_size=50257, block_size=1024) == (12, 768)
    # the tables count: sizing only the blocks to N would plan a larger model
    assert planner.model_shape(12 * 12 * 768**2, vocab_size=50257, block_size=1024) != (12, 768)
    n_layer, d_model = planner.model_shape(3e6, 101, 64, aspect_ratio=32, head_size=16)

    def off(n_layer, d_model):
        return abs(np.log(planner.all_parameters(n_layer, d_model, 101, 64) / 3e6))

    assert d_model % 16 == 0 and off(n_layer, d_model) < np.log(2)
    for neighbour in (n_layer - 1, n_layer + 1):  # no shape of that aspect ratio comes closer
        assert off(neighbour, max(16, round(32 * neighbour / 16) * 16)) >= off(n_layer, d_model)


def test_planning_with_our_constants_needs_a_fit_with_exponents():
    with pytest.raises(CourseError, match="--PLAN_CONSTANTS=ours .* none to give \\(there is no sweep"):
        planner.plan(SimpleNamespace(PLAN_CONSTANTS="ours"), None, "cpu")
    undetermined = LossSurface(1.0, 1e40, 10.0, 30.0, 0.3, problem="alpha = 30, outside the grid")
    with pytest.raises(CourseError, match="none to give \\(alpha = 30, outside the grid\\)"):
        planner.plan(SimpleNamespace(PLAN_CONSTANTS="ours"), undetermined, "cpu")


# ---- Kaplan ------------------------------------------------------------------------------------------------


def kaplan_loss(n, d, alpha_n=kaplan.KAPLAN_ALPHA_N, alpha_d=kaplan.KAPLAN_ALPHA_D, n_c=kaplan.KAPLAN_N_C,
                d_c=kaplan.KAPLAN_D_C):
    """L(N, D) = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D (Kaplan Eq. 1.5), the paper's constants by default."""
    return ((n_c / np.asarray(n)) ** (alpha_n / alpha_d) + d_c / np.asarray(d)) ** alpha_d


def test_kaplans_laws_and_their_fits():
    n = np.geomspace(1e6, 1e10, 9)
    assert kaplan.fit_power_law_in_n(n, (8.8e13 / n) ** 0.076) == pytest.approx((8.8e13, 0.076), rel=1e-6)
    # Eq. 1.5 by hand at one point, and its limit of unlimited data is Eq. 1.1's form
    by_hand = ((6.4e13 / 1e8) ** (0.076 / 0.103) + 1.8e13 / 1e10) ** 0.103
    assert kaplan_loss(1e8, 1e10) == pytest.approx(by_hand)
    assert kaplan_loss(1e8, 1e40) == pytest.approx((6.4e13 / 1e8) ** 0.076)
    truth = {"alpha_n": 0.1, "alpha_d": 0.12, "n_c": 1e12, "d_c": 5e11}
    grid_n, grid_d = (x.ravel() for x in np.meshgrid(np.geomspace(1e6, 1e9, 6), np.geomspace(1e8, 1e11, 6)))
    fit = kaplan.fit_kaplan_loss(grid_n, grid_d, kaplan_loss(grid_n, grid_d, **truth))
    assert fit == pytest.approx(truth, rel=1e-4)
    # on a sweep: L(N, D) over every run; L(N) over each size's best run, here its longest
    sweep = Sweep("kaplan", 6 * grid_n * grid_d, grid_n, grid_d, 6 * grid_n * grid_d,
                  kaplan_loss(grid_n, grid_d, **truth))
    both = kaplan.fit_kaplan_laws(sweep)
    assert both["Kaplan L(N, D)"] == pytest.approx(truth, rel=1e-4)
    n_c, alpha_n = kaplan.fit_power_law_in_n(grid_n[-6:], kaplan_loss(grid_n[-6:], 1e11, **truth))
    assert both["Kaplan L(N)"] == pytest.approx({"n_c": n_c, "alpha_n": alpha_n})


# ---- Chinchilla's three approaches, kaplan counting --------------------------------------------------------


def test_the_huber_gradient_is_the_derivative_of_the_huber_loss():
    s = synthetic_sweep(noise=0.01)
    args = (np.log(s.n), np.log(s.d), np.log(s.loss))
    for params in ([6.0, 6.0, 0.5, 0.34, 0.28], [5.0, 7.0, 0.4, 0.3, 0.3]):  # residuals inside and beyond δ
        def value(p):
            return chinchilla._huber_and_gradient(p, *args)[0]

        def gradient(p):
            return chinchilla._huber_and_gradient(p, *args)[1]

        scale = np.linalg.norm(gradient(np.array(params)))
        assert check_grad(value, gradient, np.array(params), epsilon=1e-7) < 1e-4 * scale


@pytest.fixture(scope="module")
def noisy():
    """A sweep of 5 budgets x 7 sizes with 1% noise, and its Approach 3 fit (the slow one: done once)."""
    sweep = synthetic_sweep(noise=0.01)
    return sweep, fit_parametric(sweep.n, sweep.d, sweep.loss)


def test_approach_3_recovers_the_surface_and_its_exponents(noisy):
    _, fit = noisy
    assert fit.alpha == pytest.approx(TRUE.alpha, abs=0.03)
    assert fit.beta == pytest.approx(TRUE.beta, abs=0.03)
    assert (fit.a, fit.b) == pytest.approx((TRUE.a, TRUE.b), abs=0.03)


def test_approach_2_recovers_the_exponents(noisy):
    fit = approach2(noisy[0])
    assert fit.flagged == {}
    assert (fit.a, fit.b) == pytest.approx((TRUE.a, TRUE.b), abs=0.03)


def test_approach_2s_d_parabola_gives_c_over_6_n_opt_when_every_run_has_d_c_over_6n(noisy):
    """log D = log(C/6) - log N is affine in log N, so the parabola in log D is the one in log N mirrored."""
    fit = approach2(noisy[0])
    assert fit.d_opt == pytest.approx(fit.compute / (6 * fit.n_opt), rel=1e-9)
    assert fit.a + fit.b == pytest.approx(1, abs=1e-9)


def test_approach_1_recovers_the_exponents_when_the_noise_cannot_reorder_neighbours(noisy):
    """At 1% noise the best run of a budget is often a neighbour of the true optimum (in about 70% of seeds
    this misses a by more than 0.03: the bootstrap interval shows it); at 0.1% it is the optimum itself."""
    fit = approach1(synthetic_sweep(noise=0.001))
    assert (fit.a, fit.b) == pytest.approx((TRUE.a, TRUE.b), abs=0.03)
    assert fit.a + fit.b == pytest.approx(1)  # each point spent C = 6 N D
    assert approach1(noisy[0]).compute.size == len(BUDGETS)


def test_approach_2_reports_a_budget_whose_minimum_lies_outside_the_sizes_trained():
    sweep = synthetic_sweep(noise=0.001)
    largest = sweep.budget == BUDGETS[-1]
    too_small = synthetic_sweep(noise=0.001, budgets=BUDGETS[-1:], centre_shift=1 / 64)
    sweep = sweep.take(~largest)  # the largest budget again, its models all far below its optimum
    sweep = Sweep("kaplan", *(np.concatenate([getattr(sweep, k), getattr(too_small, k)])
                              for k in ("budget", "n", "d", "flops", "loss")))
    fit = approach2(sweep)
    assert list(fit.flagged) == [BUDGETS[-1]]
    assert "outside the sizes trained" in fit.flagged[BUDGETS[-1]]
    assert "add larger models" in fit.flagged[BUDGETS[-1]]
    assert fit.compute.size == len(BUDGETS) - 1 and fit.a == pytest.approx(TRUE.a, abs=0.03)
    upside_down = chinchilla.isoflop_minimum([1e6, 2e6, 4e6], [3.0, 3.2, 3.0])
    assert np.isnan(upside_down[0]) and "downward" in upside_down[1]
    # in D the other way round: a minimum above every run's D asks for smaller models, on more tokens
    _, beyond = chinchilla.isoflop_minimum([1e6, 2e6, 4e6], [3.2, 3.1, 3.05], "D")
    assert "outside the token counts trained" in beyond and "add smaller models" in beyond


def test_the_bootstrap_moves_the_losses_not_the_design_and_counts_what_gave_an_estimate(noisy):
    sweep, fit = noisy
    seen = []

    def refit(s):
        seen.append(s)
        return approach2(s).exponents()

    deviations = np.log(sweep.loss / TRUE.loss(sweep.n, sweep.d))  # the noise the sweep was made with
    interval = bootstrap(sweep, refit, deviations, resamples=20, seed=1)
    assert interval == bootstrap(sweep, refit, deviations, resamples=20, seed=1)
    assert set(interval) == {"a", "b"} and interval["a"].resamples == 20 and interval["a"].succeeded == 20
    assert interval["a"].low < approach2(sweep).a < interval["a"].high and interval["a"].determined
    for resample in seen:  # every run stays where it was planned; only its loss moves
        assert np.array_equal(resample.n, sweep.n) and np.array_equal(resample.d, sweep.d)
        assert not np.array_equal(resample.loss, sweep.loss)
    assert str(interval["a"]).endswith("(20/20)")
    # an estimate that fails in 3 resamples of 20 (85%) is not determined: no interval is printed
    calls = iter(range(100))

    def sometimes(s):
        return {"a": np.nan if next(calls) % 7 == 0 else 0.5}

    shaky = bootstrap(sweep, sometimes, deviations, resamples=20)["a"]
    assert (shaky.succeeded, shaky.determined, str(shaky)) == (17, False, "not determined (17/20)")


def test_the_seeds_deviations_are_scaled_to_one_runs_spread():
    """Deviations from the mean of k runs are smaller than from the truth by √((k-1)/k) on average: the
    scaling undoes it, so over many groups their spread is the noise's."""
    rng = np.random.default_rng(0)
    groups = [np.exp(2.0 + 0.01 * rng.standard_normal(3)) for _ in range(4000)]
    deviations = seed_deviations(groups + [np.array([7.0])])  # a point of one seed adds nothing
    assert deviations.size == 12000 and np.std(deviations) == pytest.approx(0.01, rel=0.03)
    assert seed_deviations([np.array([7.0])]).size == 0


def test_an_exponent_is_determined_by_enough_refits_and_a_narrow_interval():
    assert Interval(0.1, 0.2, 90, 100).determined and not Interval(0.1, 0.2, 89, 100).determined
    wide = Interval(0.0, 0.95, 100, 100)  # every refit gave an exponent, anywhere between 0 and 0.95
    assert wide.enough and not wide.determined and str(wide) == "[0.00, 0.95] (100/100) too wide"
    assert Interval(0.5, 0.5 + MAX_WIDTH, 100, 100).determined
    assert not Interval(0.5, 0.71, 100, 100).determined
    assert Interval(0.0, 5.0, 100, 100, max_width=np.inf).determined  # a prediction's, in its own units


def test_the_noise_of_some_runs_travels_with_them_and_a_pool_per_run_must_match_the_runs():
    sweep = synthetic_sweep(noise=0.0, budgets=(1e18, 2e18, 4e18))
    pools = [np.array([0.01 * i, -0.01 * i]) for i in range(sweep.loss.size)]
    kept = sweep.budget > 1e18
    assert [p[0] for p in pools_of(pools, kept)] == [0.01 * i for i in np.flatnonzero(kept)]
    flat = np.array([0.01, -0.01])
    assert pools_of(flat, kept) is flat
    with pytest.raises(ValueError, match="pools of noise for"):
        next(resampled(sweep.take(kept), pools))
    # one counting loses a budget the other keeps: both refitted on the budgets they share, each run with
    # its own noise
    falling = sweep.loss.copy()
    at = sweep.budget == 1e18
    falling[at] = np.linspace(3.0, 2.0, at.sum())  # the loss falls with N: no minimum inside the sizes
    shared = laws.on_shared_budgets(sweep, sweep.with_loss(falling), pools, resamples=5)
    assert shared["budgets"] == [2e18, 4e18]
    assert shared["kaplan"]["interval"]["a"].resamples == 5


def test_each_run_draws_its_noise_from_the_seeds_at_the_nearest_run_lengths():
    measured = [(1e5, np.array([0.3, -0.3])), (1e6, np.array([0.02, -0.02])), (4e6, np.array([0.01, -0.01])),
                (2e5, np.array([0.2, -0.2]))]
    short, long = noise_by_length([1.2e5, 5e6], measured, nearest=2)
    assert sorted(np.abs(short)) == [0.2, 0.2, 0.3, 0.3]  # 1e5 and 2e5: the two nearest in ln D
    assert sorted(np.abs(long)) == [0.01, 0.01, 0.02, 0.02]
    sweep = Sweep("kaplan", np.ones(2), np.ones(2), np.array([1.2e5, 5e6]), np.ones(2), np.array([2.0, 2.0]))
    moved = np.array([np.log(s.loss / 2.0) for s in resampled(sweep, [short, long], resamples=200)])
    assert set(np.round(np.abs(moved[:, 0]), 6)) == {0.2, 0.3}
    assert set(np.round(np.abs(moved[:, 1]), 6)) == {0.01, 0.02}


def test_approach_3_says_when_its_exponents_are_not_identified():
    """Two sweeps the surface cannot describe with exponents: a loss that does not depend on N at all (its
    N term vanishes or is flat), and one where only the smallest model pays for its size, a step rather than
    a power (the fit runs α off the grid, as the cpu sweep's kaplan counting does)."""
    sweep = synthetic_sweep(noise=0.0)
    no_n = LossSurface(E=1.69, A=0.0, B=410.7, alpha=0.34, beta=0.28)
    flat = fit_parametric(sweep.n, sweep.d, no_n.loss(sweep.n, sweep.d))
    assert flat.problem and "not identified" in flat.problem
    step = 2.0 + 0.3 * (sweep.n == sweep.n.min()) + TRUE.B / sweep.d**TRUE.beta  # the smallest model worse
    stepped = fit_parametric(sweep.n, sweep.d, step)
    assert stepped.problem and ("outside the grid searched" in stepped.problem or "edge" in stepped.problem)
    assert np.isnan(chinchilla.exponents_of(stepped)["a"]) and not fit_parametric(
        sweep.n, sweep.d, TRUE.loss(sweep.n, sweep.d)).problem


def test_the_grid_solves_e_a_b_exactly_where_alpha_and_beta_are_right():
    """On runs without noise whose α and β lie on the grid, the best pair is the truth, and the linear solve
    there (on scaled columns, scaled back) gives ln A, ln B and ln E themselves."""
    sweep = synthetic_sweep(noise=0.0)
    best = chinchilla.grid_starts(sweep.n, sweep.d, sweep.loss)[0]
    assert best == pytest.approx([np.log(TRUE.A), np.log(TRUE.B), np.log(TRUE.E), TRUE.alpha, TRUE.beta],
                                 abs=1e-6)


def test_a_fit_whose_best_grid_pair_is_on_the_edge_is_not_identified():
    """β = 3 lies beyond the grid (0.02 to 2.5): the search's best pair sits on its edge, and the fit says
    so rather than print the exponent L-BFGS stopped at."""
    sweep = synthetic_sweep(noise=0.0)
    steep = LossSurface(E=1.69, A=406.4, B=1e26, alpha=0.34, beta=3.0)
    fit = fit_parametric(sweep.n, sweep.d, steep.loss(sweep.n, sweep.d))
    assert fit.problem and "edge" in fit.problem and "not identified" in fit.problem


def test_approach_2_reads_c_at_the_optimum_when_the_runs_are_counted_another_way():
    """Counted the other way, a budget's runs spend C that grows with N: the optimum's C is read off the line
    through log C against log N, not averaged over whichever sizes were trained."""
    n = np.array([1e3, 2e3, 4e3, 8e3])
    assert chinchilla.compute_at(n, 1e10 * (n / 1e3) ** 0.2, 2.5e3) == pytest.approx(1e10 * 2.5**0.2)
    assert chinchilla.compute_at(n, np.full(4, 3e10), 5e3) == pytest.approx(3e10)


def test_the_planners_parameter_count_is_the_models():
    for n_layer, d_model, vocab, context in ((1, 8, 101, 64), (4, 128, 101, 64), (12, 768, 50257, 1024)):
        config = GPTConfig(vocab_size=vocab, block_size=context, n_layer=n_layer, n_head=d_model // 8,
                           n_embd=d_model)
        assert planner.all_parameters(n_layer, d_model, vocab, context) == total_parameters(config)


def test_chinchillas_own_runs_give_the_three_approaches_and_besiroglu_et_als_refit(capsys, tmp_path):
    """PAPER: Besiroglu et al. 2024 refit the 240 runs (Huber δ = 1e-3 on log L, L-BFGS): α 0.348, β 0.366,
    so a = β/(α+β) = 0.513. The tolerance: α and β within 0.03, a within 0.05 (the runs were read off a
    plot; the fit is theirs, made with another grid and optimizer). PAPER: Chinchilla Table 2: Approach 2
    from the nine IsoFLOP budgets gives a = 0.49; here [0.45, 0.58], the runs being read off a plot."""
    numbers = laws.main(["--DATA=chinchilla", "--RESAMPLES=4", f"--OUT_DIR={tmp_path}"])
    fit, epoch = numbers["chinchilla-runs"], planner.PUBLISHED_SURFACES["epoch-2024"]
    assert numbers["runs"] == 240 and fit["problem"] is None
    assert fit["alpha"] == pytest.approx(epoch.alpha, abs=0.03)
    assert fit["beta"] == pytest.approx(epoch.beta, abs=0.03)
    assert fit["a"] == pytest.approx(epoch.a, abs=0.05)
    assert abs(fit["a"] - PAPER_A3) > 0.03  # the published fit's a, which the data do not support
    assert fit["interval"]["a"].resamples == 4
    # Approach 2 as the paper's Figure 3: nine budgets, each with its minimum among its runs
    assert len(numbers["isoflop-runs"]) == 9 and min(numbers["isoflop-runs"]) >= 10
    assert 0.45 <= numbers["approaches"]["Approach 2"]["a"] <= 0.58
    # the loss is part of the fit: least squares moves a by more than the Huber fit's own interval is wide
    assert numbers["least-squares"].a - fit["a"] > 0.01
    printed = capsys.readouterr().out
    assert "240 of Hoffmann et al.'s runs" in printed and "(4/4)" in printed
    assert "Approach 2 on the 160 runs within a factor 1.2 of the paper's nine IsoFLOP budgets" in printed
    assert printed.count("N_opt = ") == 9 and "nearly least absolute deviations" in printed
    assert "C from 1e+15 to 1e+18: a = 0.91" in printed  # the counting alone (Pearce & Song)
    assert [path.name for path in numbers["plots"]] == ["chinchilla_isoflops.png", "chinchilla_residuals.png",
                                                        "chinchilla_runs.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in numbers["plots"])


def test_the_papers_printed_surface_misfits_its_own_runs_where_the_refit_does_not():
    """Besiroglu et al.: the published Approach 3 fit sits off the runs it was fitted to."""
    runs = chinchilla_runs.read_runs()
    refit = fit_parametric(runs.n, runs.d, runs.loss)
    paper = chinchilla.surface_residuals(runs, planner.PUBLISHED_SURFACES["paper-unrounded"])
    ours = chinchilla.surface_residuals(runs, refit)
    assert np.sqrt(np.mean(paper**2)) > 1.2 * np.sqrt(np.mean(ours**2))
    assert abs(paper.mean()) > 1.5 * abs(ours.mean())


def test_the_counting_alone_turns_a_surface_of_a_half_into_kaplans_exponent_at_small_scale():
    """Pearce & Song 2024: asked in Kaplan's counting (non-embedding N, C = 6 N_E D), a surface whose own
    a is about 0.5 gives a near Kaplan's 0.73 or above at small budgets, and its own a at large ones."""
    surface = planner.PUBLISHED_SURFACES["epoch-2024"]
    (_, _, small), (_, _, middle), (_, _, large) = pearce_song.local_exponents(surface)
    assert small > 0.75 and small > middle > large and large == pytest.approx(surface.a, abs=0.02)
    # App. F counts the embedding lookup as a matmul, and the logits: 46% of the 1 x 8 model's FLOPs here
    one_by_eight = GPTConfig(vocab_size=101, block_size=64, n_layer=1, n_head=1, n_embd=8)
    assert pearce_song.embedding_flops_share(one_by_eight) == pytest.approx(0.461, abs=0.001)
    for (n_layer, d_model), share in (((1, 16), 0.378), ((2, 64), 0.100)):  # 38% and 10%: the README's
        config = GPTConfig(vocab_size=101, block_size=64, n_layer=n_layer, n_head=d_model // 8,
                           n_embd=d_model)
        assert pearce_song.embedding_flops_share(config) == pytest.approx(share, abs=0.001)


PAPER_A3 = chinchilla.PAPER_EXPONENTS["Chinchilla Approach 3"][0]


# ---- the chinchilla counting: every parameter, App. F FLOPs ------------------------------------------------

# A surface in every parameter whose optimum falls on a laptop's models: Chinchilla's, with B raised so that
# each budget's best model is small (2 x 16 to 2 x 136 over these budgets) and its embeddings 60% to 16% of
# its parameters.
SMALL = LossSurface(E=1.69, A=406.4, B=1000.0, alpha=0.34, beta=0.28)
APP_F_BUDGETS = np.geomspace(3e11, 3e14, 5)  # App. F FLOPs
DEPTH = 2  # the sweep's family: 2 x d_model, d_model in whole heads of 8
WIDTHS = np.arange(HEAD_SIZE, 4097, HEAD_SIZE)


def true_frontier(budgets, widths=WIDTHS, surface=SMALL) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(N_opt, D_opt) at each App. F budget, N counting every parameter, and the best width: the surface
    minimised over the family's widths, each run on C / (App. F FLOPs per token) tokens. The grid's best
    width, then the vertex of the parabola through it and its two neighbours, in log N and in log D (on
    these noise-free points one head apart, a parabola through 5 points moves the slopes by 0.001 at most:
    far below the tolerance they are used with)."""
    table = [row(DEPTH, int(width), "chinchilla", 1.0, surface) for width in widths]
    n = np.array([r["params_total"] for r in table])  # (widths,)
    per_token = np.array([r["flops_chinchilla"] / r["tokens"] for r in table])  # (widths,) App. F FLOPs
    n_opt, d_opt, best_widths = [], [], []
    for budget in budgets:
        loss = surface.loss(n, budget / per_token)  # (widths,)
        best = int(np.argmin(loss))
        assert 0 < best < len(widths) - 1, "the grid of widths must hold each budget's optimum inside it"
        near = slice(best - 1, best + 2)
        n_opt.append(chinchilla.isoflop_minimum(n[near], loss[near])[0])
        d_opt.append(chinchilla.isoflop_minimum(budget / per_token[near], loss[near], "D")[0])
        best_widths.append(int(widths[best]))
    return np.array(n_opt), np.array(d_opt), best_widths


def chinchilla_rows(budgets=APP_F_BUDGETS, noise: float = 0.002, seed: int = 0) -> list[dict]:
    """An App. F IsoFLOP sweep of SMALL in every parameter: at each budget, 7 widths a factor √2 apart
    around the best one (in whole heads, so the narrowest can coincide), losses with multiplicative
    noise."""
    rng, rows = np.random.default_rng(seed), []
    for budget, best in zip(budgets, true_frontier(budgets)[2], strict=True):
        widths = sorted({max(HEAD_SIZE, round(best * 2 ** (k / 2) / HEAD_SIZE) * HEAD_SIZE)
                         for k in range(-3, 4)})
        rows += [row(DEPTH, w, "chinchilla", budget, SMALL, "params_total", noise=noise, rng=rng)
                 for w in widths]
    return rows


@pytest.fixture(scope="module")
def app_f():
    """The chinchilla counting's synthetic sweep (0.2% noise), and its Approach 3 fit."""
    sweep = Sweep.from_rows(chinchilla_rows(), "chinchilla")
    return sweep, fit_parametric(sweep.n, sweep.d, sweep.loss)


def test_sweep_from_rows_reads_n_and_c_as_the_counting_counts_them():
    rows = [row(2, 32, "kaplan", 1e10, SMALL), row(2, 32, "chinchilla", 1e10, SMALL)]
    kaplan_runs, app_f_runs = Sweep.from_rows(rows, "kaplan"), Sweep.from_rows(rows, "chinchilla")
    assert kaplan_runs.n.tolist() == [25_472] and app_f_runs.n.tolist() == [25_472 + (500 + 128) * 32]
    assert kaplan_runs.flops == pytest.approx([1e10]) and app_f_runs.flops == pytest.approx([1e10])
    assert app_f_runs.d[0] < kaplan_runs.d[0]  # App. F counts 2x32 as costing more per token than 6N
    with pytest.raises(CourseError, match="error: no runs of the chinchilla counting here"):
        Sweep.from_rows(rows[:1], "chinchilla")


def test_approach_3_recovers_the_surface_under_the_chinchilla_counting(app_f):
    _, fit = app_f
    assert fit.alpha == pytest.approx(SMALL.alpha, abs=0.02)
    assert fit.beta == pytest.approx(SMALL.beta, abs=0.02)
    assert fit.a == pytest.approx(SMALL.a, abs=0.02)  # β/(α+β), as the paper converts


def test_approach_2_recovers_the_frontier_in_app_f_flops(app_f):
    """The frontier of SMALL under App. F's FLOPs is not the closed form's: per token a narrow model costs
    more than 6N (attention over the context, the embeddings' matmuls), less so as it widens, so D_opt
    grows as C^0.59 and a + b = 1.06, where C = 6ND would make it 1.

    The tolerance, 0.02: on these runs without noise the parabolas miss the true slopes by 0.001 (a) and
    0.0075 (b), as the loss along an App. F IsoFLOP line is not quite a parabola in log N over widths a
    factor 8 apart; with 0.2% noise, 40 seeds all came within 0.005 (a) and 0.011 (b). Reading D_opt as
    C / (6 N_opt) would give b = 1 - a, 0.06 off."""
    n_opt, d_opt, _ = true_frontier(APP_F_BUDGETS)
    true_a = np.polyfit(np.log(APP_F_BUDGETS), np.log(n_opt), 1)[0]
    true_b = np.polyfit(np.log(APP_F_BUDGETS), np.log(d_opt), 1)[0]
    assert true_a + true_b > 1.04  # the test means something: App. F is far from 6ND here
    fit = approach2(app_f[0])
    assert fit.flagged == {}
    assert (fit.a, fit.b) == pytest.approx((true_a, true_b), abs=0.02)
    assert abs(1 - fit.a - true_b) > 0.04


def test_the_countings_disagree_on_a_when_embeddings_are_a_large_share(app_f):
    """The same runs read under the kaplan counting (N without the embeddings): Approach 3's a moves by 0.10
    when the embeddings are 60% to 16% of the best models' parameters, and by 0.01 when they are 4%."""
    sweep, fit = app_f
    runs = chinchilla_rows()
    same = Sweep.from_rows([r | {"counting": "kaplan"} for r in runs], "kaplan")
    assert np.array_equal(same.d, sweep.d) and np.all(same.n < sweep.n)
    assert abs(fit_parametric(same.n, same.d, same.loss).a - fit.a) > 0.05
    wide = chinchilla_rows(budgets=np.geomspace(1e17, 1e19, 4))  # best widths 520 to 1,496: embeddings 4%
    wide_kaplan = Sweep.from_rows([r | {"counting": "kaplan"} for r in wide], "kaplan")
    wide_app_f = Sweep.from_rows(wide, "chinchilla")
    assert np.mean(1 - wide_kaplan.n / wide_app_f.n) < 0.05
    wide_a = [fit_parametric(s.n, s.d, s.loss).a for s in (wide_kaplan, wide_app_f)]
    assert abs(wide_a[0] - wide_a[1]) < 0.03


# ---- the script --------------------------------------------------------------------------------------------


def test_reading_results_fails_with_one_line_that_says_what_to_do(tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path / "empty.jsonl"):
        if path.name == "empty.jsonl":
            path.write_text("\n")
        with pytest.raises(CourseError) as stopped:
            read_results(path, fields=SWEEP_FIELDS)
        message = str(stopped.value)
        assert message.startswith("error: ") and "\n" not in message and "train.py" in message
    (tmp_path / "partial.jsonl").write_text('{"name": "run0", "budget": 1e15}\n')
    with pytest.raises(CourseError, match="line 1 .* has no counting, params, params_total, tokens, flops, "
                                         "flops_chinchilla, val_loss"):
        read_results(tmp_path / "partial.jsonl", fields=SWEEP_FIELDS)


def test_a_results_file_without_countings_or_with_an_unknown_one_is_one_line(tmp_path):
    old = {"name": "run0", "budget": 1e15, "params": 1e5, "params_total": 2e5, "tokens": 1e9, "flops": 6e14,
           "val_loss": 3.0}  # what train.py wrote before the countings
    (tmp_path / "results.jsonl").write_text(json.dumps(old) + "\n")
    with pytest.raises(CourseError) as stopped:
        laws.main([f"--OUT_DIR={tmp_path}", "--DEVICE=cpu", "--PRESET=cpu"])
    message = str(stopped.value)
    assert message.startswith("error: line 1 ") and "no counting, flops_chinchilla" in message
    assert "\n" not in message
    unknown = row(2, 32, "kaplan", 1e10, SMALL) | {"counting": "6N"}
    (tmp_path / "results.jsonl").write_text(json.dumps(unknown) + "\n")
    with pytest.raises(CourseError, match="error: runs of an unknown counting \\(6N\\); a run's counting "
                                         "is one of kaplan, chinchilla"):
        laws.main([f"--OUT_DIR={tmp_path}", "--DEVICE=cpu", "--PRESET=cpu"])


def two_countings(budgets=BUDGETS[:4], noise: float = 0.01) -> list[dict]:
    """Both countings' sweeps of TRUE at large shapes (N ~ 3e6 to 3e10, embeddings 5% of N at most): at
    each budget 7 shapes around N_opt, a factor 2 apart, each on the tokens its counting's budget buys."""
    rng, rows = np.random.default_rng(0), []
    n_opt, _ = ChinchillaPlanner(TRUE).get_optimal_params_and_tokens(budgets)
    for counting, loss_n in (("kaplan", "params"), ("chinchilla", "params_total")):
        for budget, n in zip(budgets, n_opt, strict=True):
            for step in 2.0 ** np.arange(-3, 4):
                n_layer, d_model = planner.model_shape(n * step, VOCAB, CONTEXT)
                rows.append(row(n_layer, d_model, counting, budget, TRUE, loss_n, head_size=64, noise=noise,
                                rng=rng))
    return rows


def test_main_fits_a_results_file_and_writes_the_plots(tmp_path, capsys):
    rows = two_countings()
    results = tmp_path / "sweep" / "results.jsonl"
    results.parent.mkdir()
    rows.append(rows[0] | {"name": "diverged", "val_loss": float("nan")})
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    numbers = laws.main([f"--OUT_DIR={results.parent}", "--RESAMPLES=5", "--DEVICE=cpu", "--PRESET=cpu"])
    assert [path.name for path in numbers["plots"]] == [
        "isoflops_kaplan.png", "isoflops_chinchilla.png", "allocation.png", "parametric.png",
        "loss_vs_compute.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in numbers["plots"])
    for counting in ("kaplan", "chinchilla"):
        assert numbers[counting]["runs"] == 28 and numbers[counting]["Approach 2"]["used"] == 4
        for approach in ("Approach 1", "Approach 2", "Approach 3"):
            interval = numbers[counting][approach]["interval"]["a"]
            assert interval.resamples == 5 and interval.low <= interval.high
            assert abs(numbers[counting][approach]["a"] - TRUE.a) < 0.1
        # the same runs counted the other way: fitted too, with intervals of their own
        assert numbers["crossed"][counting]["runs"] == 28
        assert numbers["crossed"][counting]["Approach 3"]["interval"]["a"].resamples == 5
        assert numbers[counting]["Approach 3"]["alpha"] == pytest.approx(TRUE.alpha, abs=0.05)
    assert "Kaplan L(N)" in numbers["kaplan"] and "Kaplan L(N)" not in numbers["chinchilla"]
    printed = capsys.readouterr().out
    assert "\nkaplan counting (non-embedding N, C = 6ND (Kaplan)): 28 runs at 4 budgets" in printed
    assert ("\nchinchilla counting (all parameters, C = App. F FLOPs (Chinchilla)): 28 runs at 4 budgets"
            in printed)
    assert printed.count("0.46 / 0.54 (Chinchilla)") == 2
    assert printed.count("Approach 2: from 4 budgets with interior minima") == 2
    assert "what the counting alone does: the same runs, N and C counted both ways" in printed
    assert "each loss moved by one of the Approach 3 fit's residuals (no seeds repeated)" in printed
    assert printed.count("Approach 2's parabolas miss the runs by") == 2
    assert printed.count("Approach 3 by least squares instead of Huber: a = ") == 2
    assert "predict, then train: the kaplan counting's minima carried to C = " in printed
    assert numbers["prediction"]["budget"] == pytest.approx(4 * BUDGETS[3], rel=0.01)
    assert "(5/5)" in printed
    assert printed.count("Kaplan alpha_N") == 1
    assert "left out 1 runs whose loss is not a number: diverged" in printed
    with pytest.raises(CourseError, match="error: unknown setting RESULTS"):
        laws.main(["--RESULTS=x"])


def test_main_fits_only_the_countings_it_can(tmp_path, capsys):
    """A file of the kaplan counting alone, plus chinchilla runs at one budget: kaplan is fitted, alone."""
    rows = [r for r in two_countings(budgets=BUDGETS[:3], noise=0.001)
            if r["counting"] == "kaplan" or r["budget"] == BUDGETS[0]]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    numbers = laws.main([f"--OUT_DIR={tmp_path}", "--RESAMPLES=2", "--DEVICE=cpu", "--PRESET=cpu"])
    assert "kaplan" in numbers and "chinchilla" not in numbers
    assert [path.name for path in numbers["plots"]][0] == "isoflops_kaplan.png"
    assert len(numbers["plots"]) == 4
    printed = capsys.readouterr().out
    assert "left out the chinchilla counting: its runs are all at C = 1e+17" in printed
    assert "what the counting alone does" in printed  # the kaplan runs, counted both ways


# ---- predict, then train -----------------------------------------------------------------------------------


def test_the_prediction_carries_the_minima_to_a_larger_budget_and_the_command_tests_it(tmp_path, capsys):
    """From three budgets of a known surface, N_opt and the loss at it four times above the largest: the
    truth's, within the parabolas' and the power law's approximation; then the runs at that budget."""
    budgets = (1e18, 2e18, 4e18)
    sweep = synthetic_sweep(noise=0.0, budgets=budgets, spacing=1.5)
    predicted = prediction.prediction(sweep, 4.0, np.array([0.002, -0.002]), resamples=20)
    truth_n, truth_d = ChinchillaPlanner(TRUE).get_optimal_params_and_tokens(1.6e19)
    assert predicted["budget"] == 1.6e19
    assert predicted["n_opt"] == pytest.approx(truth_n, rel=0.05)
    # a power law in C with no floor E falls a little faster than the truth, which has one
    assert predicted["loss"] == pytest.approx(TRUE.loss(truth_n, truth_d), rel=0.02)
    low, high = predicted["interval"]["n_opt"], predicted["interval"]["loss"]
    assert low.succeeded == 20 and low.low < predicted["n_opt"] < low.high and high.low < high.high
    # a budget whose minimum leaves the sizes: no prediction, rather than one from fewer budgets
    lopsided = sweep.take(~((sweep.budget == 4e18) & (sweep.n < np.median(sweep.n[sweep.budget == 4e18]))))
    assert np.isnan(prediction.predict(lopsided, 1.6e19)["n_opt"])

    assert prediction.report(predicted, tmp_path, 20) is None  # nothing trained yet: the command
    printed = capsys.readouterr().out
    assert f"--COUNTINGS=kaplan --BUDGETS=1.6e+19 --OUT_DIR={tmp_path / 'prediction'}" in printed
    n_opt = predicted["n_opt"]
    sizes = n_opt * 1.5 ** np.arange(-3, 4)
    rows = [row(2, 32, "kaplan", 1.6e19, TRUE) | {"name": f"kaplan_1.6e19_{k}", "params": n,
                                                  "tokens": 1.6e19 / (6 * n),
                                                  "val_loss": float(TRUE.loss(n, 1.6e19 / (6 * n)))}
            for k, n in enumerate(sizes)]
    (tmp_path / "prediction").mkdir()
    write_results(tmp_path / "prediction" / "results.jsonl", rows)
    measured = prediction.report(predicted, tmp_path, 20)
    assert measured["runs"] == 7 and measured["n_opt"] == pytest.approx(truth_n, rel=0.05)
    assert measured["best_loss"] == min(r["val_loss"] for r in rows)
    assert "measured (7 runs in" in capsys.readouterr().out
