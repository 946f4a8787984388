"""How sure: the bootstrap interval beside every exponent laws.py prints.

A sweep of a few budgets and a handful of sizes fits its exponents from a few dozen noisy losses. Had the
runs been trained again with other seeds, every loss would have moved by about as much as seeds move it, and
the fit with it. The bootstrap plays that out: it keeps every run where it is (the design), moves each loss
by a deviation drawn from the measured noise, and fits again. Resampling the runs themselves instead would
delete design points, and with them the very runs an IsoFLOP minimum rests on.

A resample whose fit gives no exponent (a parabola without a minimum inside the sizes, a surface whose
exponent is not identified) is counted, never dropped silently: the interval is that of the resamples that
gave one, and when fewer than MIN_SHARE of them did, the exponent is "not determined".
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from phase1_foundation.project4_scaling.results import Sweep

MIN_SHARE = 0.9  # an interval needs an exponent from at least this share of the resamples


@dataclass(frozen=True)
class Interval:
    """The 10th to 90th percentile of an estimate over the resamples that gave one, and how many did."""

    low: float
    high: float
    succeeded: int
    resamples: int

    @property
    def determined(self) -> bool:
        return self.succeeded >= MIN_SHARE * self.resamples

    def __str__(self) -> str:
        count = f"{self.succeeded}/{self.resamples}"
        if not self.determined:
            return f"not determined ({count})"
        low, high = (f"{value:.2f}".replace("-0.00", "0.00") for value in (self.low, self.high))
        return f"[{low}, {high}] ({count})"


def bootstrap(sweep: Sweep, estimate: Callable[[Sweep], dict[str, float]], deviations: np.ndarray,
              resamples: int = 100, seed: int = 0, percentiles: tuple[float, float] = (10, 90)
              ) -> dict[str, Interval]:
    """Intervals of `estimate`'s numbers over sweeps whose every log-loss moved by a deviation drawn, with
    replacement, from `deviations` (the measured noise in ln L: seeds' spread, or a fit's residuals)."""
    rng = np.random.default_rng(seed)
    deviations = np.asarray(deviations, dtype=float)
    if deviations.size == 0:  # no measured noise: nothing to resample, so no interval
        return {key: Interval(np.nan, np.nan, 0, resamples) for key in estimate(sweep)}
    draws: dict[str, list[float]] = {}
    for _ in range(resamples):
        noise = rng.choice(deviations, size=sweep.loss.size)  # (runs,)
        numbers = estimate(sweep.with_loss(sweep.loss * np.exp(noise)))
        for key, value in numbers.items():
            draws.setdefault(key, [])
            if np.isfinite(value):
                draws[key].append(value)
    return {key: Interval(*(np.percentile(values, percentiles) if values else (np.nan, np.nan)),
                          succeeded=len(values), resamples=resamples)
            for key, values in draws.items()}


def seed_deviations(groups: list[np.ndarray]) -> np.ndarray:
    """The measured noise: each run's ln L minus the mean of its group (one shape at one budget, trained
    with several seeds), scaled by √(k/(k-1)) so that deviations from a mean of k runs are as large as a
    single run's deviation from the truth would be."""
    deviations = []
    for losses in groups:
        log_loss = np.log(np.asarray(losses, dtype=float))
        if log_loss.size > 1:
            k = log_loss.size
            deviations.append((log_loss - log_loss.mean()) * np.sqrt(k / (k - 1)))
    return np.concatenate(deviations) if deviations else np.array([])
