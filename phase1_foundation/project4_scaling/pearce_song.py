"""Pearce & Song 2024, "Reconciling Kaplan and Chinchilla Scaling Laws": the counting alone, with no runs.

Take a loss surface fitted in Chinchilla's counting, L(N, D) with N every parameter, and ask it Kaplan's
question in Kaplan's counting: at a compute C = 6·N_E·D, with N_E the non-embedding parameters, which N_E
gives the lowest loss? A model's embeddings, (vocabulary + context) x d_model, are most of a small model and
little of a large one, so the best N_E grows faster with C at small budgets than at large ones: the local
exponent a = d ln N_E,opt / d ln C starts near Kaplan's 0.73 and falls to the surface's own β/(α+β). Pearce &
Song find this accounts for much of the two papers' disagreement; the numbers depend on the shapes assumed.
"""

import numpy as np

from phase1_foundation.project4_scaling.chinchilla import LossSurface

# Models shaped as GPT-2's family: d_model = 64 · n_layer, its vocabulary, a context of 1024
VOCAB, CONTEXT, ASPECT = 50257, 1024, 64
# Kaplan's runs reached about 1e21 FLOPs (6·N_E·D); below 1e15 the best model has less than one layer
RANGES = ((1e15, 1e18), (1e18, 1e21), (1e21, 1e24))


def kaplan_counted_optimum(surface: LossSurface, compute: np.ndarray) -> np.ndarray:
    """N_E,opt at each Kaplan-counted C = 6·N_E·D: the width whose surface loss, with N = N_E + the tables and
    D = C / (6·N_E), is lowest, over a fine grid of widths."""
    width = np.geomspace(ASPECT, 64_000, 20_000)  # (widths,) d_model, from one layer up
    n_e = 12 * (width / ASPECT) * width**2  # Kaplan Eq. 2.1: 12 · n_layer · d_model²
    n_all = n_e + (VOCAB + CONTEXT) * width  # (widths,) the tables counted in
    tokens = np.asarray(compute, dtype=float)[:, None] / (6 * n_e)  # (budgets, widths)
    return n_e[np.argmin(surface.loss(n_all, tokens), axis=1)]  # (budgets,)


def local_exponents(surface: LossSurface) -> list[tuple[float, float, float]]:
    """(C from, C to, a): the slope of ln N_E,opt against ln C over each of RANGES."""
    slopes = []
    for low, high in RANGES:
        compute = np.geomspace(low, high, 41)
        a, _ = np.polyfit(np.log(compute), np.log(kaplan_counted_optimum(surface, compute)), 1)
        slopes.append((low, high, float(a)))
    return slopes


def embedding_flops_share(config) -> float:
    """The share of a model's App. F FLOPs spent on the embedding lookup, counted as a matmul, and on the
    output logits: 2·V·d_model FLOPs each per token forward, times 3 with the backward."""
    from phase1_foundation.project4_scaling.model import flops_per_token  # torch, only when asked

    return 3 * 4 * config.vocab_size * config.n_embd / flops_per_token(config, "chinchilla")
