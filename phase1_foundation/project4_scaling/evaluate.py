"""Scoring emergence.py's addition models: one set of generations, read by the metrics the two papers argue
over.

Wei et al. 2022 score arithmetic by exact match. Schaeffer et al. 2023 answer that exact match over an answer
of L tokens is about p^L for a per-token accuracy p, so it stays near zero while p climbs, and that continuous
metrics show the climb (they used the token edit distance and the Brier score; this chapter adds the
log-likelihood of the correct answer). p^L assumes every position is right with the same p; when positions
differ (the first digit of a sum is easy, the ones behind a carry are not), exact match follows the product
of each position's own accuracy instead, which is why both are kept.
"""

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from phase1_foundation.project4_scaling.addition import Addition, decode, encode
from phase1_foundation.project4_scaling.model import GPT


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance: the fewest insertions, deletions and substitutions that turn a into b."""
    previous = list(range(len(b) + 1))  # distances from a[:0] to every prefix of b
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def answer_scores(written: Sequence[str], answers: Sequence[str]) -> dict:
    """Written answers against the correct ones (all of one length L), under every metric that needs only the
    text. Answers are fixed-width, so position i of one is position i of every other; a missing digit is
    wrong.

    exact_match         the answer equals the correct one (Wei et al.'s metric for arithmetic)
    per_digit           the share of all digit positions right: the mean of digit_accuracy
    per_digit_power     per_digit^L, Schaeffer et al.'s estimate of exact match from one p for every position
    position_product    the product of digit_accuracy: the estimate with each position's own p
    edit_distance       Levenshtein distance between written and correct tokens (Schaeffer et al.'s)
    digit_accuracy      (L,) each position's share right, most significant first
    prefix_exact_match  (L,) the share of answers whose first l digits are all right, l = 1..L: exact match
                        on an l-digit answer, read off the same generations (exercise 4)
    """
    length = len(answers[0])
    right = np.array([[i < len(w) and w[i] == answer[i] for i in range(length)]
                      for w, answer in zip(written, answers, strict=True)])  # (P, L)
    digit_accuracy = right.mean(0)  # (L,)
    return {
        "exact_match": float(np.mean([w == answer for w, answer in zip(written, answers, strict=True)])),
        "per_digit": float(right.mean()),
        "per_digit_power": float(right.mean() ** length),
        "position_product": float(np.prod(digit_accuracy)),
        "edit_distance": float(np.mean([edit_distance(w, a) for w, a in zip(written, answers, strict=True)])),
        "digit_accuracy": digit_accuracy.tolist(),
        "prefix_exact_match": np.cumprod(right, axis=1).mean(0).tolist(),
    }


class EmergenceEvaluator:
    """A fixed held-out set of problems as few-shot prompts, and the metrics of a model's answers to them.

    Each prompt is the task line, `shots` solved exemplars and a query that ends right after its "=". The
    model decodes greedily for as many tokens as the correct completion has (a line that runs longer is cut
    there); only the new tokens are decoded, and the line ends at the first newline. The final answer in it
    is scored by answer_scores, and the model's probabilities by log_likelihood: the sum of log-probabilities
    (nats) of the correct completion's tokens, every one given the prompt and the correct tokens before it
    (teacher forcing): the answer's digits and its newline; for the scratchpad, the steps and ">" too.
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
        """`count` distinct problems drawn with `seed`, each with its own random exemplars. The seed is the
        evaluation's own: every model, whatever its training seed, answers the same problems."""
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
        """answer_scores of the model's final answers, and their mean log_likelihood."""
        was_training = model.training
        model.eval()
        written = [self.task.final_answer(line) for line in self.generate(model)]
        log_likelihood = self.log_likelihood(model)
        model.train(was_training)
        return answer_scores(written, self.answers) | {"log_likelihood": float(log_likelihood.mean())}
