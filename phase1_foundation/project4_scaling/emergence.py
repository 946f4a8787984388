"""Emergence on models you train: a sweep of model sizes, several seeds each, trained on 3-digit addition and
scored by exact match, as Wei et al. plotted abilities, and by continuous metrics, as Schaeffer et al. argued.

    uv run python phase1_foundation/project4_scaling/emergence.py                  # preset picked by device
    uv run python phase1_foundation/project4_scaling/emergence.py --EM_SHAPES=1x16,2x32 --EM_SEEDS=1

Every size trains on the same EM_TOKENS tokens of fresh problems (addition.py), plain or with a scratchpad,
and EmergenceEvaluator (evaluate.py) scores it on the same held-out problems; emergence.png draws the metrics
against N, scratchpad.png the two variants. Results go to OUT_DIR/emergence.jsonl, one line per (variant,
size, seed), rewritten after each model: a rerun skips the finished ones, so Ctrl-C loses only the model in
training. The papers, the settings and what the cpu preset measured: README, "Emergence on models you train".
"""

import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from common.errors import CourseError, run_main
from common.progress import progress
from common.training.config import load_config
from common.training.device import seed_everything
from common.training.interrupt import GracefulInterrupt
from common.training.optim import adamw, set_lr, warmup_cosine
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.addition import (
    HEADERS,
    VOCAB,
    Addition,
    ProblemStream,
    training_batch,
)
from phase1_foundation.project4_scaling.evaluate import EmergenceEvaluator
from phase1_foundation.project4_scaling.figure import new_figure, save_figure
from phase1_foundation.project4_scaling.model import GPT, GPTConfig
from phase1_foundation.project4_scaling.results import read_results, settings_of, write_results
from phase1_foundation.project4_scaling.sweep import parse_shape

SCRIPT = "phase1_foundation/project4_scaling/emergence.py"
RESULTS = "emergence.jsonl"
# The settings a row's numbers depend on besides its key (variant, shape, seed): a rerun reuses rows only if
# these are unchanged. The seeds, shapes and variants are left out, so a rerun with more of them trains only
# the new models.
ROW_SETTINGS = ("EM_DIGITS", "EM_SHOTS", "EM_TOKENS", "EM_BATCH_SIZE", "EM_LR", "EM_HEAD_SIZE",
                "EM_EVAL_PROBLEMS", "EM_EVAL_SEED", "BETAS", "WEIGHT_DECAY", "WARMUP_FRACTION",
                "MIN_LR_RATIO", "GRAD_CLIP")
FIELDS = ("variant", "shape", "seed", "params", "flops", "exact_match", "per_digit", "per_digit_power",
          "position_product", "edit_distance", "log_likelihood", "digit_accuracy", "prefix_exact_match",
          "seconds")  # what the report and the plots read from every row
METRICS = {  # row key: axis label
    "exact_match": "exact match",
    "per_digit": "per-digit accuracy",
    "edit_distance": "token edit distance",
    "log_likelihood": "log p(answer + newline), nats",
}
SUMMARIZED = ("exact_match", "position_product", "per_digit_power", "per_digit", "edit_distance",
              "log_likelihood")  # the metrics whose spread over seeds the report and the plots show


# --- the sweep ----------------------------------------------------------------------------------------------

def check(cfg: SimpleNamespace) -> None:
    """One line for each setting that cannot work, before anything trains."""
    if not 1 <= cfg.EM_DIGITS <= 9:  # a problem (a, b) is numbered a·10^D + b, which must fit in 64 bits
        raise CourseError(f"error: --EM_DIGITS={cfg.EM_DIGITS}; add numbers of 1 to 9 digits")
    if cfg.EM_SHOTS < 0:
        raise CourseError(f"error: --EM_SHOTS={cfg.EM_SHOTS}; show 0 or more exemplars")
    for name in ("EM_SEEDS", "EM_BATCH_SIZE", "EM_HEAD_SIZE"):
        if getattr(cfg, name) < 1:
            raise CourseError(f"error: --{name}={getattr(cfg, name)}; it must be at least 1")
    unknown = [v for v in cfg.EM_VARIANTS if v not in HEADERS]
    if unknown or not cfg.EM_VARIANTS:
        raise CourseError(f"error: unknown variant {unknown[0] if unknown else '(none)'!r}; --EM_VARIANTS "
                          f"takes {', '.join(HEADERS)}")
    if not cfg.EM_SHAPES:
        raise CourseError("error: --EM_SHAPES is empty; name at least one shape, like --EM_SHAPES=2x64")
    for shape in cfg.EM_SHAPES:
        parse_shape(shape, cfg.EM_HEAD_SIZE)
    if 10**cfg.EM_DIGITS * 10**cfg.EM_DIGITS < 2 * cfg.EM_EVAL_PROBLEMS or cfg.EM_EVAL_PROBLEMS < 1:
        raise CourseError(f"error: --EM_EVAL_PROBLEMS={cfg.EM_EVAL_PROBLEMS}; hold out at least 1 "
                          f"and at most "
                          f"half of the {100**cfg.EM_DIGITS:,} {cfg.EM_DIGITS}-digit problems")
    for variant in cfg.EM_VARIANTS:
        row_tokens = Addition(cfg.EM_DIGITS, variant).context(cfg.EM_SHOTS)
        if cfg.EM_TOKENS < cfg.EM_BATCH_SIZE * row_tokens:
            raise CourseError(f"error: --EM_TOKENS={cfg.EM_TOKENS} is less than one batch of the {variant} "
                              f"variant ({cfg.EM_BATCH_SIZE * row_tokens:,} tokens); raise it")


def seeds(cfg: SimpleNamespace) -> list[int]:
    return [cfg.SEED + i for i in range(cfg.EM_SEEDS)]


def make_model(task: Addition, shape: str, shots: int, head_size: int, device: torch.device) -> GPT:
    """A GPT whose context holds one row exactly: the task line, shots + 1 lines, less the last newline."""
    n_layer, n_embd = parse_shape(shape, head_size)
    return GPT(GPTConfig(vocab_size=len(VOCAB), block_size=task.context(shots), n_layer=n_layer,
                         n_head=n_embd // head_size, n_embd=n_embd)).to(device)


def steps_for(task: Addition, cfg: SimpleNamespace) -> int:
    """Optimizer steps that spend EM_TOKENS tokens (rounded down to whole steps)."""
    return cfg.EM_TOKENS // (cfg.EM_BATCH_SIZE * task.context(cfg.EM_SHOTS))


def train_one(task: Addition, shape: str, seed: int, cfg: SimpleNamespace, evaluator: EmergenceEvaluator,
              device: torch.device, bar, interrupt: GracefulInterrupt) -> dict | None:
    """Train one model on fresh problems and score it: its row, or None if Ctrl-C stopped it first."""
    seed_everything(seed)  # the weights; the stream too: every size of one seed reads the same problems
    model = make_model(task, shape, cfg.EM_SHOTS, cfg.EM_HEAD_SIZE, device)
    optimizer = adamw(model, cfg.EM_LR, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    stream = ProblemStream(task.digits, evaluator.problems, seed)
    steps, tokens, start = steps_for(task, cfg), 0, time.perf_counter()
    for step in range(steps):
        if interrupt.requested:
            return None
        set_lr(optimizer, warmup_cosine(step, peak_lr=cfg.EM_LR, total_steps=steps, floor=cfg.MIN_LR_RATIO,
                                        warmup_steps=max(1, round(cfg.WARMUP_FRACTION * steps))))
        x, y = training_batch(task, stream, cfg.EM_BATCH_SIZE, cfg.EM_SHOTS, device)  # (B, T) each
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        tokens += x.numel()
        if step % 10 == 0 or step == steps - 1:  # item() waits for the device: not at every step
            bar.set_postfix(run=f"{task.variant} {shape} seed {seed}", loss=f"{loss.item():.3f}",
                            refresh=False)
        bar.update()
    n = model.num_parameters(non_embedding=True)
    return {
        "variant": task.variant, "shape": shape, "seed": seed, "params": n,
        "params_total": model.num_parameters(), "tokens": tokens, "flops": 6.0 * n * tokens,
        "problems": steps * cfg.EM_BATCH_SIZE * (cfg.EM_SHOTS + 1),
        **evaluator.score(model), "seconds": time.perf_counter() - start,
        "settings": settings_of(cfg, ROW_SETTINGS),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    cfg = load_config(config, argv)
    check(cfg)
    device = torch.device(cfg.DEVICE)
    out_dir = Path(cfg.OUT_DIR)
    path = out_dir / RESULTS
    rows = read_results(path, FIELDS, settings=settings_of(cfg, ROW_SETTINGS), missing_ok=True,
                        made_by="emergence.py")
    done = {(row["variant"], row["shape"], row["seed"]) for row in rows}
    tasks = {variant: Addition(cfg.EM_DIGITS, variant) for variant in cfg.EM_VARIANTS}
    evaluators = {variant: EmergenceEvaluator.held_out(task, cfg.EM_EVAL_PROBLEMS, cfg.EM_SHOTS,
                                                       cfg.EM_EVAL_SEED, device)
                  for variant, task in tasks.items()}
    # Seed by seed: a sweep stopped partway has every size of its first seeds, a whole curve to look at.
    wanted = [(variant, shape, seed) for seed in seeds(cfg) for variant in cfg.EM_VARIANTS
              for shape in cfg.EM_SHAPES]
    todo = [key for key in wanted if key not in done]
    if len(todo) < len(wanted):
        print(f"{path}: {len(wanted) - len(todo)} models already done, skipped")
    bar = progress(sum(steps_for(tasks[variant], cfg) for variant, _, _ in todo), desc="emergence")
    with GracefulInterrupt("Ctrl-C: stopping after this step; the finished models are kept") as interrupt:
        for variant, shape, seed in todo:
            row = train_one(tasks[variant], shape, seed, cfg, evaluators[variant], device, bar, interrupt)
            if row is None:
                bar.close()
                print(f"stopped: {len(rows)} finished models are kept in {path}; run the same command again "
                      f"to train the rest: uv run python {SCRIPT}")
                sys.exit(0)
            rows.append(row)
            write_results(path, rows)
    bar.close()
    selected = set(wanted)
    rows = [row for row in rows if (row["variant"], row["shape"], row["seed"]) in selected]
    report(rows, cfg.EM_DIGITS + 1)
    plots = [plot_metrics(rows, out_dir / "emergence.png", cfg.EM_DIGITS),
             plot_scratchpad(rows, out_dir / "scratchpad.png"),
             plot_length(rows, out_dir / "emergence_length.png")]
    print(f"\nresults: {path}\nplots: {', '.join(str(p) for p in plots if p)}")
    return rows


# --- the report ---------------------------------------------------------------------------------------------

def summarize(rows: list[dict]) -> list[dict]:
    """One entry per (variant, shape), by variant and then size: the seeds it was trained with and, for each
    of SUMMARIZED, its mean, min and max over those seeds and the values seed by seed; the per-position
    curves (digit_accuracy, prefix_exact_match, and prefix_product: the product of the first l positions'
    accuracies) averaged over the seeds."""
    groups = defaultdict(list)
    for row in rows:
        groups[(row["variant"], row["shape"])].append(row)
    summaries = []
    for (variant, shape), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[1][0]["params"])):
        group.sort(key=lambda row: row["seed"])
        summary = {"variant": variant, "shape": shape, "params": group[0]["params"],
                   "flops": group[0]["flops"], "seeds": [row["seed"] for row in group]}
        for key in SUMMARIZED:
            values = [row[key] for row in group]
            summary[key] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values),
                            "values": values}
        for key in ("digit_accuracy", "prefix_exact_match"):
            summary[key] = np.mean([row[key] for row in group], axis=0).tolist()  # (L,)
        summary["prefix_product"] = np.mean([np.cumprod(row["digit_accuracy"]) for row in group],
                                            axis=0).tolist()  # (L,)
        summaries.append(summary)
    return summaries


def report(rows: list[dict], length: int) -> list[dict]:
    """One line per model size, smallest first within each variant, each number over its seeds; then where
    the scratchpad beat plain. Returns summarize's entries."""
    summaries = summarize(rows)
    print(f"\n{'variant':<11}{'shape':>6}{'N':>9}{'FLOPs':>10}{'seeds':>6}  {'exact [min-max]':<20}"
          f"{'product':>8}{f'digit^{length}':>9}{'digit':>7}{'edit':>6}{'loglik':>8}  exact by seed")
    for s in summaries:
        exact = s["exact_match"]
        print(f"{s['variant']:<11}{s['shape']:>6}{s['params']:>9,}{s['flops']:>10.2e}{len(s['seeds']):>6}  "
              f"{exact['mean']:.3f} [{exact['min']:.3f}-{exact['max']:.3f}]  "
              f"{s['position_product']['mean']:>8.3f}{s['per_digit_power']['mean']:>9.3f}"
              f"{s['per_digit']['mean']:>7.3f}{s['edit_distance']['mean']:>6.2f}"
              f"{s['log_likelihood']['mean']:>8.2f}  {' '.join(f'{v:.3f}' for v in exact['values'])}")
    print(f"each number is the mean over the seeds; exact: exact match, [its min-max over the seeds]; "
          f"product: the product of the {length} answer positions' accuracies; digit^{length}: per-digit "
          f"accuracy to the power {length}, Schaeffer et al.'s p^L; loglik: nats of the correct completion "
          "(plain: answer + newline; scratchpad: steps too)")
    by_key = {(s["variant"], s["shape"]): s for s in summaries}
    gains = [f"{shape} {s['exact_match']['mean'] - by_key[('plain', shape)]['exact_match']['mean']:+.3f}"
             for (variant, shape), s in by_key.items()
             if variant == "scratchpad" and ("plain", shape) in by_key]
    if gains:
        print(f"scratchpad minus plain, mean exact match at equal compute: {', '.join(gains)}")
    print(f"\neach run, answer digit by digit (accuracy of each of the {length} positions, from the left):")
    print(f"{'variant':<11}{'shape':>6}{'seed':>6}{'exact':>7}{'digit':>7}{'loglik':>8}  positions")
    for row in rows:
        print(f"{row['variant']:<11}{row['shape']:>6}{row['seed']:>6}{row['exact_match']:>7.3f}"
              f"{row['per_digit']:>7.3f}{row['log_likelihood']:>8.2f}  "
              + " ".join(f"{accuracy:.3f}" for accuracy in row["digit_accuracy"]))
    minutes = sum(row["seconds"] for row in rows) / 60
    print(f"{len(rows)} models, {minutes:.1f} min of training and scoring (the sum of the models' times)")
    return summaries


# --- the plots ----------------------------------------------------------------------------------------------

def _series(rows: list[dict], variant: str) -> list[dict]:
    return [s for s in summarize(rows) if s["variant"] == variant]


def _flops_axis(ax, series: list[dict]) -> None:
    """Training FLOPs along the top, Wei et al.'s axis: every model reads the same D tokens, so 6·N·D is N
    times one constant and a second plot against FLOPs would only repeat this one."""
    per_param = series[0]["flops"] / series[0]["params"]  # 6·D
    top = ax.secondary_xaxis("top", functions=(lambda n: n * per_param, lambda f: f / per_param))
    top.set_xlabel("training FLOPs, 6·N·D")


def _seeds_and_mean(ax, series: list[dict], key: str, color: str, label: str, seed_label: str,
                    marker: str = "o") -> None:
    """The mean over the seeds thick, each seed a thin line: a single run jumps at a size of its own, which a
    min-max band would hide, and the mean is an average of such jumps, gentler than any of them."""
    x = [s["params"] for s in series]
    ax.plot(x, [s[key]["mean"] for s in series], marker=marker, color=color, linewidth=2, label=label)
    for i, seed in enumerate(sorted({seed for s in series for seed in s["seeds"]})):
        points = [(s["params"], s[key]["values"][s["seeds"].index(seed)])
                  for s in series if seed in s["seeds"]]  # a size this seed has not reached yet is left out
        ax.plot(*zip(*points, strict=True), ".-", color=color, linewidth=0.8, markersize=4, alpha=0.45,
                label=seed_label if i == 0 else None)


def plot_metrics(rows: list[dict], path: Path, digits: int) -> Path | None:
    """The plain models under Wei et al.'s metric and Schaeffer et al.'s three continuous ones, side by side,
    so that one can see where they disagree (below the jump, only the continuous ones move) and where they
    agree (at the jump, all of them leap). Exact match carries its two estimates: p^L with one p overstates
    it below the jump; the product of the positions' own accuracies follows it."""
    plain = _series(rows, "plain")
    if not plain:
        return None
    x = [s["params"] for s in plain]
    fig = new_figure(11, 8.5)
    for ax, (key, label) in zip(fig.subplots(2, 2).flat, METRICS.items(), strict=True):
        _seeds_and_mean(ax, plain, key, "C0", "mean over the seeds", "each seed")
        if key == "exact_match":
            ax.plot(x, [s["position_product"]["mean"] for s in plain], "k--",
                    label="product of the positions' accuracies")
            ax.plot(x, [s["per_digit_power"]["mean"] for s in plain], "k:",
                    label=f"per-digit accuracy$^{{{digits + 1}}}$")
            ax.legend(fontsize="small", loc="upper left")
        ax.set(xscale="log", xlabel="non-embedding parameters N", ylabel=label)
        _flops_axis(ax, plain)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{digits}-digit addition, {len(plain)} sizes × {len(plain[0]['seeds'])} seeds: exact match "
                 "(Wei et al. 2022) and three continuous metrics (Schaeffer et al. 2023)")
    return save_figure(fig, path)


def plot_scratchpad(rows: list[dict], path: Path) -> Path | None:
    """What the scratchpad changes at equal compute: where exact match jumps, and how each digit of the
    answer is learned without it and with it: whether the digits that stay at chance below the jump are
    learned in one step of size or climb is what decides whether exact match has a middle. The plain models'
    other metrics are plot_metrics' figure, not repeated here."""
    series = {variant: _series(rows, variant) for variant in HEADERS}
    if not all(series.values()):
        return None
    fig = new_figure(16, 5)
    ax_exact, *ax_digits = fig.subplots(1, 3)
    for (variant, points), marker, color in zip(series.items(), "os", ("C0", "C1"), strict=True):
        _seeds_and_mean(ax_exact, points, "exact_match", color, f"{variant}, mean", f"{variant}, each seed",
                        marker)
    ax_exact.set(ylabel="exact match of the final answer", title="exact match")
    ax_exact.legend(fontsize="small", loc="upper left")
    for ax, (variant, points), marker in zip(ax_digits, series.items(), "os", strict=True):
        x = [s["params"] for s in points]
        for i in range(len(points[0]["digit_accuracy"])):
            ax.plot(x, [s["digit_accuracy"][i] for s in points], marker=marker, color=f"C{i + 2}",
                    label=f"digit {i + 1}")
        ax.axhline(0.1, color="0.5", linestyle=":", linewidth=1, label="one in ten")
        ax.set(ylabel="accuracy, mean over the seeds", title=f"{variant}: each digit of the final answer")
    # One legend for both digit panels, outside them: inside, some size's curve would run under it.
    ax_digits[-1].legend(fontsize="small", title="answer digit,\nfrom the left", loc="center left",
                         bbox_to_anchor=(1.02, 0.5))
    for ax in (ax_exact, *ax_digits):
        ax.set(xscale="log", xlabel="non-embedding parameters N", ylim=(-0.03, 1.03))
        _flops_axis(ax, series["plain"])
        ax.grid(alpha=0.3)
    fig.suptitle("the column sums written before the answer (scratchpad) or the answer alone (plain), at "
                 "equal compute: the same tokens for each model")
    return save_figure(fig, path)


def plot_length(rows: list[dict], path: Path) -> Path | None:
    """Exercise 4's picture: the share of answers whose first l digits are right, against l, so that the
    threshold can be seen to move with the answer's length alone. Dotted, the product of those l positions'
    accuracies, Schaeffer et al.'s p^L with a p for each position: where it lies on the measured line, the
    digits are right or wrong as if independently. The last point is not quite exact match: it counts an
    answer with a digit too many as right."""
    plain = _series(rows, "plain")
    if not plain:
        return None
    fig = new_figure(6.4, 4.8)
    ax = fig.add_subplot()
    lengths = np.arange(1, len(plain[0]["prefix_exact_match"]) + 1)
    for i, s in enumerate(plain):
        ax.plot(lengths, s["prefix_exact_match"], "o-", color=f"C{i % 10}", label=f"{s['params']:,}")
        ax.plot(lengths, s["prefix_product"], ":", color=f"C{i % 10}")
    ax.set(xlabel="answer digits l (from the left)", ylabel="first l digits all right", xticks=lengths,
           title="measured (solid); product of the l digits' accuracies (dotted);\nmeans over the seeds")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", title="N")
    return save_figure(fig, path)


if __name__ == "__main__":
    run_main(main)
