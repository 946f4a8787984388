"""Fine-tune GPT-1 on a multiple-choice task with the paper's input transformation (§3.3), and measure its
central claim: pre-training helps.

    # the newest checkpoint: one seed, every training question
    uv run python phase1_foundation/project1_gpt/finetune.py
    # three seeds at four label counts: the spread between seeds, and where pre-training helps most
    uv run python phase1_foundation/project1_gpt/finetune.py --FT_SEEDS=1337,1,2 --FT_LABELS=100,300,1000,3000

The task (questions.json, built by download_data.py): after a sentence of context, which candidate is the
next sentence as written, and which the same with its inner words shuffled? Each candidate becomes
`<|start|> context <|delim|> candidate <|extract|>`; a linear layer reads the <|extract|> state. Fine-tuned
from the pre-trained model and from scratch, on held-out questions, beside zero-shot, a counted bigram and the
shared-rare-words rule. README, "Fine-tuning" and "Fine-tuning results"; --FT_TASK=ending is exercise 4's
task.
"""

import copy
import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from common.data.tokenizers import Tokenizer
from common.data.tokens import load_tokens
from common.errors import CourseError, run_main
from common.progress import progress
from common.training.baselines import bigram_log_probs
from common.training.config import load_config
from common.training.device import autocast, describe, seed_everything
from common.training.optim import adamw, set_lr, warmup_linear
from common.training.run import checkpoint_data_dir
from phase1_foundation.project1_gpt import config
from phase1_foundation.project1_gpt.download_data import Question, load_questions, prepare_questions
from phase1_foundation.project1_gpt.model import GPT, IGNORE
from phase1_foundation.project1_gpt.tokenizer import load_tokenizer

# --- the task, as token ids ---------------------------------------------------------------------------------

def encode(questions: list[Question], tokenizer: Tokenizer, block_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """Token ids (N, K, T) of `<|start|> context <|delim|> candidate <|extract|>`, padded at the end; the
    position of each <|extract|> (N, K); the answers (N,). The context is cut from the left when a sequence
    is too long."""
    start, delim, extract = (tokenizer.token_to_id(t) for t in ("<|start|>", "<|delim|>", "<|extract|>"))
    sequences = []
    for q in questions:
        context = tokenizer.encode(q.context)
        for candidate in q.candidates:
            ending = tokenizer.encode(" " + candidate)[: block_size // 2]
            room = block_size - len(ending) - 3
            sequences.append([start, *context[-room:], delim, *ending, extract])
    T = max(map(len, sequences))
    # The padding after <|extract|> is never attended to: the mask is causal.
    ids = torch.zeros(len(sequences), T, dtype=torch.long)
    for row, seq in zip(ids, sequences, strict=True):
        row[: len(seq)] = torch.tensor(seq)
    extract_at = torch.tensor([len(seq) - 1 for seq in sequences])
    K = len(questions[0].candidates)
    return ids.view(-1, K, T), extract_at.view(-1, K), torch.tensor([q.answer for q in questions])


def trim(ids: Tensor, extract_at: Tensor) -> Tensor:
    """Drop the padding after this batch's last <|extract|>: most batches are far shorter than the
    longest question."""
    return ids[..., : extract_at.max() + 1]  # (B, K, T') with T' <= T


# --- a baseline with no model: shared rare words ------------------------------------------------------------
# The candidate that shares the rarest words (names, places, terms) with the context, with no model at all.
# On the shuffle task both candidates hold the same words; exercise 4 scores the rule on --FT_TASK=ending.

def words(text: str) -> set[str]:
    """The distinct words of a text: runs of letters and digits, lower-cased."""
    return set(re.findall(r"\w+", text.lower()))


def rarity(texts: list[str]) -> Callable[[str], float]:
    """A word's inverse document frequency over `texts`: log((1 + N) / (1 + n)) for a word in n of the N
    texts, so 0 for a word in every text and the most, log(1 + N), for a word in none."""
    counts = Counter(word for text in texts for word in words(text))
    return lambda word: math.log((1 + len(texts)) / (1 + counts[word]))


def word_overlap_choice(question: Question, weight: Callable[[str], float]) -> int:
    """The candidate whose words in common with the context weigh most in total; a tie goes to the first."""
    context = words(question.context)
    # fsum is exact, so a score does not depend on the order in which a set yields its words.
    scores = [math.fsum(map(weight, context & words(c))) for c in question.candidates]
    return scores.index(max(scores))


def word_overlap_accuracy(questions: list[Question], train_questions: list[Question]) -> float:
    """Accuracy of the rule on `questions`, with each word's rarity counted over the training contexts."""
    weight = rarity([q.context for q in train_questions])
    return sum(word_overlap_choice(q, weight) == q.answer for q in questions) / len(questions)


# --- the model: GPT-1 plus one linear layer -----------------------------------------------------------------

class MultipleChoiceGPT(nn.Module):
    """Scores each candidate sequence with a linear layer on its final <|extract|> state (§3.3, Fig. 1)."""

    def __init__(self, gpt: GPT, dropout: float):
        super().__init__()
        self.gpt = gpt
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(gpt.config.n_embd, 1)
        nn.init.normal_(self.head.weight, std=0.02)  # PAPER: GPT-1 code, the classifier's N(0, 0.02), bias 0
        nn.init.zeros_(self.head.bias)

    def forward(self, ids: Tensor, extract_at: Tensor) -> tuple[Tensor, Tensor]:
        """Candidate scores (B, K) and the LM's logits (B*K, T, V) for the auxiliary loss."""
        B, K, T = ids.shape
        h = self.gpt.hidden_states(ids.view(B * K, T))  # (B*K, T, C)
        last = h[torch.arange(B * K), extract_at.view(-1)]  # (B*K, C): the state at each <|extract|>
        scores = self.head(self.dropout(last)).view(B, K)  # (B, K)
        return scores, self.gpt.lm_head(h)


def lm_loss(logits: Tensor, ids: Tensor, extract_at: Tensor) -> Tensor:
    """Next-token loss over each sequence up to its <|extract|> token (the padding after it is ignored)."""
    targets = ids.view(-1, ids.size(-1))[:, 1:].clone()  # (B*K, T-1)
    positions = torch.arange(targets.size(1), device=ids.device)
    targets[positions >= extract_at.view(-1, 1)] = IGNORE  # nothing to predict after <|extract|>
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


# --- training and scoring -----------------------------------------------------------------------------------

def finetune(model: MultipleChoiceGPT, data: tuple, steps: int, cfg: SimpleNamespace, device: torch.device,
             seed: int, desc: str) -> None:
    """The paper's recipe: AdamW, linear warmup over 0.2% of the steps then linear decay, L2 + lambda * L1.
    The questions are shuffled anew each epoch; with fewer questions than the steps need, epochs repeat."""
    ids, extract_at, answers = data
    steps_per_epoch = -(-len(answers) // cfg.FT_BATCH_SIZE)
    optimizer = adamw(model, cfg.FT_LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    generator = torch.Generator().manual_seed(seed)
    bar = progress(steps, desc=desc)
    model.train()
    for step in range(steps):
        if step % steps_per_epoch == 0:
            order = torch.randperm(len(answers), generator=generator)
        batch = order[(step % steps_per_epoch) * cfg.FT_BATCH_SIZE :][: cfg.FT_BATCH_SIZE]
        x, e, y = trim(ids[batch], extract_at[batch]), extract_at[batch], answers[batch]
        x, e, y = x.to(device), e.to(device), y.to(device)
        set_lr(optimizer, warmup_linear(step, peak_lr=cfg.FT_LEARNING_RATE,
                                        warmup_steps=max(1, round(cfg.FT_WARMUP_RATIO * steps)),
                                        total_steps=steps))
        with autocast(device):
            scores, logits = model(x, e)
            task = F.cross_entropy(scores, y)
            # PAPER: GPT-1 §3.2, Eq. 5: L3 = L2 + lambda * L1, lambda = FT_LM_WEIGHT.
            loss = task + cfg.FT_LM_WEIGHT * lm_loss(logits, x, e) if cfg.FT_LM_WEIGHT else task
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        bar.set_postfix(task_loss=f"{task.item():.3f}", refresh=False)
        bar.update()
    bar.close()


@torch.no_grad()
def accuracy(model: MultipleChoiceGPT, data: tuple, cfg: SimpleNamespace, device: torch.device) -> float:
    ids, extract_at, answers = data
    model.eval()
    correct = 0
    for start in range(0, len(answers), cfg.FT_BATCH_SIZE):
        e = extract_at[start : start + cfg.FT_BATCH_SIZE]
        x = trim(ids[start : start + cfg.FT_BATCH_SIZE], e).to(device)
        with autocast(device):
            scores, _ = model(x, e.to(device))
        correct += (scores.argmax(-1).cpu() == answers[start : start + cfg.FT_BATCH_SIZE]).sum().item()
    return correct / len(answers)


# --- choosing without fine-tuning: the most likely candidate -----------------------------------------------
# The heuristic GPT-1 §5 uses for RACE: the candidate whose tokens get the highest mean log-probability after
# the context, read as plain text (no special tokens: pre-training never saw them). The pre-trained LM scores
# them zero-shot; a bigram model counted on the same training tokens scores them with one token of context.

def as_plain_text(question: Question, tokenizer: Tokenizer, block_size: int) -> list[tuple[list[int], int]]:
    """Each candidate after the context, as token ids that fit the model's block, and its length in tokens."""
    context = tokenizer.encode(question.context)
    sequences = []
    for candidate in question.candidates:
        ending = tokenizer.encode(" " + candidate)[: block_size // 2]  # as in encode()
        sequences.append(((context + ending)[-block_size - 1 :], len(ending)))
    return sequences


def chosen_accuracy(scores: list[list[float]], questions: list[Question]) -> float:
    """How often the highest-scoring candidate is the answer; a tie goes to the first."""
    right = sum(row.index(max(row)) == q.answer for row, q in zip(scores, questions, strict=True))
    return right / len(questions)


@torch.no_grad()
def zero_shot_accuracy(gpt: GPT, questions: list[Question], tokenizer: Tokenizer,
                       device: torch.device) -> float:
    gpt.eval()
    scores = []
    for q in questions:
        row = []
        for sequence, n in as_plain_text(q, tokenizer, gpt.config.block_size):
            ids = torch.tensor([sequence], device=device)  # (1, L)
            logits, _ = gpt(ids[:, :-1])  # (1, L-1, V)
            log_probs = F.log_softmax(logits.float(), dim=-1)[0, -n:]  # the predictions of the candidate
            row.append(log_probs.gather(1, ids[0, -n:, None]).mean().item())
        scores.append(row)
    return chosen_accuracy(scores, questions)


def bigram_accuracy(questions: list[Question], tokenizer: Tokenizer, train_tokens: np.ndarray,
                    block_size: int) -> float:
    sequences = [(ids, n) for q in questions for ids, n in as_plain_text(q, tokenizer, block_size)]
    # Each candidate token's predecessor, the context's last token included.
    previous = np.concatenate([ids[-n - 1 : -1] for ids, n in sequences])
    following = np.concatenate([ids[-n:] for ids, n in sequences])
    log_probs = bigram_log_probs(train_tokens, previous, following, tokenizer.vocab_size)
    means = [chunk.mean() for chunk in np.split(log_probs, np.cumsum([n for _, n in sequences])[:-1])]
    K = len(questions[0].candidates)
    return chosen_accuracy([means[i : i + K] for i in range(0, len(means), K)], questions)


# --- the comparison -----------------------------------------------------------------------------------------

def label_counts(asked: tuple, built: int) -> list[int]:
    """FT_LABELS as numbers of questions, smallest first; every question built when it is empty."""
    if not asked:
        return [built]
    if not all(str(n).isdigit() and 0 < int(n) <= built for n in asked):
        raise CourseError(f"error: --FT_LABELS takes counts of questions from 1 to the {built} built, like "
                          f"--FT_LABELS=100,{built}; raise --FT_TRAIN_QUESTIONS for more")
    return sorted({int(n) for n in asked})


def fine_tuned(pretrained: GPT, data: tuple, val_data: tuple, labels: list[int], cfg: SimpleNamespace,
               device: torch.device) -> list[dict]:
    """Fine-tune a copy of the pre-trained model, and the same architecture from random weights, once per
    seed and label count; every run takes the same number of steps, those of FT_EPOCHS over every question."""
    steps = cfg.FT_EPOCHS * -(-len(data[2]) // cfg.FT_BATCH_SIZE)
    runs = []
    for count in labels:
        for seed in cfg.FT_SEEDS:
            for start in cfg.FT_FROM:
                seed_everything(seed)
                gpt = copy.deepcopy(pretrained) if start == "pretrained" else GPT(pretrained.config)
                model = MultipleChoiceGPT(gpt, cfg.FT_CLF_DROPOUT).to(device)
                finetune(model, tuple(t[:count] for t in data), steps, cfg, device, seed,
                         desc=f"{start}, {count} questions, seed {seed}")
                runs.append({"from": start, "labels": count, "seed": seed,
                             "accuracy": accuracy(model, val_data, cfg, device)})
    return runs


def spread(runs: list[dict], start: str, labels: int) -> tuple[float, float, float]:
    """Mean, lowest and highest held-out accuracy over the seeds."""
    values = [r["accuracy"] for r in runs if r["from"] == start and r["labels"] == labels]
    return statistics.mean(values), min(values), max(values)


def report(results: dict, cfg: SimpleNamespace) -> None:
    runs, seeds = results["runs"], len(cfg.FT_SEEDS)
    se = (0.25 / results["questions"]) ** 0.5  # the largest standard error of an accuracy on this many
    print(f"\nheld-out accuracy, {results['questions']} questions (standard error <= {se:.1%} each)"
          + (f"; fine-tuned: mean (lowest .. highest) over {seeds} seeds" if seeds > 1 else ""))
    for name, label in [("chance", "chance"), ("word_overlap", "shared rare words (no model)"),
                        ("bigram", "bigram model (counted)"), ("zero_shot", "zero-shot (the LM alone)")]:
        print(f"  {label:<40}{results[name]:>7.1%}")
    for labels in sorted({r["labels"] for r in runs}):
        for start in cfg.FT_FROM:
            mean, low, high = spread(runs, start, labels)
            print(f"  {f'fine-tuned from {start}, {labels} questions':<40}{mean:>7.1%}"
                  + (f"  ({low:.1%} .. {high:.1%})" if seeds > 1 else ""))


def plot_labels(results: dict, cfg: SimpleNamespace, png_path: Path) -> Path:
    """Held-out accuracy against the number of labelled questions: each seed a dot, the mean a line, and the
    baselines as dashed lines."""
    from matplotlib.figure import Figure  # seconds to import: only when a curve is drawn

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    labels = sorted({r["labels"] for r in results["runs"]})
    for start, color in zip(cfg.FT_FROM, ("C0", "C1"), strict=False):
        points = [(r["labels"], r["accuracy"]) for r in results["runs"] if r["from"] == start]
        ax.plot(*zip(*points, strict=True), "o", color=color, alpha=0.4)
        ax.plot(labels, [spread(results["runs"], start, n)[0] for n in labels], "-", color=color,
                label=f"fine-tuned from {start}")
    for name, color in (("zero_shot", "C2"), ("bigram", "C3"), ("word_overlap", "C7")):
        ax.axhline(results[name], color=color, linestyle="--", label=f"{name.replace('_', ' ')}")
    ax.set(xscale="log", xlabel="labelled training questions", ylabel="held-out accuracy",
           title=f"GPT-1 fine-tuned on the {cfg.FT_TASK} task")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.savefig(png_path, dpi=120, bbox_inches="tight")
    return png_path


def main(argv: list[str] | None = None) -> dict:
    cfg = load_config(config, argv)
    if not cfg.FT_FROM or not set(cfg.FT_FROM) <= {"pretrained", "scratch"}:
        raise CourseError(f"error: --FT_FROM takes pretrained, scratch or both, got "
                          f"{','.join(cfg.FT_FROM)!r}")
    device = torch.device(cfg.DEVICE)
    print(f"device: {describe(device)}")
    pretrained, state = GPT.from_checkpoint(cfg.CHECKPOINT, cfg.OUT_DIR, device)
    data_dir = checkpoint_data_dir(state, load_tokenizer)  # the prepared data the model was trained on
    tokenizer = load_tokenizer(data_dir)
    train_q, val_q = load_questions(prepare_questions(cfg, data_dir))
    labels = label_counts(cfg.FT_LABELS, len(train_q))
    block = pretrained.config.block_size
    train_data, val_data = encode(train_q, tokenizer, block), encode(val_q, tokenizer, block)
    print(f"task {cfg.FT_TASK}: {len(train_q)} training and {len(val_q)} held-out questions, "
          f"{cfg.FT_CHOICES} candidates each (chance {1 / cfg.FT_CHOICES:.0%})")

    results = {"task": cfg.FT_TASK, "questions": len(val_q), "chance": 1 / cfg.FT_CHOICES,
               "word_overlap": word_overlap_accuracy(val_q, train_q),
               "bigram": bigram_accuracy(val_q, tokenizer, np.asarray(load_tokens(data_dir, "train")), block),
               "zero_shot": zero_shot_accuracy(pretrained, val_q, tokenizer, device)}
    results["runs"] = fine_tuned(pretrained, train_data, val_data, labels, cfg, device)
    for start in cfg.FT_FROM:  # the headline: the most questions asked for, mean over the seeds
        results[start] = spread(results["runs"], start, labels[-1])[0]
    report(results, cfg)
    out_dir = Path(cfg.OUT_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    if len(labels) > 1:
        png = plot_labels(results, cfg, out_dir / "finetune_labels.png")
        print(f"accuracy against labelled questions: {png}")
    (out_dir / "finetune_results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    run_main(main)
