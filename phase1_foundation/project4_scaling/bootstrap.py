"""How sure: the bootstrap interval beside every exponent laws.py prints.

A sweep of a few budgets and a handful of sizes fits its exponents from a few dozen noisy losses. Refitting
resampled sweeps shows how far the same fit moves when the runs move as much as their noise; the papers'
a ≈ 0.5 and 0.73 are only told apart by a sweep whose interval excludes one of them.
"""

from collections.abc import Callable

import numpy as np

from phase1_foundation.project4_scaling.results import Sweep


def bootstrap(sweep: Sweep, estimate: Callable[[Sweep], dict[str, float]], resamples: int = 100,
              seed: int = 0, percentiles: tuple[float, float] = (10, 90)) -> dict[str, tuple[float, float]]:
    """Percentile intervals of `estimate`'s numbers over resampled sweeps.

    Each resample draws every budget's runs from that budget with replacement, as many as it had, so every
    IsoFLOP curve stays in. A resample whose estimate is not finite (e.g. Approach 2 with fewer than two
    trusted budgets) is dropped; {} if none is left.
    """
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(sweep.budget == budget) for budget in sweep.budgets()]  # run indices per budget
    draws = []
    for _ in range(resamples):
        index = np.concatenate([rng.choice(group, size=len(group)) for group in groups])  # (runs,)
        numbers = estimate(sweep.take(index))
        if all(np.isfinite(value) for value in numbers.values()):
            draws.append(numbers)
    if not draws:
        return {}
    return {key: tuple(float(p) for p in np.percentile([draw[key] for draw in draws], percentiles))
            for key in draws[0]}
