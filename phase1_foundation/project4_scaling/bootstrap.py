"""How sure: the bootstrap interval beside every exponent laws.py prints.

A sweep of a few budgets and a handful of sizes fits its exponents from a few dozen noisy losses. Had the
runs been trained again with other seeds, every loss would have moved by about as much as seeds move it, and
the fit with it. The bootstrap plays that out: it keeps every run where it is (the design), moves each loss
by a deviation drawn from the measured noise, and fits again. Resampling the runs themselves instead would
delete design points, and with them the very runs an IsoFLOP minimum rests on.

Seeds move a short run further than a long one, so a run draws its deviation from the seeds' deviations
measured at the run lengths nearest its own (noise_by_length), not from one pool of them all.

A resample whose fit gives no exponent (a parabola without a minimum inside the sizes, a surface whose
exponent is not identified) is counted, never dropped silently. An exponent is "determined" when at least
MIN_SHARE of the resamples gave one and the interval they span is at most MAX_WIDTH wide: a count alone would
call an interval as wide as the papers' disagreement a measurement.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from phase1_foundation.project4_scaling.results import Sweep

MIN_SHARE = 0.9  # an interval needs an exponent from at least this share of the resamples
# An exponent's interval no wider than this: Kaplan's a = 0.73 and Chinchilla's 0.5 lie 0.23 apart, and an
# interval wider than the gap cannot say which of the two a sweep agrees with
MAX_WIDTH = 0.2
NEAREST_POINTS = 3  # a run's noise: the seeds' deviations at this many repeated points nearest in length


@dataclass(frozen=True)
class Interval:
    """The 10th to 90th percentile (an 80% interval) of an estimate over the resamples that gave one, how
    many did, and the widest interval that still counts as a measurement."""

    low: float
    high: float
    succeeded: int
    resamples: int
    max_width: float = MAX_WIDTH

    @property
    def enough(self) -> bool:
        return self.succeeded >= MIN_SHARE * self.resamples

    @property
    def determined(self) -> bool:
        return self.enough and self.high - self.low <= self.max_width

    def __str__(self) -> str:
        count = f"{self.succeeded}/{self.resamples}"
        if not self.enough:
            return f"not determined ({count})"
        low, high = (f"{value:.2f}".replace("-0.00", "0.00") for value in (self.low, self.high))
        text = f"[{low}, {high}] ({count})"
        return text if self.determined else f"{text} too wide"


def resampled(sweep: Sweep, deviations: np.ndarray | list[np.ndarray], resamples: int = 100, seed: int = 0
              ) -> Iterator[Sweep]:
    """The sweep again `resamples` times, every log-loss moved by a deviation drawn, with replacement, from
    the measured noise in ln L: `deviations`, one pool for every run (a fit's residuals), or a list of one
    pool per run (noise_by_length). Nothing when a pool is empty: no measured noise, nothing to resample."""
    rng = np.random.default_rng(seed)
    if isinstance(deviations, np.ndarray):
        deviations = [deviations] * sweep.loss.size
    pools = [np.asarray(pool, dtype=float) for pool in deviations]
    if len(pools) != sweep.loss.size:
        raise ValueError(f"{len(pools)} pools of noise for {sweep.loss.size} runs: one per run, or one array")
    if any(pool.size == 0 for pool in pools):
        return
    for _ in range(resamples):
        noise = np.array([rng.choice(pool) for pool in pools])  # (runs,)
        yield sweep.with_loss(sweep.loss * np.exp(noise))


def bootstrap(sweep: Sweep, estimate: Callable[[Sweep], dict[str, float]],
              deviations: np.ndarray | list[np.ndarray], resamples: int = 100, seed: int = 0,
              percentiles: tuple[float, float] = (10, 90), max_width: float = MAX_WIDTH
              ) -> dict[str, Interval]:
    """Intervals of `estimate`'s numbers over the resampled sweeps (resampled), each counting how many
    resamples gave a number."""
    draws: dict[str, list[float]] = {}
    for sweep_again in resampled(sweep, deviations, resamples, seed):
        for key, value in estimate(sweep_again).items():
            draws.setdefault(key, [])
            if np.isfinite(value):
                draws[key].append(value)
    if not draws:  # no measured noise: no resamples, no interval
        draws = {key: [] for key in estimate(sweep)}
    return {key: Interval(*(np.percentile(values, percentiles) if values else (np.nan, np.nan)),
                          succeeded=len(values), resamples=resamples, max_width=max_width)
            for key, values in draws.items()}


def with_interval(numbers: dict, key: str) -> str:
    """'0.45 [0.41, 0.49] (97/100)': the estimate, its interval and how many resamples gave one; or why
    there is none."""
    if not np.isfinite(numbers[key]):
        return "not determined"
    interval: Interval = numbers["interval"][key]
    if not interval.determined:
        return f"{numbers[key]:.2f}, {interval}"
    return f"{numbers[key]:.2f} {interval}"


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


def noise_by_length(tokens: np.ndarray, measured: list[tuple[float, np.ndarray]],
                    nearest: int = NEAREST_POINTS) -> list[np.ndarray]:
    """One pool of deviations per run of `tokens` D: the seeds' deviations (seed_deviations) of the `nearest`
    repeated points closest to it in ln D. `measured` holds each repeated point's D and its deviations."""
    lengths = np.log([length for length, _ in measured])  # (points,)
    pools = []
    for length in np.log(np.asarray(tokens, dtype=float)):
        closest = np.argsort(np.abs(lengths - length), kind="stable")[:nearest]
        pools.append(np.concatenate([measured[i][1] for i in closest]))
    return pools


def pools_of(deviations: np.ndarray | list[np.ndarray], runs: np.ndarray) -> np.ndarray | list[np.ndarray]:
    """The noise of the runs a boolean mask keeps (Sweep.take): one pool for every run stays as it is."""
    if isinstance(deviations, np.ndarray):
        return deviations
    return [deviations[i] for i in np.flatnonzero(runs)]
