"""A second correct implementation of each of chapter 4's tasks, written differently from the course's.

tests/test_learn.py checks that `learn check` accepts each of them: a check must not insist on the course's
way of writing a function, only on what it computes.
"""

SECOND_WAYS = {
    "4.parameters": {
        "GPT.num_parameters": '''
def num_parameters(self, non_embedding: bool = False) -> int:
    layers = ("blocks.", "ln_f.")  # named_parameters yields a tied matrix once, under its first name
    return sum(p.numel() for name, p in self.named_parameters()
               if not non_embedding or name.startswith(layers))
''',
        "non_embedding_parameters": '''
def non_embedding_parameters(n_layer: int, n_embd: int) -> int:
    d = n_embd
    attention = (d * 3 * d + 3 * d) + (d * d + d)  # c_attn, c_proj: weights and biases
    mlp = (d * 4 * d + 4 * d) + (4 * d * d + d)  # c_fc, c_proj
    norms = 2 * (d + d)  # ln_1, ln_2: a gain and a shift each
    return n_layer * (attention + mlp + norms) + (d + d)  # and ln_f
''',
        "total_parameters": '''
def total_parameters(config: GPTConfig) -> int:
    token_table = config.vocab_size * config.n_embd  # also the tied head
    position_table = config.block_size * config.n_embd
    return token_table + position_table + non_embedding_parameters(config.n_layer, config.n_embd)
''',
    },
    "4.flops_per_token": {"flops_per_token": '''
def flops_per_token(config: GPTConfig, method: str = "6N") -> float:
    d, L, V, T, nh = config.n_embd, config.n_layer, config.vocab_size, config.block_size, config.n_head
    N = sum(p for p in (L * 12 * d * d, L * 13 * d, 2 * d))  # blocks' weights, biases and norms; ln_f
    forward = {
        "6N": lambda: 2 * N,
        "kaplan": lambda: 2 * N + 2 * L * T * d,  # a query against n_ctx keys: scores and the weighted sum
        # App. F per token: the embedding and the head (2Vd each), per layer q, k, v and the output (8d²),
        # logits and values (2·T·d each, every query against T keys), the softmax (3·nh·T), the MLP (16d²)
        "chinchilla": lambda: 2 * V * d + 2 * d * V + L * (8 * d * d + 4 * T * d + 3 * nh * T + 16 * d * d),
    }
    if method not in forward:
        raise ValueError(f"unknown method {method!r}")
    return float(3 * forward[method]())
'''},
    "4.isoflop_minimum": {
        "isoflop_parabola": '''
def isoflop_parabola(x, loss) -> np.ndarray:
    u = np.log(np.asarray(x, dtype=float))
    design = np.stack([u**2, u, np.ones_like(u)], axis=1)  # (runs, 3)
    coefficients, *_ = np.linalg.lstsq(design, np.asarray(loss, dtype=float), rcond=None)
    return coefficients
''',
        "isoflop_minimum": '''
def isoflop_minimum(x, loss, quantity: str = "N") -> tuple[float, str | None]:
    x = np.asarray(x, dtype=float)
    if np.unique(x).size < 3:
        return float("nan"), f"only {np.unique(x).size} distinct {quantity}: no parabola"
    c2, c1, _ = isoflop_parabola(x, loss)
    if not c2 > 0:
        return float("nan"), "the parabola opens downward: it has a maximum, no minimum"
    u_min = -0.5 * c1 / c2
    x_min = float(np.exp(u_min))
    trained, above, below = _OUTSIDE[quantity]
    if u_min > np.log(x).max():
        return x_min, f"minimum at {quantity} = {x_min:.3g}, outside the {trained}: add {above} models"
    if u_min < np.log(x).min():
        return x_min, f"minimum at {quantity} = {x_min:.3g}, outside the {trained}: add {below} models"
    return x_min, None
''',
    },
    "4.huber_objective": {
        "_huber": '''
def _huber(residual: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    from scipy.special import huber

    return huber(delta, residual)
''',
        "_huber_and_gradient": '''
def _huber_and_gradient(params, log_n, log_d, log_loss, delta: float = HUBER_DELTA
                        ) -> tuple[float, np.ndarray]:
    a, b, e, alpha, beta = params
    model_term, data_term = a - alpha * log_n, b - beta * log_d  # ln(A/N^α), ln(B/D^β): (runs,)
    predicted = np.logaddexp(np.logaddexp(model_term, data_term), e)  # (runs,)
    residual = predicted - log_loss
    slope = np.where(np.abs(residual) <= delta, residual, delta * np.sign(residual))
    share_n, share_d, share_e = (np.exp(t - predicted) for t in (model_term, data_term, e))
    jacobian = np.stack([share_n, share_d, share_e * np.ones_like(log_n), -share_n * log_n, -share_d * log_d])
    return float(_huber(residual, delta).sum()), jacobian @ slope  # (5, runs) @ (runs,)
''',
    },
    "4.answer_scores": {"answer_scores": '''
def answer_scores(written: Sequence[str], answers: Sequence[str]) -> dict:
    length, count = len(answers[0]), len(answers)
    right_at = [0] * length  # answers right at each position
    prefix_right = [0] * length  # answers whose first l + 1 digits are right
    exact, distance = 0, 0
    for w, answer in zip(written, answers, strict=True):
        exact += w == answer
        distance += edit_distance(w, answer)
        still = True
        for i, digit in enumerate(answer):
            ok = w[i : i + 1] == digit  # an empty slice where the answer was cut short
            right_at[i] += ok
            still = still and ok
            prefix_right[i] += still
    digit_accuracy = [r / count for r in right_at]
    per_digit = sum(right_at) / (count * length)
    product = 1.0
    for p in digit_accuracy:
        product *= p
    return {"exact_match": exact / count, "per_digit": per_digit, "per_digit_power": per_digit**length,
            "position_product": product, "edit_distance": distance / count, "digit_accuracy": digit_accuracy,
            "prefix_exact_match": [r / count for r in prefix_right]}
'''},
    "4.chinchilla_allocation": {"ChinchillaPlanner.get_optimal_params_and_tokens": '''
def get_optimal_params_and_tokens(self, compute):
    E, A, B, alpha, beta = (self.surface.E, self.surface.A, self.surface.B, self.surface.alpha,
                            self.surface.beta)
    # dL/dN = 0 along D = C / 6N: alpha A N^-alpha = beta B (C/6N)^-beta, solved in logs
    log_n = (np.log(alpha * A / (beta * B)) + beta * np.log(np.asarray(compute) / 6)) / (alpha + beta)
    n = np.exp(log_n)
    return n, np.asarray(compute) / (6 * n)
'''},
    "4.prediction": {"predict": '''
def predict(sweep: Sweep, budget: float) -> dict[str, float]:
    compute, n_opt, loss = minima(sweep)
    keys = ("n_opt", "loss", "a", "gamma")
    if len(compute) != len(sweep.budgets()) or len(compute) < 2:
        return dict.fromkeys(keys, np.nan)
    x = np.log(compute) - np.log(compute).mean()  # centred: the slope is the covariance over the variance
    a = float((x * np.log(n_opt)).sum() / (x * x).sum())
    minus_gamma = float((x * np.log(loss)).sum() / (x * x).sum())
    at = np.log(budget) - np.log(compute).mean()
    return {"n_opt": float(np.exp(np.log(n_opt).mean() + a * at)),
            "loss": float(np.exp(np.log(loss).mean() + minus_gamma * at)), "a": a, "gamma": -minus_gamma}
'''},
}
