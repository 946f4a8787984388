"""Continue a prompt with a trained GPT-2, and measure what the KV cache is worth.

    uv run python phase1_foundation/project2_gpt2/sample.py --PROMPT="The history of"
    uv run python phase1_foundation/project2_gpt2/sample.py --CHECKPOINT=path/to/gpt2_iter800_loss4.1234.pt
    uv run python phase1_foundation/project2_gpt2/sample.py --HF_DIR=path/to/gpt2  # OpenAI's GPT-2
    uv run python phase1_foundation/project2_gpt2/sample.py --PROMPT="Q: Who?" --STOP=$'\n'  # stop at newline

`--HF_DIR` takes a folder written by transformers' `GPT2LMHeadModel.save_pretrained` (config.json,
model.safetensors, vocab.json, merges.txt), so the real GPT-2 runs in our code. The sample is generated twice
from the same seed, with the cache and without, and both speeds are printed. README, "Generating text fast".
"""

import time
from pathlib import Path

import torch

from common.errors import CourseError, run_main
from common.training.config import load_config
from common.training.device import describe, seed_everything, synchronize
from common.training.run import checkpoint_tokenizer
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.generate import generate
from phase1_foundation.project2_gpt2.hf_weights import from_hf
from phase1_foundation.project2_gpt2.model import GPT
from phase1_foundation.project2_gpt2.tokenizer import ByteBPETokenizer, load_tokenizer


def load(cfg) -> tuple[GPT, ByteBPETokenizer]:
    """Our checkpoint (which carries its tokenizer's files), or an HF-layout folder."""
    device = torch.device(cfg.DEVICE)
    if cfg.HF_DIR:  # released weights: the tokenizer's files are in the same folder
        return from_hf(cfg.HF_DIR).to(device).eval(), load_tokenizer(Path(cfg.HF_DIR))
    model, state = GPT.from_checkpoint(cfg.CHECKPOINT, cfg.OUT_DIR, device)
    return model, checkpoint_tokenizer(state, load_tokenizer)


def timed_generate(model: GPT, prompt: torch.Tensor, cfg, eos_id: int, stop, use_cache: bool
                   ) -> tuple[torch.Tensor, float]:
    """The continuation of `prompt` (1, T) and the tokens per second it was generated at."""
    generator = torch.Generator(prompt.device).manual_seed(cfg.SEED)  # the same draws with and without cache
    synchronize(prompt.device)
    start = time.perf_counter()
    out = generate(model, prompt, cfg.SAMPLE_TOKENS, temperature=cfg.TEMPERATURE, top_k=cfg.TOP_K or None,
                   top_p=cfg.TOP_P or None, eos_id=eos_id, stop=stop, use_cache=use_cache,
                   generator=generator)
    synchronize(prompt.device)
    new_tokens = out.size(1) - prompt.size(1)
    return out, new_tokens / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> str:
    cfg = load_config(config, argv)
    seed_everything(cfg.SEED)
    print(f"device: {describe(torch.device(cfg.DEVICE))}")
    model, tokenizer = load(cfg)
    ids = tokenizer.encode(cfg.PROMPT)
    if not ids:
        raise CourseError("error: the prompt is empty; pass some text, e.g. --PROMPT=\"The\"")
    if len(ids) >= model.config.block_size:
        raise CourseError(f"error: the prompt is {len(ids)} tokens, but the model reads at most "
                          f"{model.config.block_size}; shorten --PROMPT to leave room for the continuation")
    prompt = torch.tensor([ids], device=next(model.parameters()).device)  # (1, T)

    def stop(new_ids: torch.Tensor) -> bool:  # (1, n) generated so far: has the stop string appeared?
        return bool(cfg.STOP) and cfg.STOP in tokenizer.decode(new_ids[0].tolist())

    speeds = {}
    for use_cache in (False, True):  # the cached run last, so its output is the one printed
        out, speeds[use_cache] = timed_generate(model, prompt, cfg, tokenizer.eot_id, stop, use_cache)
    continuation = tokenizer.decode(out[0, len(ids):].tolist())
    if cfg.STOP and cfg.STOP in continuation:
        continuation = continuation[: continuation.index(cfg.STOP)]
    text = cfg.PROMPT + continuation
    print(f"{text}\n---\n{out.size(1) - len(ids)} tokens: {speeds[True]:,.0f} tokens/s with the KV cache, "
          f"{speeds[False]:,.0f} without ({speeds[True] / speeds[False]:.1f}x)")
    return text


if __name__ == "__main__":
    run_main(main)
