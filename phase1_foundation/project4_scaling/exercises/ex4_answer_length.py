"""Exercise 4: move the exact-match threshold by changing only the answer's length.

Wei et al. read an ability's "threshold" off exact match: the scale where it leaves zero. Schaeffer et al.
answer that exact match over an answer of L tokens is about p^L, so the threshold depends on L as much as on
the model. Test it without training anything new: score the chapter's addition models (emergence.py's plain
variant) as if the answers were shorter. The share of answers whose first l digits are all right is exact
match on an l-digit task read off the same generations (emergence.jsonl's `prefix_exact_match`). For each l,
find the smallest model that reaches THRESHOLD, and set the measured exact match beside the product of the
first l positions' accuracies, Schaeffer's estimate of it.

    uv run python phase1_foundation/project4_scaling/emergence.py              # first, if not run yet
    uv run python phase1_foundation/project4_scaling/exercises/ex4_answer_length.py
    uv run python phase1_foundation/project4_scaling/exercises/ex4_answer_length.py --THRESHOLD=0.9

What you should see (emergence.py's cpu run, 3-digit addition, answers of 4 digits, on two cores; then the
default command, a second). Chance is what one constant answer scores on the first l digits: 0.500, 0.095,
0.010 and 0.001, since a 3-digit sum's first digit is 0 or 1 about equally often. Measured from chance, the
same six models and the same generations give: one digit, 3,312 parameters (0.99; the 888-parameter model's
0.54 is chance); two digits, 3,312 too (0.89, against 0.39 below it); three and four digits, no model in that
run (at most 0.12 and 0.11). The product of the positions' accuracies matches the measured exact match
within 0.02 on one, three and four digits; on two it is off by up to 0.18, where the first two digits' errors
go together. The README's emergence table, another run, placed the jump at 100k parameters (0.95 on all
four digits): the threshold also moves from run to run, and where the last two digits are learned nothing is
settled by one seed.
"""

import json
from pathlib import Path

import numpy as np

from common.config import load_config
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.exercises import own_settings

OWN = {"THRESHOLD": 0.5}  # the share of the way from chance to 1 that counts as "has the ability"


def chance(length: int, digits: int) -> float:
    """The exact match on an answer's first `digits` digits that one constant answer gets: the share of the
    commonest such prefix among the sums of every pair of operands (drawn uniformly, as emergence.py draws
    them; the answer has `length` digits, one more than the operands). The first digit of a 3-digit sum is 0
    or 1 about equally often, so scoring one digit starts at 0.50, not 0."""
    operands = np.arange(10 ** (length - 1))
    sums = np.add.outer(operands, operands).ravel()  # every pair once
    prefixes = sums // 10 ** (length - digits)  # the first `digits` digits of each zero-padded answer
    return float(np.bincount(prefixes).max() / len(sums))


def thresholds(rows: list[dict], threshold: float) -> list[dict]:
    """For each answer length l: the exact match a constant answer gets, the smallest model whose l-digit
    exact match is `threshold` of the way from that chance level to 1, and the largest gap between measured
    exact match and the product of the positions' accuracies."""
    rows = sorted(rows, key=lambda row: row["params"])
    length = len(rows[0]["prefix_exact_match"])
    found = []
    for digits in range(1, length + 1):
        measured = np.array([row["prefix_exact_match"][digits - 1] for row in rows])
        product = np.array([np.prod(row["digit_accuracy"][:digits]) for row in rows])
        floor = chance(length, digits)
        above_chance = (measured - floor) / (1 - floor)  # 0 at chance, 1 when every answer is right
        first = next((row for row, m in zip(rows, above_chance, strict=True) if m >= threshold), None)
        found.append({"length": digits, "params": first["params"] if first else None,
                      "shape": first["shape"] if first else None, "measured": measured.tolist(),
                      "chance": floor, "above_chance": above_chance.tolist(),
                      "gap": float(np.abs(measured - product).max())})
    return found


def main(argv: list[str] | None = None) -> list[dict]:
    own, rest = own_settings(argv, OWN)
    cfg = load_config(config, rest)
    path = Path(cfg.OUT_DIR) / "emergence.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: no {path}; run emergence.py first "
                         "(uv run python phase1_foundation/project4_scaling/emergence.py)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [row for row in rows if row["variant"] == "plain"]
    if not rows:
        raise SystemExit(f"error: {path} holds no plain-variant models; run emergence.py with "
                         "--EM_VARIANTS=plain,scratchpad")
    found = thresholds(rows, own["THRESHOLD"])
    sizes = ", ".join(f"{row['params']:,}" for row in sorted(rows, key=lambda row: row["params"]))
    print(f"exact match on the first l digits of the answer, models of N = {sizes}; chance is what one "
          "constant answer scores, and the threshold is measured from it: (exact - chance) / (1 - chance)")
    for item in found:
        where = f"{item['params']:,} parameters ({item['shape']})" if item["params"] else "no model"
        print(f"  l = {item['length']}: {' '.join(f'{m:.2f}' for m in item['measured'])}   chance "
              f"{item['chance']:.3f}; reaches {own['THRESHOLD']:.2f} above chance at {where}; "
              f"|measured - product of positions| <= {item['gap']:.2f}")
    return found


if __name__ == "__main__":
    main()
