"""Build it yourself: chapter 4's functions for you to write, and how `uv run learn check` tests them.

Nothing here trains. The counters are checked on several shapes (GPT-2 small's among them); the fits on
synthetic sweeps drawn from a known loss surface, at residuals inside and beyond the Huber loss's δ; the
metrics on hand-made answers, some wrong, some cut short, some too long. `uv run learn list` shows the tasks.
"""

import importlib
import math

import numpy as np
import torch

from common.course.learn.check import Mistake, Task

CHAPTER = "phase1_foundation.project4_scaling"
TESTS = "phase1_foundation/project4_scaling/tests/"
SHAPES = (  # (vocab_size, block_size, n_layer, n_head, n_embd)
    (10, 4, 1, 2, 8),  # Appendix F's hand count in test_model.py
    (101, 16, 2, 4, 32),
    (7, 1, 1, 1, 5),  # a context of one token, a single head
    (37, 12, 3, 2, 16),
    (500, 128, 4, 8, 64),  # a sweep's shape: characters, head size 8
)
GPT2_SMALL = (50257, 1024, 12, 12, 768)


def _number(c, mine, ref, what: str, rtol: float = 1e-9):
    """Two numbers equal to rtol, NaN only where the course's is NaN (Case.close lets NaN through)."""
    if isinstance(mine, np.ndarray | torch.Tensor) and mine.ndim == 0:
        mine = mine.item()
    c.true(isinstance(mine, int | float | np.number), f"{what} is {type(mine).__name__} {mine!r}; a number "
           f"was expected")
    if math.isnan(ref) or math.isnan(mine):
        c.true(math.isnan(ref) == math.isnan(mine), f"{what} is {mine!r}; the course's is {ref!r}")
        return
    c.close(float(mine), float(ref), what, atol=0.0, rtol=rtol)


# ---- 4.parameters ------------------------------------------------------------------------------------------


def check_parameters(course, yours, case):
    for shape in (*SHAPES, GPT2_SMALL):
        V, T, L, nh, d = shape
        with case(f"n_layer = {L}, n_embd = {d}, vocab {V}, block_size {T}",
                  given=f"GPTConfig(vocab_size={V}, block_size={T}, n_layer={L}, n_head={nh}, "
                        f"n_embd={d})") as c:
            c.equal(yours.non_embedding_parameters(L, d), course.non_embedding_parameters(L, d),
                    f"non_embedding_parameters({L}, {d})")
            c.equal(yours.total_parameters(yours.GPTConfig(*shape)),
                    course.total_parameters(course.GPTConfig(*shape)), "total_parameters(config)")
            if shape == GPT2_SMALL:  # the formulas only: building it takes seconds, even on the meta device
                continue
            mine, ref = yours.GPT(yours.GPTConfig(*shape)), course.GPT(course.GPTConfig(*shape))
            c.equal(mine.num_parameters(), ref.num_parameters(), "model.num_parameters()")
            c.equal(mine.num_parameters(non_embedding=True), ref.num_parameters(non_embedding=True),
                    "model.num_parameters(non_embedding=True)")
    with case("an untied head: a V x d table of its own", given="GPTConfig(101, 16, 2, 4, 32), lm_head "
              "given its own weight") as c:
        models = []
        for module in (yours, course):
            model = module.GPT(module.GPTConfig(*SHAPES[1]))
            model.lm_head.weight = torch.nn.Parameter(torch.zeros(101, 32))
            models.append(model)
        mine, ref = models
        c.equal(mine.num_parameters(), ref.num_parameters(), "model.num_parameters()")
        c.equal(mine.num_parameters(non_embedding=True), ref.num_parameters(non_embedding=True),
                "model.num_parameters(non_embedding=True)")


# ---- 4.flops_per_token -------------------------------------------------------------------------------------


def check_flops(course, yours, case):
    for method in ("6N", "kaplan", "chinchilla"):
        with case(f"method {method!r} on {len(SHAPES) + 1} shapes, GPT-2 small's included",
                  given="(vocab_size, block_size, n_layer, n_head, n_embd) in " + ", ".join(
                      map(str, (*SHAPES, GPT2_SMALL)))) as c:
            for shape in (*SHAPES, GPT2_SMALL):
                _number(c, yours.flops_per_token(yours.GPTConfig(*shape), method),
                        course.flops_per_token(course.GPTConfig(*shape), method),
                        f"flops_per_token(GPTConfig{shape}, {method!r})")
    with case("the default method is 6N", given="flops_per_token(GPTConfig(101, 16, 2, 4, 32))") as c:
        _number(c, yours.flops_per_token(yours.GPTConfig(*SHAPES[1])),
                course.flops_per_token(course.GPTConfig(*SHAPES[1])), "flops_per_token(config)")
    with case("an unknown method is refused", given="method='6ND'") as c:
        try:
            got = yours.flops_per_token(yours.GPTConfig(*SHAPES[1]), "6ND")
        except ValueError:
            pass
        else:
            c.fail(f"returned {got!r}; raise ValueError for a method other than '6N', 'kaplan', 'chinchilla'")


# ---- 4.isoflop_minimum -------------------------------------------------------------------------------------


def _same_verdict(c, mine, ref, what: str):
    """(x_min, problem) against the course's: the same x_min (NaN where the course has none), flagged where
    the course flags, and a minimum outside the runs pointing the same way (larger or smaller models)."""
    c.true(isinstance(mine, tuple) and len(mine) == 2, f"{what} returned {mine!r}; return (x_min, problem)")
    _number(c, mine[0], ref[0], f"{what}'s x_min", rtol=1e-6)
    if ref[1] is None:
        c.true(mine[1] is None, f"{what} flagged {mine[1]!r}; the course trusts this minimum (problem None)")
        return
    c.true(isinstance(mine[1], str), f"{what} returned problem {mine[1]!r}; the course says why not: "
           f"{ref[1]!r}")
    for direction in ("larger", "smaller"):
        if f"add {direction} models" in ref[1]:
            c.true(f"add {direction} models" in mine[1], f"{what} says {mine[1]!r}; the minimum is outside "
                   f"the runs and asks for {direction} models: {ref[1]!r}")


def _isoflop_runs(budget: float, shift: float = 1.0, sizes: int = 7, noise: float = 0.0):
    """One budget's runs of Chinchilla's printed surface, a factor 2 apart around N_opt x shift, on
    D = C/(6N) tokens."""
    planner = importlib.import_module(f"{CHAPTER}.planner")
    truth = planner.PUBLISHED_SURFACES["paper-rounded"]
    n_opt, _ = planner.ChinchillaPlanner(truth).get_optimal_params_and_tokens(budget)
    n = n_opt * shift * 2.0 ** (np.arange(sizes) - (sizes - 1) / 2)
    d = budget / (6 * n)
    return n, d, truth.loss(n, d) * np.exp(noise * np.random.standard_normal(sizes))


def check_isoflop(course, yours, case):
    u = np.linspace(np.log(1e6), np.log(64e6), 7)
    with case("the parabola through 7 runs: coefficients of ln N", given="N from 1e6 to 6.4e7, the losses a "
              "parabola in ln N plus 0.2% noise") as c:
        x = np.exp(u)
        loss = 2.5 + 0.04 * (u - np.log(5e6)) ** 2 + 0.005 * np.random.standard_normal(7)
        c.close(torch.as_tensor(yours.isoflop_parabola(x, loss)),
                torch.as_tensor(course.isoflop_parabola(x, loss)), "(c2, c1, c0)", atol=1e-9, rtol=1e-7)
    for budget, quantity in ((1e18, "N"), (1e21, "N"), (1e19, "D")):
        with case(f"one budget's runs, C = {budget:.0e}: the minimum in {quantity}",
                  given="7 runs of Chinchilla's surface a factor 2 apart around N_opt, 1% noise") as c:
            n, d, loss = _isoflop_runs(budget, noise=0.01)
            x = n if quantity == "N" else d
            _same_verdict(c, yours.isoflop_minimum(x, loss, quantity),
                          course.isoflop_minimum(x, loss, quantity), f"isoflop_minimum({quantity})")
    for quantity, shift, side in (("N", 1 / 64, "above every N"), ("N", 64, "below every N"),
                                  ("D", 1 / 64, "below every D"), ("D", 64, "above every D")):
        with case(f"the minimum {side} trained: flagged, and which models to add",
                  given=f"runs around N_opt x {shift:g}, C = 1e19") as c:
            n, d, loss = _isoflop_runs(1e19, shift=shift)
            x = n if quantity == "N" else d
            _same_verdict(c, yours.isoflop_minimum(x, loss, quantity),
                          course.isoflop_minimum(x, loss, quantity), f"isoflop_minimum({quantity})")
    for name, x, loss in (("a parabola that opens downward: no minimum", [1e6, 2e6, 4e6], [3.0, 3.2, 3.0]),
                          ("fewer than 3 sizes: no parabola", [1e6, 1e6, 2e6], [3.1, 3.0, 3.05])):
        with case(name, given=f"N = {x}, losses {loss}") as c:
            _same_verdict(c, yours.isoflop_minimum(x, loss), course.isoflop_minimum(x, loss),
                          "isoflop_minimum")
    with case("Approach 2 on a sweep of 5 budgets x 7 sizes", given="Chinchilla's surface, 1% noise, the "
              "largest budget's runs all far too small") as c:
        results = importlib.import_module(f"{CHAPTER}.results")
        runs = [_isoflop_runs(budget, noise=0.01) for budget in np.geomspace(1e17, 1e20, 4)]
        runs.append(_isoflop_runs(1e21, shift=1 / 64, noise=0.01))
        budget = np.repeat(np.geomspace(1e17, 1e21, 5), 7)
        n, d, loss = (np.concatenate(column) for column in zip(*runs, strict=True))
        sweep = results.Sweep("kaplan", budget, n, d, 6 * n * d, loss)
        mine, ref = yours.approach2(sweep), course.approach2(sweep)
        c.equal(sorted(mine.flagged), sorted(ref.flagged), "the budgets left out (flagged)")
        c.close(torch.as_tensor(mine.n_opt), torch.as_tensor(ref.n_opt), "N_opt of each budget used", atol=0,
                rtol=1e-6)
        c.close(torch.as_tensor(mine.d_opt), torch.as_tensor(ref.d_opt), "D_opt of each budget used", atol=0,
                rtol=1e-6)
        c.close((mine.a, mine.b), (ref.a, ref.b), "the exponents (a, b)", atol=1e-6)


# ---- 4.huber_objective -------------------------------------------------------------------------------------


def _sweep_logs(noise: float, seed: int = 0):
    """ln N, ln D, ln L of 5 budgets x 7 sizes of Chinchilla's surface, multiplicative noise on L."""
    planner = importlib.import_module(f"{CHAPTER}.planner")
    truth = planner.PUBLISHED_SURFACES["paper-rounded"]
    budgets = np.geomspace(1e17, 1e21, 5)
    n_opt, _ = planner.ChinchillaPlanner(truth).get_optimal_params_and_tokens(budgets)
    n = np.outer(n_opt, 2.0 ** np.arange(-3, 4)).ravel()
    d = np.repeat(budgets, 7) / (6 * n)
    loss = truth.loss(n, d) * np.exp(noise * np.random.default_rng(seed).standard_normal(n.size))
    return np.log(n), np.log(d), np.log(loss)


TRUE_PARAMS = (np.log(406.4), np.log(410.7), np.log(1.69), 0.34, 0.28)  # the truth's (ln A, ln B, ln E, α, β)


def check_huber(course, yours, case):
    residual = np.array([-0.2, -0.01, -1e-3, -6e-4, 0.0, 3e-4, 9.99e-4, 1e-3, 1.001e-3, 0.05, 2.0])
    with case("Huber_δ of residuals inside and beyond δ = 1e-3", given=f"residuals {residual.tolist()}") as c:
        c.close(torch.as_tensor(yours._huber(residual)), torch.as_tensor(course._huber(residual)),
                "_huber(residual)", atol=1e-15, rtol=1e-9)
    with case("Huber_δ with δ = 0.1 passed in: quadratic for every residual under 0.1",
              given=f"residuals {residual.tolist()}, delta=0.1") as c:
        c.close(torch.as_tensor(yours._huber(residual, 0.1)), torch.as_tensor(course._huber(residual, 0.1)),
                "_huber(residual, 0.1)", atol=1e-15, rtol=1e-9)
    points = (
        ("the truth, 0.02% noise: every residual within δ", 2e-4, TRUE_PARAMS),
        ("the truth, 0.1% noise: residuals on both sides of δ", 1e-3, TRUE_PARAMS),
        ("far from the truth: every residual beyond δ", 1e-2, (5.0, 7.0, 0.4, 0.3, 0.3)),
        ("a start of the paper's grid", 0.0, (25.0, 0.0, -1.0, 2.0, 0.5)),
        ("log A = 800: a sum of exponentials would overflow", 1e-2, (800.0, 7.0, 0.4, 0.3, 0.3)),
    )
    for name, noise, params in points:
        with case(f"objective and gradient at {name}", given=f"35 runs; (ln A, ln B, ln E, α, β) = "
                  f"{tuple(round(float(p), 4) for p in params)}") as c:
            logs, params = _sweep_logs(noise), np.array(params, dtype=float)
            mine = yours._huber_and_gradient(params.copy(), *logs)
            ref = course._huber_and_gradient(params, *logs)
            c.true(isinstance(mine, tuple) and len(mine) == 2, "return (objective, gradient)")
            _number(c, mine[0], ref[0], "the objective (sum of Huber losses)", rtol=1e-8)
            scale = float(np.abs(ref[1]).max())
            c.close(torch.as_tensor(np.asarray(mine[1], dtype=float)), torch.as_tensor(ref[1]),
                    "the gradient in (ln A, ln B, ln E, α, β)", atol=1e-9 * scale, rtol=1e-7)
    with case("Approach 3 fitted with your objective, from one start", given="35 runs, 1% noise; L-BFGS from "
              "the truth's neighbourhood") as c:
        log_n, log_d, log_loss = _sweep_logs(0.01)
        start = course.LossSurface(E=1.8, A=300.0, B=500.0, alpha=0.3, beta=0.3)
        mine = yours.fit_parametric(np.exp(log_n), np.exp(log_d), np.exp(log_loss), start=start)
        ref = course.fit_parametric(np.exp(log_n), np.exp(log_d), np.exp(log_loss), start=start)
        c.close((mine.E, mine.alpha, mine.beta, mine.a), (ref.E, ref.alpha, ref.beta, ref.a),
                "the fit's (E, α, β, a)", atol=1e-4, rtol=1e-4)


# ---- 4.answer_scores ---------------------------------------------------------------------------------------


def _answers(count: int, length: int) -> tuple[list[str], list[str]]:
    """Correct fixed-width answers, and written ones: most right, some with wrong digits, some cut short or
    empty, some a digit too long."""
    rng = np.random.default_rng(0)
    answers = [f"{rng.integers(0, 10**length):0{length}d}" for _ in range(count)]
    written = []
    for answer in answers:
        w = list(answer)
        for i in range(length):
            if rng.random() < 0.25:
                w[i] = str(rng.integers(0, 10))
        kind = rng.random()
        if kind < 0.15:
            w = w[: rng.integers(0, length)]  # cut short, perhaps to nothing
        elif kind < 0.25:
            w.append(str(rng.integers(0, 10)))  # one digit too many
        written.append("".join(w))
    return written, answers


KEYS = ("exact_match", "per_digit", "per_digit_power", "position_product", "edit_distance", "digit_accuracy",
        "prefix_exact_match")


def _same_scores(c, mine, ref):
    c.true(isinstance(mine, dict), f"returned {type(mine).__name__}; return a dict of the metrics")
    missing = [key for key in KEYS if key not in mine]
    c.true(not missing, f"the scores lack {missing}")
    for key in KEYS:
        value = mine[key]
        if isinstance(ref[key], list):
            c.true(isinstance(value, list), f"{key} is {type(value).__name__}; return a list (.tolist())")
        c.close(value, ref[key], key, atol=1e-12, rtol=1e-9)


def check_answer_scores(course, yours, case):
    sets = {
        "four answers by hand: right, a wrong last digit, right, cut short after 2":
            (["0168", "1001", "1998", "05"], ["0168", "1000", "1998", "0500"]),
        "every answer right": (["0168", "1000"], ["0168", "1000"]),
        "a digit too many is not an exact match": (["01680", "1000", "19989"], ["0168", "1000", "1998"]),
        "nothing written (a scratchpad line without '>')": (["", "1000", ""], ["0168", "1000", "1998"]),
        "one-digit answers": (["3", "7", "", "5"], ["3", "8", "1", "5"]),
        "200 random 4-digit answers: wrong digits, cut short, too long": _answers(200, 4),
        "100 random 6-digit answers": _answers(100, 6),
    }
    for name, (written, answers) in sets.items():
        shown = ", ".join(repr(w) for w in written[:4]) + (", ..." if len(written) > 4 else "")
        with case(name, given=f"written {shown} against {', '.join(map(repr, answers[:4]))}") as c:
            _same_scores(c, yours.answer_scores(written, answers), course.answer_scores(written, answers))


# ---- 4.chinchilla_allocation and 4.prediction --------------------------------------------------------------


def check_allocation(course, yours, case):
    planner = importlib.import_module(f"{CHAPTER}.planner")
    surfaces = {**planner.PUBLISHED_SURFACES,
                "alpha above beta": course.LossSurface(E=1.5, A=900.0, B=150.0, alpha=0.45, beta=0.25)}
    for name, surface in surfaces.items():
        for compute in (6.0, 2.21e19, 3.14e23, np.array([1e15, 1e18, 1e21, 1e24])):
            with case(f"{name} constants at C = {compute}", given=f"{surface}, compute = {compute!r}") as c:
                mine = yours.ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute)
                ref = course.ChinchillaPlanner(surface).get_optimal_params_and_tokens(compute)
                c.true(isinstance(mine, tuple) and len(mine) == 2, "return (N_opt, D_opt)")
                for what, a, b in zip(("N_opt", "D_opt"), mine, ref, strict=True):
                    c.close(torch.as_tensor(np.asarray(a, dtype=float)),
                            torch.as_tensor(np.asarray(b, dtype=float)), what, atol=0.0, rtol=1e-9)
    with case("6 N_opt D_opt spends exactly C", given="epoch-2024 constants, C from 1e15 to 1e24") as c:
        compute = np.geomspace(1e15, 1e24, 10)
        n, d = yours.ChinchillaPlanner("epoch-2024").get_optimal_params_and_tokens(compute)
        c.close(torch.as_tensor(6 * np.asarray(n) * np.asarray(d)), torch.as_tensor(compute), "6 N_opt D_opt",
                atol=0.0, rtol=1e-9)


def _runs_of(course, surface, budgets, spacing: float = 1.6):
    """A kaplan-counted IsoFLOP sweep of `surface`: seven sizes around each budget's optimum."""
    planner = importlib.import_module(f"{CHAPTER}.planner")
    results = importlib.import_module(f"{CHAPTER}.results")
    n_opt, _ = planner.ChinchillaPlanner(surface).get_optimal_params_and_tokens(np.asarray(budgets))
    n = (n_opt[:, None] * spacing ** np.arange(-3, 4)[None, :]).ravel()
    budget = np.repeat(budgets, 7)
    d = budget / (6 * n)
    return results.Sweep("kaplan", budget, n, d, budget, surface.loss(n, d))


def check_prediction(course, yours, case):
    chinchilla = importlib.import_module(f"{CHAPTER}.chinchilla")
    truth = chinchilla.LossSurface(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
    for budgets, ahead in (((1e18, 2e18, 4e18), 4.0), ((1e19, 1e20, 1e21), 10.0), ((3e17, 6e17), 8.0)):
        runs = _runs_of(course, truth, np.array(budgets))
        target = ahead * max(budgets)
        with case(f"budgets {budgets}: predicted at {target:.2g}", given="seven sizes a factor 1.6 apart "
                  "around each budget's optimum of Chinchilla's surface, no noise") as c:
            mine, ref = yours.predict(runs, target), course.predict(runs, target)
            c.true(isinstance(mine, dict) and set(mine) >= set(ref), f"return a dict with {sorted(ref)}")
            for key in ref:
                _number(c, mine[key], ref[key], f"predict(...)['{key}']", rtol=1e-7)
    with case("noisy losses: least squares through every budget's minimum",
              given="five budgets, 1e18 to 1.6e19, seven sizes each, 1% noise on every loss (seeded)") as c:
        runs = _runs_of(course, truth, np.geomspace(1e18, 1.6e19, 5))
        noise = np.random.default_rng(4).standard_normal(runs.loss.size)
        noisy = runs.with_loss(runs.loss * np.exp(0.01 * noise))
        mine, ref = yours.predict(noisy, 6.4e19), course.predict(noisy, 6.4e19)
        for key in ref:
            _number(c, mine[key], ref[key], f"predict(...)['{key}']", rtol=1e-7)
    with case("a single budget: no line to carry (NaN)", given="one budget, 1e18, seven sizes") as c:
        runs = _runs_of(course, truth, np.array([1e18]))
        mine, ref = yours.predict(runs, 4e18), course.predict(runs, 4e18)
        for key in ref:
            _number(c, mine[key], ref[key], f"predict(...)['{key}']")
    with case("a budget whose minimum lies outside its sizes: no prediction (NaN)",
              given="three budgets, the largest's runs all 30 times too small") as c:
        runs = _runs_of(course, truth, np.array([1e18, 2e18, 4e18]))
        shrunk = runs.n.copy()
        shrunk[runs.budget == 4e18] /= 30
        moved = type(runs)("kaplan", runs.budget, shrunk, runs.budget / (6 * shrunk), runs.budget,
                           truth.loss(shrunk, runs.budget / (6 * shrunk)))
        mine, ref = yours.predict(moved, 1.6e19), course.predict(moved, 1.6e19)
        for key in ref:
            _number(c, mine[key], ref[key], f"predict(...)['{key}']")


TASKS = [
    Task(
        id="4.parameters",
        title="Kaplan's N: the parameters without the embeddings",
        file="phase1_foundation/project4_scaling/model.py",
        functions=("GPT.num_parameters", "non_embedding_parameters", "total_parameters"),
        difficulty=2,
        asks="Count the parameters twice, from the tensors and by formula. num_parameters counts the\n"
             "model's tensors (a tied matrix once); with non_embedding=True it leaves out the tables:\n"
             "wte, wpe and lm_head (the head too when it is untied). non_embedding_parameters(n_layer,\n"
             "n_embd) is the exact count of the blocks and the final LayerNorm; total_parameters(config)\n"
             "adds the token and position tables (the tied head is the token table).",
        hints=(
            "self.parameters() yields a shared tensor once; leave the tables out by identity (id(p)). For "
            "the formula, count one block with d = n_embd: c_attn (d -> 3d) and c_proj (d -> d), the MLP's "
            "c_fc (d -> 4d) and c_proj (4d -> d), each a weight and a bias, and two LayerNorms.",
            "Kaplan's 12·n_layer·d² counts the weight matrices only; the exact N adds every Linear's bias "
            "(its output width), every LayerNorm's gain and shift (d each), and the final LayerNorm after "
            "the blocks. The tied head is the token table: count it once, and never in N.",
            "Weights per block: 3d² + d² + 4d² + 4d² = 12d²; biases 3d + d + 4d + d = 9d; LayerNorms 4d: so "
            "n_layer·(12d² + 13d) + 2d (ln_f). The tables add (vocab_size + block_size)·d.",
        ),
        check=check_parameters,
        tests=(TESTS + "test_model.py::test_counts_match_the_formulas_for_random_shapes",
               TESTS + "test_model.py::test_an_untied_head_counts_as_a_table"),
        mistakes=(
            Mistake("N as 12·n_layer·d² alone (Eq. 2.1), without biases and LayerNorms",
                    (("n_layer * (12 * n_embd**2 + 13 * n_embd) + 2 * n_embd", "12 * n_layer * n_embd**2"),)),
            Mistake("the final LayerNorm left out of N",
                    (("+ 13 * n_embd) + 2 * n_embd", "+ 13 * n_embd)"),)),
            Mistake("the position table counted in N",
                    (("for p in (self.wte.weight, self.wpe.weight, self.lm_head.weight):",
                      "for p in (self.wte.weight, self.lm_head.weight):"),)),
            Mistake("an untied head counted in N",
                    (("for p in (self.wte.weight, self.wpe.weight, self.lm_head.weight):",
                      "for p in (self.wte.weight, self.wpe.weight):"),)),
            Mistake("the tied head counted a second time in the total",
                    (("(config.vocab_size + config.block_size)",
                      "(2 * config.vocab_size + config.block_size)"),)),
        ),
    ),
    Task(
        id="4.flops_per_token",
        title="training FLOPs per token: 6N, Kaplan's and Chinchilla's",
        file="phase1_foundation/project4_scaling/model.py",
        functions=("flops_per_token",),
        difficulty=3,
        asks="Training FLOPs (forward and backward, 3 x the forward) per token of a config, three ways:\n"
             "'6N' with N = non_embedding_parameters; 'kaplan' (Kaplan Table 1): forward 2N plus\n"
             "2·n_layer·n_ctx·d_model for the attention over the context (n_ctx = block_size); 'chinchilla'\n"
             "(Hoffmann App. F): every matmul of a forward pass over block_size tokens, embeddings and the\n"
             "output head included, plus the softmax, divided by the tokens. Any other method: ValueError.",
        hints=(
            "A matmul of an (m, k) by a (k, n) matrix costs 2·m·k·n FLOPs. App. F's key_size·num_heads is "
            "d_model here; its ffw_size is 4·d_model. Count one sequence of T = block_size tokens, then "
            "divide by T.",
            "Traps: N is non_embedding_parameters, not the total; every method is 3 times its forward pass "
            "(the backward costs two); App. F's key_size·num_heads is the whole width d, not one head's; and "
            "App. F counts one sequence, so it still has to be divided by T.",
            "App. F per layer, for T tokens: q, k, v 2·3·T·d·d; the query-key logits 2·T·T·d; the softmax "
            "3·n_head·T·T; the weighted sum of values 2·T·T·d; the output projection 2·T·d·d; the MLP "
            "2·T·(d·4d + 4d·d).",
            "Chinchilla: forward = 2·T·V·d (embeddings) + n_layer·(attention + MLP) + 2·T·d·V (logits), and "
            "the answer is 3·forward / T. Kaplan: 3·(2N + 2·n_layer·T·d); 6N: 6·N; any other method raises "
            "ValueError.",
        ),
        check=check_flops,
        tests=(TESTS + "test_model.py::test_6n_and_kaplan",
               TESTS + "test_model.py::test_chinchilla_against_a_hand_count_of_appendix_f",
               TESTS + "test_model.py::test_measured_forward_flops_relate_to_kaplan_and_chinchilla"),
        mistakes=(
            Mistake("6N counted with the embeddings",
                    (("(non_embedding_parameters(config.n_layer, config.n_embd), config.n_embd",
                      "(total_parameters(config), config.n_embd"),)),
            Mistake("Kaplan's attention over the context left out",
                    (("3.0 * (2 * n + 2 * L * T * d)", "3.0 * (2 * n)"),)),
            Mistake("the forward pass alone: no factor 3 for the backward",
                    (("3.0 * (2 * n + 2 * L * T * d)", "2 * n + 2 * L * T * d"),
                     ("3.0 * forward / T", "forward / T"))),
            Mistake("App. F's key_size·num_heads taken as one head's size",
                    (("heads_width = d ", "heads_width = d // config.n_head "),)),
            Mistake("App. F's softmax left out", (("+ 3 * config.n_head * T * T", "+ 0"),)),
            Mistake("App. F per sequence, not per token", (("3.0 * forward / T", "3.0 * forward"),)),
        ),
    ),
    Task(
        id="4.isoflop_minimum",
        title="an IsoFLOP parabola's minimum (Chinchilla Approach 2)",
        file="phase1_foundation/project4_scaling/chinchilla.py",
        functions=("isoflop_parabola", "isoflop_minimum"),
        difficulty=2,
        asks="isoflop_parabola: (c2, c1, c0) of loss ≈ c2·u² + c1·u + c0 with u = ln x, fitted to one\n"
             "budget's runs. isoflop_minimum: the x at that parabola's minimum, and None; or (nan, why)\n"
             "with fewer than 3 distinct x or a parabola opening downward; or (x_min, why) when x_min lies\n"
             "outside the x trained, the why saying 'add larger models' or 'add smaller models'\n"
             "(_OUTSIDE[quantity] has the words).",
        hints=(
            "Fit in ln N, not in N: along an IsoFLOP line the loss is close to a parabola in ln N. "
            "np.polyfit(u, loss, 2) returns the coefficients highest power first.",
            "Check what cannot be trusted before you trust the vertex: fewer than 3 distinct x (np.unique) "
            "fix no parabola, and c2 <= 0 has no minimum (it opens downward). The vertex is in ln x: take it "
            "back with exp.",
            "The vertex of c2·u² + c1·u + c0 is at u = -c1 / (2·c2); x_min = exp(u). Compare it with x.min() "
            "and x.max(); _OUTSIDE[quantity] is (what was trained, the models to add when x_min is above, "
            "when below).",
        ),
        check=check_isoflop,
        tests=(TESTS + "test_laws.py::test_approach_2_reports_a_budget_whose_minimum_lies_outside_the_sizes"
                       "_trained",
               TESTS + "test_laws.py::test_approach_2_recovers_the_exponents",
               TESTS + "test_laws.py::test_approach_2s_d_parabola_gives_c_over_6_n_opt_when_every_run_has_d_c"
                       "_over_6n"),
        mistakes=(
            Mistake("the parabola fitted in N, not ln N",
                    (("np.polyfit(np.log(x), loss, 2)", "np.polyfit(x, loss, 2)"),
                     ("np.exp(-c1 / (2 * c2))", "-c1 / (2 * c2)"))),
            Mistake("the vertex's sign wrong: +c1 / (2·c2)",
                    (("np.exp(-c1 / (2 * c2))", "np.exp(c1 / (2 * c2))"),)),
            Mistake("the vertex at -c1 / c2", (("np.exp(-c1 / (2 * c2))", "np.exp(-c1 / c2)"),)),
            Mistake("the minimum left in ln N", (("np.exp(-c1 / (2 * c2))", "-c1 / (2 * c2)"),)),
            Mistake("a parabola opening downward taken for a minimum", (("if c2 <= 0:", "if False:"),)),
            Mistake("a minimum outside the runs trusted",
                    (("if not x.min() <= x_min <= x.max():", "if False:"),)),
        ),
    ),
    Task(
        id="4.huber_objective",
        title="Approach 3's objective: Huber on the log loss, and its gradient",
        file="phase1_foundation/project4_scaling/chinchilla.py",
        functions=("_huber", "_huber_and_gradient"),
        difficulty=3,
        asks="_huber(residual, delta): Huber_δ with δ = delta (HUBER_DELTA, 1e-3, by default): r²/2 within\n"
             "δ of zero, δ·(|r| - δ/2) beyond. _huber_and_gradient(params, log_n, log_d, log_loss, delta):\n"
             "with params = (a, b, e, α, β),\n"
             "the predicted log L = LSE(a - α·ln N, b - β·ln D, e), ln(A/N^α + B/D^β + E) by log-sum-exp;\n"
             "return the sum over the runs of Huber_δ(predicted - log L), and its gradient in\n"
             "(a, b, e, α, β).",
        hints=(
            "params = (a, b, e, α, β) are ln A, ln B, ln E and the exponents; log_n, log_d, log_loss are "
            "(runs,). The three terms a - α·ln N, b - β·ln D and e stack into a (3, runs) array, and the "
            "predicted log L is their log-sum-exp over axis 0.",
            "The residual is in logs: predicted log L minus log L, never L_hat - L. Use scipy's logsumexp, "
            "not log(sum(exp)): exp(800) overflows, the LSE does not. Huber's linear part, δ·(|r| - δ/2), "
            "meets r²/2 at |r| = δ without a jump.",
            "Chain rule: d Huber/d r = clip(r, -δ, δ); d LSE/d term_k = exp(term_k - LSE), each term's share "
            "(a softmax over the three). Term 0 moves with a (1) and α (-ln N), term 1 with b (1) and β "
            "(-ln D), term 2 with e (1).",
            "So d/da = Σ clip·share_0, d/db = Σ clip·share_1, d/de = Σ clip·share_2, d/dα = -Σ "
            "clip·share_0·ln N, d/dβ = -Σ clip·share_1·ln D; return (Σ _huber(residual), those five as an "
            "array).",
        ),
        check=check_huber,
        tests=(TESTS + "test_laws.py::test_the_huber_gradient_is_the_derivative_of_the_huber_loss",
               TESTS + "test_laws.py::test_approach_3_recovers_the_surface_and_its_exponents"),
        mistakes=(
            Mistake("Huber on the loss, not the log loss",
                    (("residual = predicted - log_loss",
                      "residual = np.exp(predicted) - np.exp(log_loss)"),)),
            Mistake("δ = 1 instead of 1e-3 (least squares for every residual here)",
                    (("HUBER_DELTA", "1.0"),)),
            Mistake("the linear part without -δ/2: Huber jumps at δ",
                    (("(np.abs(residual) - 0.5 * delta)", "np.abs(residual)"),)),
            Mistake("the gradient of least squares: the residual not clipped",
                    (("np.clip(residual, -delta, delta)", "residual"),)),
            Mistake("L_hat as a sum of exponentials, not a log-sum-exp",
                    (("logsumexp(terms, axis=0)", "np.log(np.exp(terms).sum(axis=0))"),)),
            Mistake("the exponents' gradients with the wrong sign",
                    (("-(pull[0] * log_n).sum()", "(pull[0] * log_n).sum()"),
                     ("-(pull[1] * log_d).sum()", "(pull[1] * log_d).sum()"))),
        ),
    ),
    Task(
        id="4.chinchilla_allocation",
        title="Chinchilla's closed-form allocation: N_opt and D_opt from E, A, B, α, β",
        file="phase1_foundation/project4_scaling/planner.py",
        functions=("ChinchillaPlanner.get_optimal_params_and_tokens",),
        difficulty=1,
        asks="Minimise L = E + A/N^α + B/D^β subject to 6ND = C (Chinchilla Eq. 4): return (N_opt, D_opt)\n"
             "for a budget `compute` (a number or an array), from self.surface's constants. a = β/(α+β)\n"
             "and b = α/(α+β) are the surface's properties .a and .b.",
        hints=(
            "Substitute D = C / (6N): L(N) = E + A N^-α + B (C/6)^-β N^β. Set dL/dN = 0 and solve for N.",
            "-α A N^(-α-1) + β B (C/6)^-β N^(β-1) = 0 gives N^(α+β) = (αA / (βB)) (C/6)^β. So N_opt = "
            "G (C/6)^(β/(α+β)) with G = (αA / (βB))^(1/(α+β)).",
            "D_opt = C / (6 N_opt) = (C/6)^(α/(α+β)) / G. Use numpy's ** so an array of budgets works.",
        ),
        check=check_allocation,
        tests=(TESTS + "test_laws.py::test_the_2024_refit_gives_about_19_tokens_per_parameter_and_is_the"
                       "_default",),
        mistakes=(
            Mistake("C instead of C / 6 (the 6 of C = 6ND forgotten)",
                    (("g * (compute / 6) ** s.a, (compute / 6) ** s.b / g",
                      "g * compute ** s.a, compute ** s.b / g"),)),
            Mistake("G without its 1/(α+β) power", (("** (1 / (s.alpha + s.beta))", ""),)),
            Mistake("α and β swapped in G",
                    (("(s.alpha * s.A / (s.beta * s.B))", "(s.beta * s.A / (s.alpha * s.B))"),)),
        ),
    ),
    Task(
        id="4.prediction",
        title="predict, then train: a sweep's minima carried to a larger budget",
        file="phase1_foundation/project4_scaling/prediction.py",
        functions=("predict",),
        difficulty=2,
        asks="From a sweep's IsoFLOP minima (minima(sweep): C, N_opt, L_opt of each budget whose parabola\n"
             "has its minimum inside the sizes), fit N_opt ∝ C^a and L_opt ∝ C^-γ by least squares in\n"
             "log-log and carry both to `budget`. Return {'n_opt', 'loss', 'a', 'gamma'}, all NaN when some\n"
             "budget has no minimum inside its sizes, or fewer than two budgets have one.",
        hints=(
            "minima(sweep) gives three arrays (C, N_opt, L_opt), one entry per budget that kept its minimum; "
            "compare its length with len(sweep.budgets()).",
            "A power law is a line in logs: np.polyfit(np.log(C), np.log(N_opt), 1) gives (slope, "
            "intercept). "
            "The slope of ln L_opt against ln C is -γ.",
            "N_opt(budget) = exp(intercept + slope · ln budget); the same for the loss; gamma = -slope.",
        ),
        check=check_prediction,
        tests=(TESTS + "test_laws.py::test_the_prediction_carries_the_minima_to_a_larger_budget_and_the"
                       "_command_tests_it",),
        mistakes=(
            Mistake("a prediction from the budgets that kept a minimum, when one lost it",
                    (("if len(compute) < max(2, len(sweep.budgets())):", "if len(compute) < 2:"),)),
            Mistake("gamma with the wrong sign", (('"gamma": float(-slope)', '"gamma": float(slope)'),)),
            Mistake("the loss carried as a line in C, not a power law",
                    (("np.polyfit(np.log(compute), np.log(loss), 1)", "np.polyfit(np.log(compute), loss, 1)"),
                     ("float(np.exp(log_loss + slope * np.log(budget)))",
                      "float(log_loss + slope * np.log(budget))"))),
        ),
    ),
    Task(
        id="4.answer_scores",
        title="exact match against per-digit accuracy",
        file="phase1_foundation/project4_scaling/evaluate.py",
        functions=("answer_scores",),
        difficulty=2,
        asks="Score written answers against the correct ones (all of one length L, zero-padded):\n"
             "position i of one is position i of every other, and a missing digit is wrong. Return the dict\n"
             "the docstring lists: exact_match, per_digit, per_digit_power, position_product, the mean\n"
             "edit_distance (edit_distance above), and the lists digit_accuracy and prefix_exact_match.",
        hints=(
            "Build a (P, L) array of booleans: right[p, i] is True when answer p's written text has a digit "
            "at i and it is the correct one. Exact match compares whole strings: a digit too many is wrong.",
            "The two estimates of exact match differ: per_digit_power uses one share for every position, "
            "position_product each position's own. prefix_exact_match decides for each answer whether its "
            "first l digits are all right, then averages over the answers; the cumulative product of the "
            "positions' averages is another number.",
            "digit_accuracy is right.mean(0), (L,); per_digit its mean, position_product its product, "
            "per_digit_power per_digit ** L; prefix_exact_match is np.cumprod(right, axis=1).mean(0). Return "
            "floats, and lists via .tolist().",
        ),
        check=check_answer_scores,
        tests=(TESTS + "test_emergence.py::test_exact_match_follows_the_product_of_the_positions_not_the_mean"
                       "_to_the_lth",
               TESTS + "test_emergence.py::test_a_wrong_model_is_scored_as_by_hand_and_each_line_is_cut_at"
                       "_its_newline",
               TESTS + "test_emergence.py::test_the_scratchpad_is_scored_on_the_answer_after_its_steps"),
        mistakes=(
            Mistake("exact match as the mean per-digit accuracy",
                    (("float(np.mean([w == answer for w, answer in zip(written, answers, strict=True)]))",
                      "float(right.mean())"),)),
            Mistake("a missing digit counted as right",
                    (("i < len(w) and w[i] == answer[i]", "i >= len(w) or w[i] == answer[i]"),)),
            Mistake("answers aligned at their last digit, not their first",
                    (("i < len(w) and w[i] == answer[i]", "w.rjust(length)[-length:][i] == answer[i]"),)),
            Mistake("position_product as per_digit ** L",
                    (("np.prod(digit_accuracy)", "digit_accuracy.mean() ** length"),)),
            Mistake("prefix exact match as the cumulative product of the positions' accuracies",
                    (("np.cumprod(right, axis=1).mean(0)", "np.cumprod(right.mean(0))"),)),
        ),
    ),
]
