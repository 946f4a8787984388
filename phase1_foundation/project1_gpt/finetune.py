"""Fine-tune GPT-1 on a multiple-choice task with the paper's input transformations (§3.3), and measure the
paper's central claim: pre-training helps.

    # uses the newest checkpoint
    uv run python phase1_foundation/project1_gpt/finetune.py
    # exercise 4: no auxiliary LM loss
    uv run python phase1_foundation/project1_gpt/finetune.py --FT_LM_WEIGHT=0

The task is built from the corpus itself (by download_data.py, beside the token files), in the spirit of the
Story Cloze Test the paper fine-tunes on: a few consecutive sentences of a document, then the true next
sentence among candidates taken from other documents.
Each candidate becomes one sequence `<|start|> context <|delim|> candidate <|extract|>`; a linear layer
reads the final state at <|extract|> and a softmax over the candidates picks one. Three numbers come out, on
questions from documents held out of pre-training:
  zero-shot    the pre-trained LM alone: the candidate it finds most likely as a continuation
  pre-trained  the pre-trained model fine-tuned on the task (loss = task + FT_LM_WEIGHT * LM, §3.2)
  scratch      the same architecture fine-tuned from random weights, same data, same budget
and, beside them, the rule a simple counter would use, with no model at all:
  word overlap the candidate that shares the rarest words with the context
"""

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from common import checkpoint as ckpt
from common.config import load_config
from common.device import autocast, describe, seed_everything
from common.optim import adamw, set_lr, warmup_linear
from common.progress import progress
from common.tokenizers import Tokenizer
from phase1_foundation.project1_gpt import config
from phase1_foundation.project1_gpt.download_data import Question, load_questions, prepare_questions
from phase1_foundation.project1_gpt.model import GPT, IGNORE, GPTConfig
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
    ids = torch.zeros(len(sequences), T, dtype=torch.long)  # padding after <|extract|> is never attended to:
    for row, seq in zip(ids, sequences, strict=True):  # the mask is causal
        row[: len(seq)] = torch.tensor(seq)
    extract_at = torch.tensor([len(seq) - 1 for seq in sequences])
    K = len(questions[0].candidates)
    return ids.view(-1, K, T), extract_at.view(-1, K), torch.tensor([q.answer for q in questions])


def trim(ids: Tensor, extract_at: Tensor) -> Tensor:
    """Drop the padding after this batch's last <|extract|>: most batches are far shorter than the
    longest question."""
    return ids[..., : extract_at.max() + 1]  # (B, K, T') with T' <= T


# --- a baseline with no model: shared rare words ------------------------------------------------------------
# The wrong candidate comes from another article, so it is usually about something else. A rule that only
# looks for the rare words (names, places, terms) a candidate shares with the context needs no model at all.

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

def finetune(model: MultipleChoiceGPT, data: tuple, cfg: SimpleNamespace, device: torch.device,
             desc: str) -> None:
    """The paper's recipe: AdamW, linear warmup over 0.2% of the steps then linear decay, L2 + lambda * L1."""
    ids, extract_at, answers = data
    steps_per_epoch = -(-len(answers) // cfg.FT_BATCH_SIZE)
    total = cfg.FT_EPOCHS * steps_per_epoch
    optimizer = adamw(model, cfg.FT_LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    generator = torch.Generator().manual_seed(cfg.SEED)
    bar = progress(total, desc=desc)
    model.train()
    for step in range(total):
        if step % steps_per_epoch == 0:
            order = torch.randperm(len(answers), generator=generator)
        batch = order[(step % steps_per_epoch) * cfg.FT_BATCH_SIZE :][: cfg.FT_BATCH_SIZE]
        x, e, y = trim(ids[batch], extract_at[batch]), extract_at[batch], answers[batch]
        x, e, y = x.to(device), e.to(device), y.to(device)
        set_lr(optimizer, warmup_linear(step, peak_lr=cfg.FT_LEARNING_RATE,
                                        warmup_steps=max(1, round(cfg.FT_WARMUP_RATIO * total)),
                                        total_steps=total))
        with autocast(device):
            scores, logits = model(x, e)
            task = F.cross_entropy(scores, y)
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


@torch.no_grad()
def zero_shot_accuracy(gpt: GPT, questions: list[Question], tokenizer: Tokenizer,
                       device: torch.device) -> float:
    """Pick the candidate with the highest mean log-probability per token after the context (plain text, no
    special tokens: the pre-trained LM never saw them)."""
    gpt.eval()
    correct = 0
    for q in questions:
        context = tokenizer.encode(q.context)
        scores = []
        for candidate in q.candidates:
            ending = tokenizer.encode(" " + candidate)[: gpt.config.block_size // 2]  # as in encode()
            ids = torch.tensor([(context + ending)[-gpt.config.block_size - 1 :]], device=device)  # (1, L)
            logits, _ = gpt(ids[:, :-1])  # (1, L-1, V)
            log_probs = F.log_softmax(logits.float(), dim=-1)[0, -len(ending) :]  # predictions of the ending
            targets = ids[0, -len(ending) :]
            scores.append(log_probs.gather(1, targets[:, None]).mean().item())
        correct += max(range(len(scores)), key=scores.__getitem__) == q.answer
    return correct / len(questions)


SEEN = 300  # training questions scored again after fine-tuning: how well a model fits what it was taught


def main(argv: list[str] | None = None) -> dict:
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    print(f"device: {describe(device)}")
    pretrained, state = GPT.from_checkpoint(cfg.CHECKPOINT, cfg.OUT_DIR, device)
    data_dir = ckpt.checkpoint_data_dir(state, load_tokenizer)  # the prepared data the model was trained on
    tokenizer = load_tokenizer(data_dir)
    train_q, val_q = load_questions(prepare_questions(cfg, data_dir))
    block = pretrained.config.block_size
    train_data, val_data = encode(train_q, tokenizer, block), encode(val_q, tokenizer, block)
    print(f"task: {len(train_q)} training and {len(val_q)} held-out questions, {cfg.FT_CHOICES} candidates "
          f"each (chance {1 / cfg.FT_CHOICES:.0%})")

    results = {"chance": 1 / cfg.FT_CHOICES, "word_overlap": word_overlap_accuracy(val_q, train_q),
               "zero_shot": zero_shot_accuracy(pretrained, val_q, tokenizer, device)}
    print(f"shared rare words (no model): {results['word_overlap']:.1%}")
    print(f"zero-shot accuracy: {results['zero_shot']:.1%}")
    for name in ("pretrained", "scratch"):
        seed_everything(cfg.SEED)
        gpt = pretrained if name == "pretrained" else GPT(GPTConfig(**state["model_config"])).to(device)
        model = MultipleChoiceGPT(gpt, cfg.FT_CLF_DROPOUT).to(device)
        finetune(model, train_data, cfg, device, desc=f"fine-tune ({name})")
        results[name] = accuracy(model, val_data, cfg, device)
        results[f"{name}_seen"] = accuracy(model, tuple(t[:SEEN] for t in train_data), cfg, device)
        print(f"fine-tuned from {name}: {results[name]:.1%} held out, {results[f'{name}_seen']:.1%} on "
              f"{min(SEEN, len(train_q))} of its training questions")

    se = (0.25 / len(val_q)) ** 0.5  # the largest standard error of an accuracy on this many questions
    print(f"\n{'held-out accuracy':<24}{len(val_q)} questions, standard error <= {se:.1%}")
    for name, label in [("chance", "chance"), ("word_overlap", "shared rare words"),
                        ("zero_shot", "zero-shot (LM only)"),
                        ("scratch", "fine-tuned from scratch"), ("pretrained", "fine-tuned, pre-trained")]:
        seen = results.get(f"{name}_seen")
        fit = "" if seen is None else f"   ({seen:.1%} on training questions)"
        print(f"  {label:<26}{results[name]:.1%}{fit}")
    path = Path(cfg.OUT_DIR) / "finetune_results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**results, "questions": len(val_q)}, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
