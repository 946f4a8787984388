"""Emergence on models you train: the same models scored by exact match, as Wei et al. plotted abilities, and
by three continuous metrics, as Schaeffer et al. argued they should be.

    uv run python phase1_foundation/project4_scaling/emergence.py                  # preset picked by device
    uv run python phase1_foundation/project4_scaling/emergence.py --EM_SHAPES=1x16,2x32 --EM_TOKENS=5e5

Wei et al. 2022 ("Emergent Abilities of Large Language Models") call an ability emergent when it is absent
in smaller models and present in larger ones, and plot it against training FLOPs: in their Table 1, 3-digit
addition and subtraction emerged at GPT-3 13B (2.3e22 FLOPs), 4- and 5-digit at 175B (3.1e23). GPT-3 175B
itself, few-shot, added 3-digit numbers 80.4% of the time, 4-digit 25.5%, 5-digit 9.3% (Brown et al. 2020,
Table 3.9). Schaeffer et al. 2023 ("Are Emergent Abilities of Large Language Models a Mirage?", §2-3) answer
that the jump is in the metric: if a model gets each of an answer's L tokens right with probability p, exact
match is about p^L, which stays near zero and then shoots up as p rises smoothly, while the token edit
distance, about L(1 - p), falls smoothly with it. They showed the smooth curves with the token edit distance
and the Brier score (not with perplexity).

This script reruns the argument on models you train in minutes. The task is multi-digit addition written as
text, with fixed-width, zero-padded operands and answer, so every prompt has the same length and greedy
decoding runs on a batch of them at once:

    add:\\n                 the task line
    482+517=0999\\n         EM_SHOTS solved exemplars
    123+045=               the query; the model writes 0168 and a newline

A sweep of model sizes (model.py's GPT) trains on a stream of fresh random problems, every size on the same
EM_TOKENS tokens, so that training compute is C = 6·N·D (N non-embedding parameters, D tokens: the rule of
Kaplan et al. 2020 that Wei et al.'s FLOPs axis also counts). EmergenceEvaluator then scores each model on the
same held-out problems, never drawn for training, with four metrics: exact match, per-digit accuracy, token
edit distance and the log-likelihood of the correct completion, and emergence.png draws all four against N
and against FLOPs.

The scratchpad variant (Nye et al. 2021, "Show Your Work") writes the column sums before the answer,
from the units up, each as two digits (the carry out, then the digit), so that every step needs only two
operand digits and the previous step's carry:

    add, steps:\\n
    123+045=08,06,01>0168\\n

It trains at equal compute (the same tokens per model, so fewer problems: its lines are longer), and
scratchpad.png compares the exact match of the two variants' final answers. Wei et al. report that a
scratchpad let 8-digit addition emerge at 40M parameters (8.9e19 FLOPs); chain-of-thought prompting helping
only from about 1e23 FLOPs is a finding about large pretrained models prompted few-shot (Wei et al. 2022b),
not about models trained on the steps, as here. ("Let's think step by step" is zero-shot chain of thought,
Kojima et al. 2022, a third thing.)

One exemplar (EM_SHOTS = 1), not several: model.py learns absolute positions, so each exemplar's slot is a
new set of positions where the addition has to be learned again. While choosing these settings, with three
exemplars no model up to 150k parameters learned the last two digits in 1.5M tokens; with one, models of
57k and 100k did in 1M.

What the cpu preset measured (two CPU cores, 4.4 minutes; one run, seed 1337): plain exact match stayed at
0.002-0.014 up to 57k parameters and was 0.954 at 100k, 0.986 at 224k. Here the continuous metrics jumped at
the same size: per-digit accuracy 0.53 -> 0.99, log-likelihood -4.8 -> -0.13 nats. Below the jump they showed
what exact match hid: from 3.3k parameters on the models got the first digit right 99% of the time and the
second 90-93% (per-digit 0.53, against 0.29 at 888), and exact match stayed within 0.01 of the product of the
four positions' accuracies (emergence_length.png). But the last two digits went from chance (0.1) to right in
one step, in training time as in size. Schaeffer et al.'s argument starts from a per-token p that rises
smoothly; here p itself jumps. Where the jump falls is partly luck: with one thread instead of two (other
rounding) the 100k model reached 0.68, and a 156k model stalled at 0.40 in one run and reached 0.97 in
another. The scratchpad, at equal compute, reached 0.154 at 3.3k parameters, 0.820 at 25k and 1.000 at 57k,
moving the jump from between 57k and 100k to between 3.3k and 25k; it did nothing at 888 parameters (both
0.002) and little from 100k on, where plain was already at 0.95 and more.

Results go to OUT_DIR/emergence.jsonl, one line per (variant, size) as each model finishes; a rerun with the
same settings skips the finished ones, so Ctrl-C loses only the model in training.
"""

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from common.config import load_config
from common.device import seed_everything
from common.interrupt import GracefulInterrupt
from common.optim import adamw, set_lr, warmup_cosine
from common.progress import progress
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.download_data import parse_shape
from phase1_foundation.project4_scaling.model import GPT, GPTConfig
from phase1_foundation.project4_scaling.plots import new_figure, save_figure

SCRIPT = "phase1_foundation/project4_scaling/emergence.py"
RESULTS = "emergence.jsonl"
HEADERS = {"plain": "add:\n", "scratchpad": "add, steps:\n"}  # the task line that opens every row and prompt
VOCAB = "\n +,0123456789:=>adepst"  # every character the rows use, one token each
STOI = {ch: i for i, ch in enumerate(VOCAB)}
# The settings a row's numbers depend on (besides its variant and shape): a rerun reuses rows only if these
# are unchanged.
ROW_SETTINGS = ("EM_DIGITS", "EM_SHOTS", "EM_TOKENS", "EM_BATCH_SIZE", "EM_LR", "EM_HEAD_SIZE",
                "EM_EVAL_PROBLEMS", "SEED", "BETAS", "WEIGHT_DECAY", "WARMUP_FRACTION", "MIN_LR_RATIO",
                "GRAD_CLIP")
METRICS = {  # row key: axis label
    "exact_match": "exact match",
    "per_digit": "per-digit accuracy",
    "edit_distance": "token edit distance",
    "log_likelihood": "log p(answer + newline), nats",
}


def encode(text: str) -> list[int]:
    return [STOI[ch] for ch in text]


def decode(ids: Sequence[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


# --- the task -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Addition:
    """D-digit addition in a fixed-width format: every line of a variant has the same length."""

    digits: int
    variant: str  # "plain" or "scratchpad"

    @property
    def header(self) -> str:
        return HEADERS[self.variant]

    def query(self, a: int, b: int) -> str:
        return f"{a:0{self.digits}d}+{b:0{self.digits}d}="

    def answer(self, a: int, b: int) -> str:
        return f"{a + b:0{self.digits + 1}d}"  # one digit more than the operands, for the last carry

    def steps(self, a: int, b: int) -> str:
        """The column sums from the units up, two digits each: the first is the carry into the next column."""
        sums, carry = [], 0
        for x, y in zip(f"{a:0{self.digits}d}"[::-1], f"{b:0{self.digits}d}"[::-1], strict=True):
            total = int(x) + int(y) + carry
            sums.append(f"{total:02d}")
            carry = total // 10
        return ",".join(sums)

    def completion(self, a: int, b: int) -> str:
        """What the model should write after "=": the answer (scratchpad: after the steps) and a newline."""
        steps = self.steps(a, b) + ">" if self.variant == "scratchpad" else ""
        return steps + self.answer(a, b) + "\n"

    def line(self, a: int, b: int) -> str:
        return self.query(a, b) + self.completion(a, b)

    def final_answer(self, written: str) -> str:
        """The answer in a line the model wrote (cut at its newline): after the last ">" for the scratchpad,
        nothing if it wrote none."""
        if self.variant == "plain":
            return written
        return written.rpartition(">")[2] if ">" in written else ""

    def row(self, problems: np.ndarray) -> str:
        """The task line, then a line for each (a, b) of problems (k, 2): a training row, or an evaluation
        prompt's exemplars."""
        return self.header + "".join(self.line(a, b) for a, b in problems.tolist())


class ProblemStream:
    """Fresh random problems, as many as asked, none of them one of the held-out problems."""

    def __init__(self, digits: int, held_out: np.ndarray, seed: int):
        self.size = 10**digits
        self.held_out = np.unique(held_out[:, 0] * self.size + held_out[:, 1])  # each (a, b) as one number
        self.rng = np.random.default_rng(seed)

    def draw(self, n: int) -> np.ndarray:
        """(n, 2) operands, uniform over [0, 10^digits), a held-out pair drawn again until it is not one."""
        problems = self.rng.integers(0, self.size, size=(n, 2))
        while (clash := np.isin(problems[:, 0] * self.size + problems[:, 1], self.held_out)).any():
            problems[clash] = self.rng.integers(0, self.size, size=(int(clash.sum()), 2))
        return problems


def training_batch(task: Addition, stream: ProblemStream, batch_size: int, shots: int,
                   device: torch.device) -> tuple[Tensor, Tensor]:
    """(x, y), each (B, T): rows of shots + 1 problems, the targets scored on the completions only.

    The operands are random digits that no model can predict; their loss would only add noise, so the
    targets there (and on the task line and the "+" and "=") are -100, which cross_entropy skips. A row is
    the layout of an evaluation prompt and its completion, so every query sits where the model learned it.
    """
    problems = stream.draw(batch_size * (shots + 1)).reshape(batch_size, shots + 1, 2)
    rows = torch.tensor([encode(task.row(p)) for p in problems], device=device)  # (B, T + 1)
    x, y = rows[:, :-1], rows[:, 1:].clone()
    y[:, ~completion_positions(task, shots).to(device)] = -100
    return x, y


def completion_positions(task: Addition, shots: int) -> Tensor:
    """(T,) True where a target is part of a completion: every line's characters after its "="."""
    query, line = len(task.query(0, 0)), len(task.line(0, 0))
    in_line = torch.arange(len(task.row(np.zeros((shots + 1, 2), dtype=int))) - len(task.header)) % line
    return torch.cat((torch.zeros(len(task.header), dtype=torch.bool), in_line >= query))[1:]


# --- scoring ------------------------------------------------------------------------------------------------

def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance: the fewest insertions, deletions and substitutions that turn a into b."""
    previous = list(range(len(b) + 1))  # distances from a[:0] to every prefix of b
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


class EmergenceEvaluator:
    """A fixed held-out set of problems as few-shot prompts, and the four metrics of a model's answers.

    Each prompt is the task line, `shots` solved exemplars and a query that ends right after its "=". The
    model decodes greedily for as many tokens as the correct completion has (a line that runs longer is cut
    there); only the new tokens are decoded, and the line ends at the first newline. Then:

    exact_match     the final answer equals the correct one (Wei et al.'s metric for arithmetic)
    per_digit       the share of the answer's digit positions right, position by position from the left
                    (answers are fixed-width, so positions align; a missing digit counts as wrong)
    edit_distance   Levenshtein distance between the written answer's tokens and the correct one's
                    (Schaeffer et al.'s token edit distance)
    log_likelihood  the sum of log-probabilities (nats) of the correct completion's tokens, every one given
                    the prompt and the correct tokens before it (teacher forcing): the answer's digits and
                    its newline; for the scratchpad, the steps and ">" too
    """

    def __init__(self, task: Addition, problems: np.ndarray, exemplars: np.ndarray, device: torch.device):
        self.task, self.problems = task, problems  # (P, 2) queries; exemplars (P, shots, 2)
        self.answers = [task.answer(a, b) for a, b in problems.tolist()]
        prompts = [task.row(shown) + task.query(a, b) for shown, (a, b) in zip(exemplars, problems.tolist(),
                                                                                strict=True)]
        completions = [task.completion(a, b) for a, b in problems.tolist()]
        self.prompts = torch.tensor([encode(p) for p in prompts], device=device)  # (P, T_prompt)
        self.completions = torch.tensor([encode(c) for c in completions], device=device)  # (P, T_completion)

    @classmethod
    def held_out(cls, task: Addition, count: int, shots: int, seed: int, device: torch.device):
        """`count` distinct problems drawn with `seed`, each with its own random exemplars."""
        rng = np.random.default_rng(seed)
        size = 10**task.digits
        codes = rng.choice(size * size, size=count, replace=False)  # distinct (a, b) pairs
        problems = np.stack((codes // size, codes % size), axis=1)
        return cls(task, problems, rng.integers(0, size, size=(count, shots, 2)), device)

    def generate(self, model: GPT) -> list[str]:
        """Each prompt's greedy line: the new tokens only, cut at the first newline."""
        new = model.greedy(self.prompts, self.completions.size(1))  # (P, T_completion)
        return [decode(row).partition("\n")[0] for row in new.tolist()]

    @torch.no_grad()
    def log_likelihood(self, model: GPT) -> Tensor:
        """(P,) log p(correct completion | prompt), in nats, the completion teacher-forced."""
        rows = torch.cat((self.prompts, self.completions), dim=1)  # (P, T_prompt + T_completion)
        logits, _ = model(rows[:, :-1])  # (P, T - 1, V): position t predicts token t + 1
        scored = logits[:, self.prompts.size(1) - 1 :]  # (P, T_completion, V): the completion's predictions
        return -F.cross_entropy(scored.transpose(1, 2), self.completions, reduction="none").sum(1)

    def score(self, model: GPT) -> dict:
        """The four metrics, averaged over the problems, plus each answer position's accuracy and the exact
        match of the answers' first l digits (l = 1..L), to set beside p^l."""
        was_training = model.training
        model.eval()
        written = [self.task.final_answer(line) for line in self.generate(model)]
        log_likelihood = self.log_likelihood(model)
        model.train(was_training)
        length = self.task.digits + 1
        right = np.array([[i < len(w) and w[i] == answer[i] for i in range(length)]
                          for w, answer in zip(written, self.answers, strict=True)])  # (P, L)
        pairs = list(zip(written, self.answers, strict=True))
        return {
            "exact_match": float(np.mean([w == answer for w, answer in pairs])),
            "per_digit": float(right.mean()),
            "edit_distance": float(np.mean([edit_distance(w, answer) for w, answer in pairs])),
            "log_likelihood": float(log_likelihood.mean()),
            "digit_accuracy": right.mean(0).tolist(),  # (L,) position by position, most significant first
            "prefix_exact_match": np.cumprod(right, axis=1).mean(0).tolist(),  # (L,) first l digits all right
        }


# --- the sweep ----------------------------------------------------------------------------------------------

def check(cfg: SimpleNamespace) -> None:
    """One line for each setting that cannot work, before anything trains."""
    if not 1 <= cfg.EM_DIGITS <= 9:  # a problem (a, b) is numbered a·10^D + b, which must fit in 64 bits
        raise SystemExit(f"error: --EM_DIGITS={cfg.EM_DIGITS}; add numbers of 1 to 9 digits")
    if cfg.EM_SHOTS < 0:
        raise SystemExit(f"error: --EM_SHOTS={cfg.EM_SHOTS}; show 0 or more exemplars")
    for name in ("EM_BATCH_SIZE", "EM_HEAD_SIZE"):
        if getattr(cfg, name) < 1:
            raise SystemExit(f"error: --{name}={getattr(cfg, name)}; it must be at least 1")
    unknown = [v for v in cfg.EM_VARIANTS if v not in HEADERS]
    if unknown or not cfg.EM_VARIANTS:
        raise SystemExit(f"error: unknown variant {unknown[0] if unknown else '(none)'!r}; --EM_VARIANTS "
                         f"takes {', '.join(HEADERS)}")
    if not cfg.EM_SHAPES:
        raise SystemExit("error: --EM_SHAPES is empty; name at least one shape, like --EM_SHAPES=2x64")
    for shape in cfg.EM_SHAPES:
        parse_shape(shape, cfg.EM_HEAD_SIZE)
    if 10**cfg.EM_DIGITS * 10**cfg.EM_DIGITS < 2 * cfg.EM_EVAL_PROBLEMS or cfg.EM_EVAL_PROBLEMS < 1:
        raise SystemExit(f"error: --EM_EVAL_PROBLEMS={cfg.EM_EVAL_PROBLEMS}; hold out at least 1 and at most "
                         f"half of the {100**cfg.EM_DIGITS:,} {cfg.EM_DIGITS}-digit problems")
    for variant in cfg.EM_VARIANTS:
        row_tokens = len(Addition(cfg.EM_DIGITS, variant).row(np.zeros((cfg.EM_SHOTS + 1, 2), dtype=int))) - 1
        if cfg.EM_TOKENS < cfg.EM_BATCH_SIZE * row_tokens:
            raise SystemExit(f"error: --EM_TOKENS={cfg.EM_TOKENS} is less than one batch of the {variant} "
                             f"variant ({cfg.EM_BATCH_SIZE * row_tokens:,} tokens); raise it")


def make_model(task: Addition, shape: str, shots: int, head_size: int, device: torch.device) -> GPT:
    """A GPT whose context holds one row exactly: the task line, shots + 1 lines, less the last newline."""
    n_layer, n_embd = parse_shape(shape, head_size)
    block_size = len(task.row(np.zeros((shots + 1, 2), dtype=int))) - 1
    return GPT(GPTConfig(vocab_size=len(VOCAB), block_size=block_size, n_layer=n_layer,
                         n_head=n_embd // head_size, n_embd=n_embd)).to(device)


def steps_for(task: Addition, cfg: SimpleNamespace) -> int:
    """Optimizer steps that spend EM_TOKENS tokens (rounded down to whole steps)."""
    row_tokens = len(task.row(np.zeros((cfg.EM_SHOTS + 1, 2), dtype=int))) - 1
    return cfg.EM_TOKENS // (cfg.EM_BATCH_SIZE * row_tokens)


def train_one(task: Addition, shape: str, cfg: SimpleNamespace, evaluator: EmergenceEvaluator,
              device: torch.device, bar, interrupt: GracefulInterrupt) -> dict | None:
    """Train one model on fresh problems and score it: its row, or None if Ctrl-C stopped it first."""
    seed_everything(cfg.SEED)  # every size starts from the same seed and reads the same problem stream
    model = make_model(task, shape, cfg.EM_SHOTS, cfg.EM_HEAD_SIZE, device)
    optimizer = adamw(model, cfg.EM_LR, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    stream = ProblemStream(task.digits, evaluator.problems, cfg.SEED)
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
            bar.set_postfix(run=f"{task.variant} {shape}", loss=f"{loss.item():.3f}", refresh=False)
        bar.update()
    n = model.num_parameters(non_embedding=True)
    return {
        "variant": task.variant, "shape": shape, "params": n, "params_total": model.num_parameters(),
        "tokens": tokens, "flops": 6.0 * n * tokens,
        "problems": steps * cfg.EM_BATCH_SIZE * (cfg.EM_SHOTS + 1),
        **evaluator.score(model), "seconds": time.perf_counter() - start,
        "settings": row_settings(cfg),
    }


def row_settings(cfg: SimpleNamespace) -> dict:
    """The ROW_SETTINGS as a row stores them (tuples as JSON gives them back: lists)."""
    return json.loads(json.dumps({name: getattr(cfg, name) for name in ROW_SETTINGS}))


def read_rows(path: Path, wanted: dict) -> list[dict]:
    """The rows already in `path`; one clear line if they were made with other settings."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a crash: that model trains again
            continue
    for row in rows:
        changed = [name for name in ROW_SETTINGS if row["settings"].get(name) != wanted[name]]
        if changed:
            what = ", ".join(f"{name} {row['settings'].get(name)!r} -> {wanted[name]!r}" for name in changed)
            raise SystemExit(f"error: {path} holds results made with other settings ({what}); pass "
                             f"--OUT_DIR=another/folder, or delete the file to start over")
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    cfg = load_config(config, argv)
    check(cfg)
    device = torch.device(cfg.DEVICE)
    out_dir = Path(cfg.OUT_DIR)
    path = out_dir / RESULTS
    rows = read_rows(path, row_settings(cfg))
    done = {(row["variant"], row["shape"]) for row in rows}
    tasks = {variant: Addition(cfg.EM_DIGITS, variant) for variant in cfg.EM_VARIANTS}
    evaluators = {variant: EmergenceEvaluator.held_out(task, cfg.EM_EVAL_PROBLEMS, cfg.EM_SHOTS, cfg.SEED + 1,
                                                       device) for variant, task in tasks.items()}
    todo = [(variant, shape) for variant in cfg.EM_VARIANTS for shape in cfg.EM_SHAPES
            if (variant, shape) not in done]
    if len(todo) < len(cfg.EM_VARIANTS) * len(cfg.EM_SHAPES):
        print(f"{path}: {len(cfg.EM_VARIANTS) * len(cfg.EM_SHAPES) - len(todo)} models already done, skipped")
    out_dir.mkdir(parents=True, exist_ok=True)
    bar = progress(sum(steps_for(tasks[variant], cfg) for variant, _ in todo), desc="emergence")
    with GracefulInterrupt("Ctrl-C: stopping after this step; the finished models are kept") as interrupt:
        for variant, shape in todo:
            row = train_one(tasks[variant], shape, cfg, evaluators[variant], device, bar, interrupt)
            if row is None:
                bar.close()
                print(f"stopped: {len(rows)} finished models are kept in {path}; run the same command again "
                      f"to train the rest: uv run python {SCRIPT}")
                sys.exit(0)
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            rows.append(row)
    bar.close()
    rows = [row for row in rows if row["variant"] in cfg.EM_VARIANTS and row["shape"] in cfg.EM_SHAPES]
    report(rows, cfg.EM_DIGITS + 1)
    plots = [plot_metrics(rows, out_dir / "emergence.png", cfg.EM_DIGITS),
             plot_scratchpad(rows, out_dir / "scratchpad.png"),
             plot_length(rows, out_dir / "emergence_length.png")]
    print(f"\nresults: {path}\nplots: {', '.join(str(p) for p in plots if p)}")
    return rows


# --- the report ---------------------------------------------------------------------------------------------

def report(rows: list[dict], length: int) -> None:
    """One line per model, smallest first within each variant; then where the scratchpad beat plain."""
    print(f"\n{'variant':<11}{'shape':>6}{'N':>9}{'FLOPs':>10}{'problems':>10}{'exact':>7}{'p^L':>7}"
          f"{'digit':>7}{'edit':>7}{'loglik':>8}{'min':>6}")
    for row in sorted(rows, key=lambda r: (r["variant"], r["params"])):
        print(f"{row['variant']:<11}{row['shape']:>6}{row['params']:>9,}{row['flops']:>10.2e}"
              f"{row['problems']:>10,}{row['exact_match']:>7.3f}{row['per_digit'] ** length:>7.3f}"
              f"{row['per_digit']:>7.3f}{row['edit_distance']:>7.2f}{row['log_likelihood']:>8.2f}"
              f"{row['seconds'] / 60:>6.1f}")
    print(f"exact: exact match; p^L: per-digit accuracy to the power L = {length}, Schaeffer et al.'s "
          "estimate of it; loglik: nats of the correct completion (plain: answer + newline; scratchpad: "
          "steps too)")
    by_key = {(row["variant"], row["shape"]): row for row in rows}
    pairs = [(by_key[("plain", shape)], by_key[("scratchpad", shape)]) for variant, shape in by_key
             if variant == "plain" and ("scratchpad", shape) in by_key]
    if pairs:
        gains = [f"{plain['shape']} {scratch['exact_match'] - plain['exact_match']:+.3f}"
                 for plain, scratch in pairs]
        print(f"scratchpad minus plain, exact match at equal compute: {', '.join(gains)}")


def _series(rows: list[dict], variant: str) -> list[dict]:
    return sorted((row for row in rows if row["variant"] == variant), key=lambda row: row["params"])


def plot_metrics(rows: list[dict], path: Path, digits: int) -> Path | None:
    """The plain variant's four metrics against N (top) and FLOPs (bottom), from the same models: Wei et al.'s
    view in the first column, Schaeffer et al.'s in the other three. The exact-match panels also draw p^L,
    the per-digit accuracy to the power of the answer's length."""
    plain = _series(rows, "plain")
    if not plain:
        return None
    length = digits + 1
    fig = new_figure(17, 7.5)
    axes = fig.subplots(2, 4)
    for axes_row, (x_key, x_label) in zip(axes, (("params", "non-embedding parameters N"),
                                                 ("flops", "training FLOPs, 6·N·D")), strict=True):
        x = [row[x_key] for row in plain]
        for ax, (key, label) in zip(axes_row, METRICS.items(), strict=True):
            ax.plot(x, [row[key] for row in plain], "o-", label="measured")
            if key == "exact_match":
                ax.plot(x, [row["per_digit"] ** length for row in plain], "k:", label=f"per-digit^{length}")
                ax.legend(fontsize="small")
            ax.set(xscale="log", xlabel=x_label, ylabel=label)
            ax.grid(alpha=0.3)
    fig.suptitle(f"{digits}-digit addition, the same {len(plain)} models under four metrics: exact match "
                 "(Wei et al. 2022) and three continuous ones (Schaeffer et al. 2023)")
    return save_figure(fig, path)


def plot_scratchpad(rows: list[dict], path: Path) -> Path | None:
    """Exact match of the final answer, plain against scratchpad at equal compute, against N and FLOPs; and
    per-digit accuracy against N."""
    series = {variant: _series(rows, variant) for variant in HEADERS}
    if not all(series.values()):
        return None
    fig = new_figure(15, 4.5)
    axes = fig.subplots(1, 3)
    panels = (("params", "exact_match", "non-embedding parameters N"),
              ("flops", "exact_match", "training FLOPs, 6·N·D"),
              ("params", "per_digit", "non-embedding parameters N"))
    for ax, (x_key, y_key, x_label) in zip(axes, panels, strict=True):
        for (variant, points), style in zip(series.items(), ("o-", "s--"), strict=True):
            ax.plot([row[x_key] for row in points], [row[y_key] for row in points], style, label=variant)
        ax.set(xscale="log", xlabel=x_label, ylabel=f"{METRICS[y_key]} of the final answer")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("the column sums before the answer (scratchpad) or the answer alone, equal compute per size")
    return save_figure(fig, path)


def plot_length(rows: list[dict], path: Path) -> Path | None:
    """For each plain model: the share of answers whose first l digits are all right, against l (exact match
    is the last point), beside the product of those l positions' accuracies: what it would be if each
    digit were right or wrong independently, Schaeffer et al.'s p^L with a p for each position."""
    plain = _series(rows, "plain")
    if not plain:
        return None
    fig = new_figure(6.4, 4.8)
    ax = fig.add_subplot()
    for i, row in enumerate(plain):
        lengths = np.arange(1, len(row["prefix_exact_match"]) + 1)
        ax.plot(lengths, row["prefix_exact_match"], "o-", color=f"C{i % 10}", label=f"{row['shape']}")
        ax.plot(lengths, np.cumprod(row["digit_accuracy"]), ":", color=f"C{i % 10}")
    ax.set(xlabel="answer digits l (from the left)", ylabel="first l digits all right", xticks=lengths,
           title="measured (solid); product of the l digits' accuracies (dotted)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", title="shape")
    return save_figure(fig, path)


if __name__ == "__main__":
    main()
