"""Fine-tune BERT on a task people labelled (BERT §4, §A.3), and measure what pre-training gave it.

    # the newest checkpoint of train.py, on 200 movie-review sentences (offline)
    uv run python phase1_foundation/project3_contextual_embeddings/finetune.py
    # SST-2's sentences or MRPC's sentence pairs (downloaded once, pinned by sha256)
    uv run python phase1_foundation/project3_contextual_embeddings/finetune.py --TASK=mrpc
    # your own labelled file: text<TAB>label or text<TAB>text_b<TAB>label a line
    uv run python phase1_foundation/project3_contextual_embeddings/finetune.py --TASK_FILE=my.tsv
    # Google's released BERT (a transformers folder with config.json, weights and vocab.txt)
    uv run python phase1_foundation/project3_contextual_embeddings/finetune.py --HF_DIR=path/to/bert-base

The pooled [CLS] state feeds one new linear layer and every weight trains, the learning rate chosen on a dev
part of the training examples. The pre-trained model is scored beside the same architecture from random
weights, the commoner label and naive Bayes (Manning et al. 2008, §13.2), on the same held-out examples (by
k-fold cross-validation where a task has no test split). Finished runs are kept in
OUT_DIR/finetune_<task>.json; --RESUME=latest, with the same settings, carries on. README, "Fine-tuning: what
BERT is for", has the rest.
"""

import copy
import hashlib
import json
import math
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from common.data.tokenizers import Tokenizer
from common.errors import CourseError, run_main
from common.files import portable, write_atomic
from common.progress import progress_bar
from common.training.checkpoint import find_checkpoint
from common.training.config import load_config
from common.training.device import autocast, describe, grad_scaler, seed_everything
from common.training.interrupt import GracefulInterrupt
from common.training.optim import adamw, set_lr, warmup_linear
from common.training.run import checkpoint_tokenizer
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.download_data import encode_sentence
from phase1_foundation.project3_contextual_embeddings.finetune_data import Example, Task, load_task
from phase1_foundation.project3_contextual_embeddings.hf_weights import from_hf
from phase1_foundation.project3_contextual_embeddings.model import BERT, PREFIX
from phase1_foundation.project3_contextual_embeddings.pretraining_data import truncated_lengths
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer

SCRIPT = "phase1_foundation/project3_contextual_embeddings/finetune.py"
RESAMPLES = 2000  # bootstrap resamples of the held-out examples, for every interval


# --- the model: BERT, its pooler, one new layer -------------------------------------------------------------

class BertClassifier(nn.Module):
    """Scores each label from the pooled [CLS] state (§4.1: "the final hidden vector C ... W ∈ R^{K×H}")."""

    def __init__(self, bert: BERT, n_labels: int, dropout: float):
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)  # PAPER: BERT §A.3, dropout kept at 0.1
        self.classifier = nn.Linear(bert.config.n_embd, n_labels)
        # google-research/bert run_classifier.py: output weights N(0, 0.02), bias 0
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, input_ids: Tensor, segment_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Label scores (B, K) for inputs (B, T) built by pair_input."""
        h = self.bert.hidden_states(input_ids, segment_ids, attention_mask)  # (B, T, C)
        pooled = self.bert.pooler(h[:, 0])  # [CLS], the first position: (B, C)
        return self.classifier(self.dropout(pooled))  # (B, K)


def classifier_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of the labels (B,) under the scores (B, K): log_softmax is inside cross_entropy."""
    return F.cross_entropy(logits.float(), labels)


def pair_input(a: list[int], b: list[int] | None, max_tokens: int, cls_id: int, sep_id: int
               ) -> tuple[list[int], list[int]]:
    """Token ids and segment ids of `[CLS] a [SEP]` (segment 0), then `b [SEP]` (segment 1) for a pair
    (§3, Fig. 2). Too long, it is cut as pre-training's pairs are (truncated_lengths, BERT's
    _truncate_seq_pair), so a pair keeps something of both."""
    room = max_tokens - (2 if b is None else 3)  # the special tokens always stay
    keep_a, keep_b = truncated_lengths(np.array(len(a)), np.array(len(b or [])), room)
    a, b_kept = list(a)[: int(keep_a)], list(b or [])[: int(keep_b)]
    ids, segments = [cls_id, *a, sep_id], [0] * (len(a) + 2)
    if b is not None:
        ids, segments = ids + [*b_kept, sep_id], segments + [1] * (len(b_kept) + 1)
    return ids, segments


def encode(examples: list[Example], tokenizer: Tokenizer, labels: list[str], max_tokens: int
           ) -> dict[str, Tensor]:
    """Every example as padded model inputs (N, T) and label indices (N,)."""
    cls_id, sep_id, pad_id = (tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
    rows = [pair_input(encode_sentence(tokenizer, e.text),
                       None if e.text_b is None else encode_sentence(tokenizer, e.text_b),
                       max_tokens, cls_id, sep_id) for e in examples]
    T = max(len(ids) for ids, _ in rows)
    data = {name: torch.zeros(len(rows), T, dtype=torch.long)
            for name in ("input_ids", "segment_ids", "attention_mask")}
    data["input_ids"].fill_(pad_id)
    for i, (ids, segments) in enumerate(rows):
        data["input_ids"][i, : len(ids)] = torch.tensor(ids)
        data["segment_ids"][i, : len(ids)] = torch.tensor(segments)
        data["attention_mask"][i, : len(ids)] = 1
    data["labels"] = torch.tensor([labels.index(e.label) for e in examples])
    return data


def batch_of(data: dict[str, Tensor], rows: Tensor, device: torch.device) -> dict[str, Tensor]:
    """The examples `rows`, cut to the longest of them (most are far shorter than the longest of all)."""
    T = int(data["attention_mask"][rows].sum(1).max())
    return {k: (v[rows, :T] if v.dim() == 2 else v[rows]).to(device) for k, v in data.items()}


# --- fine-tuning --------------------------------------------------------------------------------------------

class Stopped(Exception):
    """Ctrl-C was pressed: the run in progress is dropped, the finished ones are kept."""


def finetune(model: BertClassifier, data: dict, rows: Tensor, lr: float, cfg: SimpleNamespace,
             device: torch.device, seed: int, interrupt: GracefulInterrupt) -> None:
    """The paper's recipe (§A.3): AdamW with decay 0.01, FT_EPOCHS passes over `rows` in batches of
    FT_BATCH_SIZE, shuffled anew each epoch, the learning rate rising over the first 10% of steps and then
    falling linearly to 0; gradients clipped at norm 1 as in pre-training."""
    per_epoch = math.ceil(len(rows) / cfg.FT_BATCH_SIZE)
    steps = cfg.FT_EPOCHS * per_epoch
    optimizer = adamw(model, lr, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)  # active only for fp16 (GPUs without bf16), as in train.py
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for step in range(steps):
        if step % per_epoch == 0:
            order = rows[torch.randperm(len(rows), generator=generator)]
        batch = batch_of(data, order[(step % per_epoch) * cfg.FT_BATCH_SIZE :][: cfg.FT_BATCH_SIZE], device)
        set_lr(optimizer, warmup_linear(step, peak_lr=lr, total_steps=steps,
                                        warmup_steps=max(1, round(cfg.FT_WARMUP_RATIO * steps))))
        with autocast(device):
            logits = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"])  # (B, K)
        scaler.scale(classifier_loss(logits, batch["labels"])).backward()
        scaler.unscale_(optimizer)  # so that clipping sees the true gradients
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if interrupt.requested:
            raise Stopped


@torch.no_grad()
def label_scores(model: BertClassifier, data: dict, rows: Tensor, device: torch.device, batch_size: int = 64
                 ) -> Tensor:
    """The model's label scores (N, K) for the examples `rows`, in eval mode, on the CPU."""
    model.eval()
    scores = []
    for start in range(0, len(rows), batch_size):
        batch = batch_of(data, rows[start : start + batch_size], device)
        with autocast(device):
            logits = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"])  # (B, K)
        scores.append(logits.float().cpu())
    return torch.cat(scores)  # (N, K)


def on_dev(scores: Tensor, labels: Tensor) -> tuple[float, float]:
    """(accuracy, -loss) of scores (N, K) on labels (N,): higher is better, the loss breaking ties of
    accuracy, which a few dozen dev examples often give."""
    return (scores.argmax(-1) == labels).float().mean().item(), -classifier_loss(scores, labels).item()


# --- no model: the commoner label, naive Bayes --------------------------------------------------------------

def words(example: Example) -> list[str]:
    """Lower-cased words of the text, and of the second text marked as such ("b:word")."""
    a = re.findall(r"\w+", example.text.lower())
    return a + ["b:" + w for w in re.findall(r"\w+", (example.text_b or "").lower())]


def commoner_label(train: list[Example], test: list[Example], labels: list[str]) -> list[int]:
    label = Counter(e.label for e in train).most_common(1)[0][0]  # a tie goes to the first seen
    return [labels.index(label)] * len(test)


def naive_bayes(train: list[Example], test: list[Example], labels: list[str]) -> list[int]:
    """Multinomial naive Bayes: log P(label) + sum over the words of log P(word | label), the word
    probabilities counted on `train` with one added to every count (Laplace); unseen words are skipped."""
    counts = {label: Counter() for label in labels}
    for e in train:
        counts[e.label].update(words(e))
    vocabulary = set().union(*counts.values())
    prior = Counter(e.label for e in train)
    chosen = []
    for e in test:
        seen = [w for w in words(e) if w in vocabulary]
        scores = [math.log(prior[label] / len(train))
                  + sum(math.log((counts[label][w] + 1) / (counts[label].total() + len(vocabulary)))
                        for w in seen)
                  for label in labels]
        chosen.append(scores.index(max(scores)))
    return chosen


# --- the comparison -----------------------------------------------------------------------------------------

def splits(task: Task, cfg: SimpleNamespace) -> tuple[list[Example], list[tuple[Tensor, Tensor, Tensor]]]:
    """All examples in one list, and (train, dev, test) rows into it for each split: the task's own test
    split, or FT_FOLDS folds, each with the labels in the same proportions (stratified). Each split's dev
    rows (FT_DEV_FRACTION of its training part, drawn at random) choose the learning rate."""
    generator = torch.Generator().manual_seed(cfg.SEED)
    n_train = len(task.train)
    if task.test is None:
        by_label = [torch.tensor([i for i, e in enumerate(task.train) if e.label == label])
                    for label in task.labels]
        chunks = [rows[torch.randperm(len(rows), generator=generator)].tensor_split(cfg.FT_FOLDS)
                  for rows in by_label]
        folds = [torch.cat([label_chunks[i] for label_chunks in chunks]) for i in range(cfg.FT_FOLDS)]
        rests = [torch.cat([f for j, f in enumerate(folds) if j != i]) for i in range(cfg.FT_FOLDS)]
        parts = [(rest[torch.randperm(len(rest), generator=generator)], fold)
                 for rest, fold in zip(rests, folds, strict=True)]
        examples = task.train
    else:  # only the training examples taken are kept (and encoded): SST-2 has 67,349
        taken = torch.randperm(n_train, generator=generator)[: cfg.FT_TRAIN_EXAMPLES or n_train]
        examples = [task.train[i] for i in taken] + task.test
        parts = [(torch.arange(len(taken)), torch.arange(len(taken), len(examples)))]
    result = []
    for rest, test in parts:
        dev = max(1, round(cfg.FT_DEV_FRACTION * len(rest)))
        result.append((rest[:-dev], rest[-dev:], test))
    return examples, result


def one_run(encoder: BERT, start: str, seed: int, data: dict, split: tuple, n_labels: int,
            cfg: SimpleNamespace, device: torch.device, interrupt: GracefulInterrupt, bar,
            train_encoder: bool) -> dict:
    """Fine-tune once per learning rate of the grid, from the same weights and batches; keep the test
    predictions of the one best on the dev rows (accuracy, then loss). train_encoder=False trains the new
    layer alone (exercise 7)."""
    train, dev, test = split
    best = None
    for lr in cfg.FT_LEARNING_RATES:
        seed_everything(seed)
        bert = copy.deepcopy(encoder) if start == "pretrained" else BERT(encoder.config)
        model = BertClassifier(bert.requires_grad_(train_encoder), n_labels, cfg.FT_DROPOUT).to(device)
        finetune(model, data, train, lr, cfg, device, seed, interrupt)
        dev_score = on_dev(label_scores(model, data, dev, device), data["labels"][dev])
        if best is None or dev_score > tuple(best["dev"]):
            best = {"lr": lr, "dev": dev_score,
                    "chosen": label_scores(model, data, test, device).argmax(-1).tolist()}
        bar.update()
    return best


def bootstrap(correct: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Each rule's accuracy on RESAMPLES resamples of the held-out examples, drawn with replacement, the
    same resamples for every rule (so that differences are paired). correct: name -> (N,) in [0, 1]."""
    n = len(next(iter(correct.values())))
    picks = np.random.default_rng(seed).integers(0, n, size=(RESAMPLES, n))
    return {name: values[picks].mean(1) for name, values in correct.items()}


def interval(values: np.ndarray) -> tuple[float, float]:
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def load_encoder(cfg: SimpleNamespace, device: torch.device) -> tuple[BERT, Tokenizer, str, str]:
    """The BERT to fine-tune, its tokenizer, how much it was trained, and where it came from: our checkpoint,
    or released weights."""
    if cfg.HF_DIR:
        encoder = from_hf(cfg.HF_DIR, heads=False)  # fine-tuning needs no pre-training head
        print(f"loaded {cfg.HF_DIR}; for BERT-base the paper's recipe is --FT_LEARNING_RATES=5e-5,4e-5,3e-5,"
              f"2e-5 --FT_EPOCHS=3 --FT_BATCH_SIZE=32 (now: {cfg.FT_LEARNING_RATES}, {cfg.FT_EPOCHS} epochs, "
              f"batch {cfg.FT_BATCH_SIZE})")
        folder = Path(cfg.HF_DIR)
        return encoder.to(device), load_tokenizer(folder), folder.name, portable(folder)
    path = find_checkpoint(cfg.CHECKPOINT, Path(cfg.OUT_DIR), PREFIX)
    encoder, state = BERT.from_checkpoint(path, device=device)
    return encoder, checkpoint_tokenizer(state, load_tokenizer), f"step {state['step']:,}", portable(path)


def run_all(encoder: BERT, data: dict, parts: list, n_labels: int, cfg: SimpleNamespace,
            device: torch.device, runs: dict, save, train_encoder: bool) -> dict:
    """Every (start, seed, split) run not yet in `runs`, each saved as soon as it is done."""
    todo = [f"{start} seed {seed} split {i}" for seed in cfg.FT_SEEDS for start in cfg.FT_FROM
            for i in range(len(parts))]
    grid = len(cfg.FT_LEARNING_RATES)
    bar = progress_bar(total=len(todo) * grid, initial=sum(key in runs for key in todo) * grid,
                       desc="fine-tune", unit="run")
    with GracefulInterrupt("Ctrl-C: stopping after this step; the finished runs are kept") as interrupt:
        for key in todo:
            if key in runs:
                continue
            start, _, seed, _, i = key.split()
            try:
                runs[key] = one_run(encoder, start, int(seed), data, parts[int(i)], n_labels, cfg, device,
                                    interrupt, bar, train_encoder)
            except Stopped:
                bar.close()
                interrupt.exit_saved(save(runs), SCRIPT)
            save(runs)
    bar.close()
    return runs


def compare(examples: list[Example], data: dict, parts: list, runs: dict, labels: list[str],
            cfg: SimpleNamespace) -> dict:
    """Accuracy of every rule on the same held-out examples, with its 95% bootstrap interval; for the
    fine-tuned models also the mean over seeds, each seed's accuracy and the learning rates chosen."""
    truth = np.concatenate([data["labels"][test].numpy() for _, _, test in parts])  # (N,)
    correct, out = {}, {}
    for name, rule in (("commoner label", commoner_label), ("naive Bayes", naive_bayes)):
        # no learning rate to choose: the rules learn from the whole training part, dev rows included
        chosen = [c for train, dev, test in parts
                  for c in rule([examples[i] for i in torch.cat([train, dev])], [examples[i] for i in test],
                                labels)]
        correct[name] = (np.array(chosen) == truth).astype(float)
    for start in cfg.FT_FROM:
        keys = [[f"{start} seed {seed} split {i}" for i in range(len(parts))] for seed in cfg.FT_SEEDS]
        right = np.array([np.concatenate([runs[k]["chosen"] for k in row]) == truth for row in keys])
        correct[start] = right.mean(0)  # (N,): the share of seeds right on each example
        out[start] = {"seeds": right.mean(1).tolist(),
                      "learning_rates": Counter(runs[k]["lr"] for row in keys for k in row)}
    resampled = bootstrap(correct, cfg.SEED)
    for name, values in correct.items():
        out.setdefault(name, {}).update(accuracy=float(values.mean()), interval=interval(resampled[name]))
    if set(cfg.FT_FROM) == {"pretrained", "scratch"}:
        gain = resampled["pretrained"] - resampled["scratch"]
        out["gain"] = {"points": float(correct["pretrained"].mean() - correct["scratch"].mean()),
                       "interval": interval(gain), "share_above_zero": float((gain > 0).mean())}
    return out


def report(task: Task, data: dict, parts: list, results: dict, described: str, cfg: SimpleNamespace,
           trained: str) -> None:
    """The table; `trained` says which weights learned ("every weight", or "the new layer only")."""
    n = sum(len(test) for _, _, test in parts)
    counts = Counter(data["labels"][torch.cat([test for _, _, test in parts])].tolist())
    how = (f"{cfg.FT_FOLDS}-fold cross-validation, every example tested once" if task.test is None else
           f"the task's test split; {len(parts[0][0]) + len(parts[0][1]):,} training examples")
    print(f"\n{task.name}: {task.about}\nheld out: {n:,} examples ({how}); "
          + ", ".join(f"{label} {counts[i]}" for i, label in enumerate(task.labels))
          + f"\n95% intervals: {RESAMPLES:,} bootstrap resamples of the held-out examples (every resample "
            "gives an accuracy)")
    seeds = f"{len(cfg.FT_SEEDS)} seeds: lowest .. highest"
    print(f"fine-tuned models: {trained} trained\n{'':<40}{'accuracy':>9}   {seeds:<30}{'95% interval':>16}")
    names = {"commoner label": "commoner label (no model)", "naive Bayes": "naive Bayes, bag of words",
             "scratch": "BERT from random weights", "pretrained": f"BERT pre-trained ({described})"}
    for key in ("commoner label", "naive Bayes", "scratch", "pretrained"):
        if key in results:
            r = results[key]
            seeds = f"{min(r['seeds']):.1%} .. {max(r['seeds']):.1%}" if "seeds" in r else ""
            low, high = r["interval"]
            print(f"  {names[key]:<38}{r['accuracy']:>9.1%}   {seeds:<30}{f'[{low:.1%}, {high:.1%}]':>16}")
    if "gain" in results:
        g = results["gain"]
        print(f"pre-trained minus random weights: {100 * g['points']:+.1f} points, 95% interval "
              f"[{100 * g['interval'][0]:+.1f}, {100 * g['interval'][1]:+.1f}] (paired resamples; "
              f"{g['share_above_zero']:.0%} of them above 0)")
    for start in cfg.FT_FROM:
        chosen = ", ".join(f"{lr:g} x{k}" for lr, k in sorted(results[start]["learning_rates"].items()))
        print(f"learning rate chosen on dev, {start}: {chosen}")


def check_settings(cfg: SimpleNamespace) -> None:
    """One line for each fine-tuning setting that cannot work, before anything is loaded."""
    if not cfg.FT_FROM or not set(cfg.FT_FROM) <= {"pretrained", "scratch"}:
        raise CourseError(f"error: --FT_FROM takes pretrained, scratch or both, got "
                          f"{','.join(cfg.FT_FROM)!r}")
    if not cfg.FT_SEEDS or not cfg.FT_LEARNING_RATES:
        raise CourseError("error: --FT_SEEDS and --FT_LEARNING_RATES each need a value at least, like "
                          "--FT_SEEDS=1337 --FT_LEARNING_RATES=1e-3")
    if cfg.FT_FOLDS < 2 or not 0 < cfg.FT_DEV_FRACTION < 1:
        raise CourseError(f"error: --FT_FOLDS needs 2 or more (got {cfg.FT_FOLDS}) and --FT_DEV_FRACTION a "
                          f"share between 0 and 1 (got {cfg.FT_DEV_FRACTION})")


def main(argv: list[str] | None = None, train_encoder: bool = True) -> dict:
    """The comparison, printed and saved; train_encoder=False keeps BERT as it is and trains only the new
    layer (exercise 7)."""
    cfg = load_config(config, argv)
    check_settings(cfg)
    device = torch.device(cfg.DEVICE)
    print(f"device: {describe(device)}")
    task = load_task(cfg.TASK, cfg.TASK_FILE, Path(cfg.DATA_DIR) / "downloads", cfg.FT_FOLDS)
    encoder, tokenizer, described, source = load_encoder(cfg, device)
    examples, parts = splits(task, cfg)
    data = encode(examples, tokenizer, task.labels, min(cfg.FT_MAX_TOKENS, encoder.config.block_size))
    print(f"task {task.name}: {len(examples):,} examples, labels {', '.join(task.labels)}; "
          f"{len(cfg.FT_SEEDS)} seed(s) x {len(parts)} split(s) x {len(cfg.FT_LEARNING_RATES)} learning "
          f"rates per start ({', '.join(cfg.FT_FROM)})")

    path = Path(cfg.OUT_DIR) / f"finetune_{task.name}{'' if train_encoder else '_frozen'}.json"
    settings = json.loads(json.dumps({"task": task.name, "model": source, "SEED": cfg.SEED,
                                      "examples": hashlib.sha256(json.dumps(examples).encode()).hexdigest(),
                                      "train_encoder": train_encoder,
                                      **{k: v for k, v in vars(cfg).items() if k.startswith("FT_")}}))
    runs = resumed(path, settings) if cfg.RESUME else {}

    def save(done: dict, **more) -> Path:
        write_atomic(path, json.dumps({"settings": settings, "runs": done, **more}, indent=1).encode())
        return path

    runs = run_all(encoder, data, parts, len(task.labels), cfg, device, runs, save, train_encoder)
    results = compare(examples, data, parts, runs, task.labels, cfg)
    report(task, data, parts, results, described, cfg,
           "every weight" if train_encoder else "the new layer only")
    print(f"results: {portable(save(runs, results=results))}")
    return results


def resumed(path: Path, settings: dict) -> dict:
    """The finished runs kept in `path`, if they were made with these settings."""
    if not path.exists():
        raise CourseError(f"error: nothing to resume: {path} does not exist; run without --RESUME")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        changed = [k for k in settings if saved["settings"].get(k) != settings[k]]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise CourseError(f"error: {path} is not a file finetune.py wrote; run without --RESUME") from None
    if changed:
        raise CourseError(f"error: {path} was made with other settings ({', '.join(changed)}); run with the "
                          "same ones to resume, or without --RESUME to start afresh")
    return saved["runs"]


if __name__ == "__main__":
    run_main(main)
