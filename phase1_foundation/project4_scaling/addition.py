"""The task emergence.py trains on: multi-digit addition written as text, one character per token.

Operands and answer are fixed-width and zero-padded, so every line of a variant has the same length and the
evaluator can decode a whole batch of prompts at once:

    add:\\n                 the task line
    482+517=0999\\n         solved exemplars
    123+045=0168\\n         the query and its completion

The scratchpad variant (Nye et al. 2021) writes the column sums before the answer, from the units up, each as
two digits (the carry out, then the digit), so that every step needs only two operand digits and the previous
step's carry: "add, steps:\\n" then "123+045=08,06,01>0168\\n".
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

HEADERS = {"plain": "add:\n", "scratchpad": "add, steps:\n"}  # the task line that opens every row and prompt
VOCAB = "\n +,0123456789:=>adepst"  # every character the rows use, one token each
STOI = {ch: i for i, ch in enumerate(VOCAB)}


def encode(text: str) -> list[int]:
    return [STOI[ch] for ch in text]


def decode(ids: Sequence[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


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

    def context(self, shots: int) -> int:
        """Tokens a model reads per row of shots + 1 problems: the row less its last newline, which is only
        ever a target. A model's block size, and the tokens one row of a batch costs."""
        return len(self.row(np.zeros((shots + 1, 2), dtype=int))) - 1


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
    in_line = torch.arange(task.context(shots) + 1 - len(task.header)) % line
    return torch.cat((torch.zeros(len(task.header), dtype=torch.bool), in_line >= query))[1:]
