"""Our GPT-2 against transformers' GPT2LMHeadModel, same shape, same weights: a training step and generation.

    uv run python phase1_foundation/project2_gpt2/bench.py                   # the cpu preset's shape
    uv run python phase1_foundation/project2_gpt2/bench.py --N_LAYER=6 --DEVICE=cpu

Ours is saved with to_hf and read back by GPT2LMHeadModel.from_pretrained, so both start from the same
weights. The sides race in alternating rounds after a warm-up one, and the median round counts: whole training
steps as train.py takes them, and greedy generation in fp32, ours with its KV cache, theirs with
`generate(use_cache=True)`; both must write the same tokens. The default shape is the cpu preset's.
README, "Against `transformers`".
"""

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from types import SimpleNamespace

import torch
import torch.nn.functional as F
import transformers

from common.errors import run_main
from common.training.config import load_config
from common.training.device import autocast, describe, enable_tf32, grad_scaler, seed_everything, synchronize
from common.training.optim import adamw
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.download_data import auto_vocab_size
from phase1_foundation.project2_gpt2.generate import generate
from phase1_foundation.project2_gpt2.hf_weights import to_hf
from phase1_foundation.project2_gpt2.model import GPT, GPTConfig

ROUNDS = 5  # timed rounds per side and race, after one warm-up round
STEPS = {"cpu": 3}  # training steps per round and side (a GPU step is milliseconds: 25 there)
PROMPT_TOKENS = 16  # the generation prompt; SAMPLE_TOKENS new tokens follow it, as far as block_size allows
WIKI_SAMPLE_CHARACTERS = 2_736_941  # the embedded corpus: what VOCAB_SIZE=0 sizes the vocabulary to
DESIGN = ("both fuse q, k, v into one matmul (ours nn.Linear, theirs OpenAI's Conv1D: the same product, the "
          "weight stored transposed). In generation ours keeps a cache allocated once at block_size and "
          "fills it in place; theirs grows a DynamicCache by concatenation, and each step also runs "
          "generate()'s input preparation, logits processors and stopping criteria. Both losses are "
          "F.cross_entropy of the logits against the next tokens (GPT2LMHeadModel's labels= would shift "
          "inside and score one token fewer a row).")


def hf_twin(model: GPT) -> transformers.GPT2LMHeadModel:
    """transformers' GPT2LMHeadModel with our model's weights: written by to_hf, read by from_pretrained.

    attn_implementation "sdpa" is transformers' default, the fused kernel ours calls too; with
    FAST_ATTENTION=False both sides take the explicit softmax ("eager").
    """
    with tempfile.TemporaryDirectory() as folder:
        to_hf(model, folder)
        attention = "sdpa" if model.config.fast_attention else "eager"
        return transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation=attention)


def our_loss(model: GPT, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return model(x, y)[1]


def their_loss(model: transformers.GPT2LMHeadModel, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x).logits  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def training_round(model: torch.nn.Module, loss_fn, batches: list, cfg: SimpleNamespace, device: torch.device
                   ) -> Callable[[], None]:
    """One round of training for one side: train.py's step (forward and loss under autocast, backward,
    clipping, AdamW, zero_grad) on each of `batches`."""
    optimizer = adamw(model, cfg.LEARNING_RATE, cfg.WEIGHT_DECAY, cfg.BETAS, device)
    scaler = grad_scaler(device)  # active only for fp16 (older GPUs), as in train.py

    def run() -> None:
        for x, y in batches:
            with autocast(device):
                loss = loss_fn(model, x, y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.GRAD_CLIP)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)

    return run


def generation_rounds(ours: GPT, theirs: transformers.GPT2LMHeadModel, prompt: torch.Tensor, new_tokens: int
                      ) -> dict[str, Callable[[], torch.Tensor]]:
    """One greedy generation per side: the prompt (1, P) and `new_tokens` more, (1, P + new_tokens)."""
    mask = torch.ones_like(prompt)  # one unpadded row; transformers asks for the mask rather than guess it

    def our_generation() -> torch.Tensor:
        return generate(ours, prompt, new_tokens, temperature=0, use_cache=True)

    def their_generation() -> torch.Tensor:
        # No eos_token_id in the config (to_hf wrote none), so neither side stops early; pad_token_id only
        # silences the warning that there is none.
        return theirs.generate(prompt, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                               use_cache=True, pad_token_id=0)

    return {"ours": our_generation, "theirs": their_generation}


def race(sides: dict[str, Callable], rounds: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds per round of each side. The sides take turns, one round each; the first round warms up
    (allocator, kernels, optimizer state) and is not kept."""
    seconds = {name: [] for name in sides}
    for round_ in range(1 + rounds):
        for name, run in sides.items():
            synchronize(device)
            start = time.perf_counter()
            run()
            synchronize(device)
            if round_:
                seconds[name].append(time.perf_counter() - start)
    return seconds


def report(what: str, seconds: dict[str, list[float]], tokens_per_round: int, target: float,
           labels: tuple[str, str] = ("ours (model.py)", "transformers GPT2LMHeadModel")) -> dict:
    """Tokens/s of each side (median round, and the best) and the ratio ours / theirs; printed, returned."""
    print(f"\n{what}:")
    results = {}
    for name, label in zip(("ours", "theirs"), labels, strict=True):
        median, best = statistics.median(seconds[name]), min(seconds[name])
        results[name] = dict(tokens_per_second=tokens_per_round / median, ms_per_round=1e3 * median,
                             best_ms_per_round=1e3 * best)
        print(f"  {label:<31}{tokens_per_round / median:>10,.0f} tokens/s {1e3 * median:>9.1f} ms/round "
              f"(best {1e3 * best:.1f}; rounds: {', '.join(f'{1e3 * s:.1f}' for s in seconds[name])})")
    results["ratio"] = results["ours"]["tokens_per_second"] / results["theirs"]["tokens_per_second"]
    print(f"  ours / theirs: {results['ratio']:.2f}x the tokens/s (target >= {target}x; median rounds)")
    return results


def main(argv: list[str] | None = None, rounds: int = ROUNDS, steps: int | None = None) -> dict:
    """Print and return both races (tokens/s of each side and the ratio), the first-batch losses and whether
    both sides generated the same tokens."""
    argv = sys.argv[1:] if argv is None else argv
    cfg = load_config(config, ["--PRESET=cpu", *argv])  # yours come after: --PRESET=gpu wins
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}; torch {torch.__version__}, transformers {transformers.__version__}")
    transformers.logging.disable_progress_bar()  # from_pretrained's bar over a few dozen tensors

    vocab_size = cfg.VOCAB_SIZE or auto_vocab_size(WIKI_SAMPLE_CHARACTERS)
    ours = GPT(GPTConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=cfg.N_LAYER,
                         n_head=cfg.N_HEAD, n_embd=cfg.N_EMBD, dropout=cfg.DROPOUT,
                         fast_attention=cfg.FAST_ATTENTION))
    theirs = hf_twin(ours)
    ours, theirs = ours.to(device).eval(), theirs.to(device).eval()

    generator = torch.Generator().manual_seed(cfg.SEED)
    windows = torch.randint(vocab_size, (steps or STEPS.get(device.type, 25), cfg.BATCH_SIZE,
                                         cfg.BLOCK_SIZE + 1), generator=generator).to(device)  # (S, B, T + 1)
    batches = [(w[:, :-1], w[:, 1:]) for w in windows]  # (x, y), (B, T) each: y is x moved on by one
    prompt_tokens = min(PROMPT_TOKENS, cfg.BLOCK_SIZE // 2)
    new_tokens = min(cfg.SAMPLE_TOKENS, cfg.BLOCK_SIZE - prompt_tokens)  # neither side may pass block_size
    prompt = torch.randint(vocab_size, (1, prompt_tokens), generator=generator).to(device)  # (1, P)

    with torch.no_grad():  # fp32, dropout off: the same weights must give the same loss
        first = {"ours": our_loss(ours, *batches[0]).item(), "theirs": their_loss(theirs, *batches[0]).item()}
    generations = generation_rounds(ours, theirs, prompt, new_tokens)
    same_tokens = torch.equal(generations["ours"](), generations["theirs"]())

    attention = "F.scaled_dot_product_attention" if cfg.FAST_ATTENTION else "explicit softmax"
    print(f"model: {ours.num_parameters():,} parameters ({cfg.N_LAYER} layers, {cfg.N_EMBD} wide, "
          f"{cfg.N_HEAD} heads, block {cfg.BLOCK_SIZE}, vocabulary {vocab_size:,})")
    print(f"attention: ours {attention}, theirs attn_implementation={theirs.config._attn_implementation!r}")
    print(f"by design: {DESIGN}")
    print(f"same weights: first-batch loss (fp32, no dropout) ours {first['ours']:.6f}, theirs "
          f"{first['theirs']:.6f}; greedy generation, the same tokens: {'yes' if same_tokens else 'NO'}")
    print(f"timing: {rounds} rounds per side, alternating ours/theirs, after 1 warm-up round")

    # Generation first, while both models still hold the same weights; training changes them.
    generation = report(f"generation, greedy: a {prompt_tokens}-token prompt + {new_tokens} new tokens",
                        race(generations, rounds, device), new_tokens, target=1.5)
    enable_tf32()  # as train.py, from here on
    sides = {"ours": training_round(ours.train(), our_loss, batches, cfg, device),
             "theirs": training_round(theirs.train(), their_loss, batches, cfg, device)}
    training = report(f"training: {len(batches)} steps a round of {cfg.BATCH_SIZE} x {cfg.BLOCK_SIZE} tokens "
                      f"(forward, loss, backward, clip at {cfg.GRAD_CLIP}, AdamW, zero_grad)",
                      race(sides, rounds, device), len(batches) * cfg.BATCH_SIZE * cfg.BLOCK_SIZE, target=1.0)
    return {"training": training, "generation": generation | {"same_tokens": same_tokens},
            "first_batch_loss": first, "vocab_size": vocab_size}


if __name__ == "__main__":
    run_main(main)
