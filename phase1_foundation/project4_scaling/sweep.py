"""The sweep, planned: which model shapes train at which budgets, and on how many tokens.

Under each counting (results.COUNTINGS) every shape of SHAPES is trained at every budget of that counting,
on the D tokens the budget buys: D = C / (FLOPs per token), 6N per token under Kaplan's counting and App. F's
count under Chinchilla's. A run of fewer than MIN_STEPS steps is left out, and so is one that would read
the training text more than MAX_EPOCHS times. At NOISE_BUDGETS every shape is trained with NOISE_SEEDS seeds:
how far runs that differ only in their seed end apart is the noise every fit has to live with (bootstrap.py).
`train.py` trains these runs, `download_data.py` lists them.
"""

from dataclasses import dataclass
from types import SimpleNamespace

from common.errors import CourseError
from phase1_foundation.project4_scaling.model import GPTConfig, flops_per_token, non_embedding_parameters
from phase1_foundation.project4_scaling.results import COUNTINGS


@dataclass(frozen=True)
class Run:
    """One point of the sweep: a model shape trained on the tokens its budget buys under its counting."""

    counting: str  # "kaplan" or "chinchilla" (results.COUNTINGS): how `budget` counts FLOPs
    budget: float  # C, FLOPs as the counting counts them
    n_layer: int
    n_embd: int
    params: int  # N, non-embedding (Kaplan's N, whatever the counting)
    flops_per_token: float  # training FLOPs per token under the counting: 6N, or App. F's
    steps: int  # optimizer steps of BATCH_SIZE x BLOCK_SIZE tokens: C / flops_per_token / tokens per step
    tokens: int  # D = steps x tokens per step, within half a step of C / flops_per_token
    seed: int  # the weights' and the data order's seed: SEED, or one of the noise measurement's others
    repeat: bool = False  # a run of the noise measurement: the same point as another run, another seed

    @property
    def name(self) -> str:  # e.g. "kaplan_4e10_2x48", "chinchilla_1.2e11_1x16", "kaplan_2e10_1x8_seed1338"
        mantissa, exponent = f"{self.budget:.1e}".split("e")
        name = f"{self.counting}_{mantissa.removesuffix('.0')}e{int(exponent)}_{self.n_layer}x{self.n_embd}"
        return f"{name}_seed{self.seed}" if self.repeat else name


def parse_shape(text: str, head_size: int) -> tuple[int, int]:
    """"4x128" -> (4, 128): n_layer x d_model, d_model a multiple of head_size."""
    layers, _, width = text.partition("x")
    if not (layers.isdigit() and width.isdigit() and int(layers) > 0 and int(width) > 0):
        raise CourseError(f"error: cannot read the shape {text!r}; write n_layer x d_model, like 4x128")
    if int(width) % head_size:
        raise CourseError(f"error: shape {text}: d_model {width} is not a multiple of HEAD_SIZE={head_size}")
    return int(layers), int(width)


def planned_runs(cfg: SimpleNamespace, vocab_size: int) -> tuple[list[Run], list[Run]]:
    """(runs, too short): every shape at every budget of each counting in COUNTINGS, and at each of Kaplan's
    BUDGETS that is one of NOISE_BUDGETS, each shape there again with the seeds SEED + 1, ...,
    SEED + NOISE_SEEDS - 1; ordered by counting, budget, size and seed, split by MIN_STEPS."""
    tokens_per_step = cfg.BATCH_SIZE * cfg.BLOCK_SIZE
    runs = []
    for counting in cfg.COUNTINGS:
        if counting not in COUNTINGS:
            raise CourseError(f"error: unknown counting {counting!r}; choose from {', '.join(COUNTINGS)}")
        budgets = cfg.BUDGETS if counting == "kaplan" else cfg.CHINCHILLA_BUDGETS
        for budget in sorted(budgets):
            for n_layer, n_embd in sorted(parse_shape(s, cfg.HEAD_SIZE) for s in cfg.SHAPES):
                params = non_embedding_parameters(n_layer, n_embd)
                shape = GPTConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=n_layer,
                                  n_head=n_embd // cfg.HEAD_SIZE, n_embd=n_embd)
                per_token = 6.0 * params if counting == "kaplan" else flops_per_token(shape, "chinchilla")
                steps = round(budget / per_token / tokens_per_step)  # D = C / (FLOPs per token)
                repeats = cfg.NOISE_SEEDS if counting == "kaplan" and budget in cfg.NOISE_BUDGETS else 1
                runs += [Run(counting, budget, n_layer, n_embd, params, per_token, steps,
                             steps * tokens_per_step, cfg.SEED + k, repeat=k > 0) for k in range(repeats)]
    order = list(COUNTINGS)
    runs.sort(key=lambda run: (order.index(run.counting), run.budget, run.params, run.seed))
    return [r for r in runs if r.steps >= cfg.MIN_STEPS], [r for r in runs if r.steps < cfg.MIN_STEPS]


def affordable_runs(runs: list[Run], train_tokens: int, max_epochs: float) -> tuple[list[Run], list[Run]]:
    """(runs, too long): those that read the training text at most max_epochs times, and those that would
    read it more often."""
    return ([r for r in runs if r.tokens <= max_epochs * train_tokens],
            [r for r in runs if r.tokens > max_epochs * train_tokens])
