"""Our BERT's training step against transformers' BertForPreTraining, at the same shape, on the same batches.

    uv run python phase1_foundation/project3_contextual_embeddings/bench.py
    uv run python phase1_foundation/project3_contextual_embeddings/bench.py --N_LAYER=6 --DEVICE=cpu

Why: a from-scratch model that trains slower than the library's costs every learner on every run. Both models
start from the same weights (checked: the same first loss) and take whole training steps as train.py does,
alternating round by round so that a machine getting busier hurts both alike; the median round counts. The
batches are PairBatches over a synthetic corpus, so no prepared data is needed; the default shape is the cpu
preset's, trained as BERT was: what BertForPreTraining computes. README, "Speed", has the results.
"""

import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
import transformers

from common.errors import run_main
from common.training.config import load_config
from common.training.device import autocast, describe, enable_tf32, grad_scaler, seed_everything, synchronize
from common.training.optim import adamw
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.download_data import PAD_ID
from phase1_foundation.project3_contextual_embeddings.hf_weights import hf_tensor
from phase1_foundation.project3_contextual_embeddings.model import BERT, LN_EPS, BertConfig
from phase1_foundation.project3_contextual_embeddings.objectives import pretraining_loss
from phase1_foundation.project3_contextual_embeddings.pretraining_data import N_SPECIAL, pair_batches

ROUNDS = 5  # timed rounds per side, after one warm-up round
STEPS = {"cpu": 3}  # training steps per round and side (a GPU step is milliseconds: 25 there)
DESIGN = ("ours scores only the ~15% chosen positions (gathered before the MLM head and its tied V x C "
          "decoder); BertForPreTraining runs the head on all B*T positions, (B, T, V) logits, and lets "
          "CrossEntropyLoss ignore the -100 labels (modeling_bert.py, BertForPreTraining.forward). Also: "
          "ours has one fused q/k/v Linear (theirs three); a (B, 1, 1, T) padding mask (theirs a "
          "(B, 1, T, T) one, from masking_utils); no padding_idx on the token table (theirs: the [PAD] "
          "row gets no gradient); and it computes its per-kind metrics each step, with one copy to the "
          "host (theirs: the loss only).")


def synthetic_split(vocab_size: int, seed: int, n_documents: int = 200) -> tuple[np.ndarray, ...]:
    """A corpus in download_data.load_split's layout: tokens (N,), sentence offsets (S + 1,), document offsets
    (D + 1,). Random ordinary tokens in sentences of 5-40 tokens, 5-40 sentences a document."""
    rng = np.random.default_rng(seed)
    sentences_per_doc = rng.integers(5, 41, n_documents)  # (D,)
    lengths = rng.integers(5, 41, sentences_per_doc.sum())  # (S,)
    tokens = rng.integers(N_SPECIAL, vocab_size, lengths.sum()).astype(np.int32)  # (N,)
    sentences = np.concatenate([[0], np.cumsum(lengths)])  # (S + 1,) token offsets
    return tokens, sentences, np.concatenate([[0], np.cumsum(sentences_per_doc)])  # (D + 1,) sentence offsets


def hf_twin(model: BERT) -> transformers.BertForPreTraining:
    """transformers' BertForPreTraining in our model's exact configuration; our model takes its weights."""
    c = model.config
    hf_config = transformers.BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.n_embd, num_hidden_layers=c.n_layer,
        num_attention_heads=c.n_head, intermediate_size=4 * c.n_embd,
        hidden_act="gelu",  # "gelu": the exact (erf) GELU, our nn.GELU()
        hidden_dropout_prob=c.dropout, attention_probs_dropout_prob=c.dropout,
        max_position_embeddings=c.block_size, type_vocab_size=2, layer_norm_eps=LN_EPS, pad_token_id=PAD_ID,
        # ours calls F.scaled_dot_product_attention (or, with FAST_ATTENTION=False, the explicit softmax)
        attn_implementation="sdpa" if c.fast_attention else "eager",
    )
    hf = transformers.BertForPreTraining(hf_config)
    weights = hf.state_dict()
    with torch.no_grad():  # hf_weights.from_hf's loop, over a model in memory instead of a folder
        for name, param in model.named_parameters():  # the tied decoder comes once, as the token table
            param.copy_(hf_tensor(weights, name, param.shape, Path("BertForPreTraining")))
    return hf


def our_loss(model: BERT, batch: dict, use_nsp: bool) -> torch.Tensor:
    return pretraining_loss(model, batch, use_nsp)[0]  # train.py's loss, counts and all


def their_loss(model: transformers.BertForPreTraining, batch: dict, use_nsp: bool) -> torch.Tensor:
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                token_type_ids=batch["segment_ids"], labels=batch["mlm_labels"],
                next_sentence_label=1 - batch["nsp_labels"] if use_nsp else None)  # theirs: 0 = IsNext
    if use_nsp:
        return out.loss
    logits = out.prediction_logits  # (B, T, V): with no NSP label transformers returns no loss
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["mlm_labels"].flatten())


def training_step(model: torch.nn.Module, loss_fn, cfg: SimpleNamespace, device: torch.device):
    """train.py's step for one model, as a function of the batch: forward and loss under autocast, backward,
    clipping, AdamW (common/training/optim.py), zero_grad."""
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)  # active only for fp16 (older GPUs), as in train.py

    def step(batch: dict) -> None:
        with autocast(device):
            loss = loss_fn(model, batch, cfg.USE_NSP)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return step


def race(steps: dict, batches: list[dict], rounds: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds per training step of each side, one number per timed round. The sides take turns, each running
    all `batches` per turn; the first round warms up (allocator, kernels, optimizer state) and is not kept."""
    seconds = {name: [] for name in steps}
    for round_ in range(1 + rounds):
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            for batch in batches:
                step(batch)
            synchronize(device)
            if round_:
                seconds[name].append((time.perf_counter() - start) / len(batches))
    return seconds


def report(seconds: dict[str, list[float]], tokens_per_step: float) -> dict:
    """Tokens/s and ms per step of each side (median round, and the best), and the ratio ours / theirs."""
    results = {}
    for name, label in (("ours", "ours (model.py)"), ("theirs", "transformers BertForPreTraining")):
        median, best = statistics.median(seconds[name]), min(seconds[name])
        results[name] = dict(tokens_per_second=tokens_per_step / median, ms_per_step=1e3 * median,
                             best_ms_per_step=1e3 * best)
        print(f"{label:<33}{tokens_per_step / median:>10,.0f} tokens/s {1e3 * median:>9.1f} ms/step "
              f"(best {1e3 * best:.1f}; rounds: {', '.join(f'{1e3 * s:.1f}' for s in seconds[name])})")
    results["ratio"] = results["ours"]["tokens_per_second"] / results["theirs"]["tokens_per_second"]
    print(f"ours / theirs: {results['ratio']:.2f}x the tokens/s (target >= 1.0x; median rounds)")
    return results


def main(argv: list[str] | None = None, rounds: int = ROUNDS, steps: int | None = None) -> dict:
    """Print and return both sides' speed, their ratio, and both models' loss on the first batch."""
    argv = sys.argv[1:] if argv is None else argv
    # The cpu preset's shape with BERT's own training, the one BertForPreTraining implements: dropout 0.1,
    # MLM + NSP, 15% chosen. Yours come after: --PRESET=gpu wins.
    bert = [f"--{name}={value}" for name, value in config.BERT_TRAINING.items()]
    cfg = load_config(config, ["--PRESET=cpu", *bert, *argv])
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}; torch {torch.__version__}, transformers {transformers.__version__}")

    batches = pair_batches(synthetic_split(cfg.VOCAB_SIZE, cfg.SEED), cfg, cfg.VOCAB_SIZE, device, cfg.SEED,
                           training=True)
    start = time.perf_counter()
    timed = [batches.next() for _ in range(steps or STEPS.get(device.type, 25))]  # the same for both sides
    build_ms = 1e3 * (time.perf_counter() - start) / len(timed)
    tokens_per_step = float(np.mean([b["attention_mask"].sum().item() for b in timed]))  # real, not padding

    ours = BERT(BertConfig(vocab_size=cfg.VOCAB_SIZE, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                           n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                           fast_attention=cfg.FAST_ATTENTION))
    theirs = hf_twin(ours)
    ours, theirs = ours.to(device).eval(), theirs.to(device).eval()
    with torch.no_grad():  # fp32, dropout off: the same weights must give the same loss
        first = {"ours": our_loss(ours, timed[0], cfg.USE_NSP).item(),
                 "theirs": their_loss(theirs, timed[0], cfg.USE_NSP).item()}
    enable_tf32()  # as train.py, from here on
    attention = "F.scaled_dot_product_attention" if cfg.FAST_ATTENTION else "explicit softmax"
    print(f"batches: {cfg.BATCH_SIZE} pairs of <= {cfg.BLOCK_SIZE} tokens, {tokens_per_step:,.0f} real "
          f"tokens a step on average; tasks: MLM{' + NSP' if cfg.USE_NSP else ' only'}; PairBatches.next() "
          f"takes {build_ms:.1f} ms a batch, built before timing (train.py pays it inside each step)")
    print(f"attention: ours {attention}, theirs attn_implementation={theirs.config._attn_implementation!r}")
    print(f"by design: {DESIGN}")
    print(f"same weights: first-batch loss (fp32, no dropout) ours {first['ours']:.6f}, "
          f"theirs {first['theirs']:.6f}")
    print(f"timing: {rounds} rounds of {len(timed)} steps per side, alternating ours/theirs, after 1 warm-up "
          f"round; a step = forward, loss, backward, clip at {cfg.GRAD_CLIP}, AdamW, zero_grad")
    sides = {"ours": training_step(ours.train(), our_loss, cfg, device),
             "theirs": training_step(theirs.train(), their_loss, cfg, device)}
    results = report(race(sides, timed, rounds, device), tokens_per_step)
    return results | {"first_batch_loss": first, "tokens_per_step": tokens_per_step}


if __name__ == "__main__":
    run_main(main)
