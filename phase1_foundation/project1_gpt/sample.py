"""Continue a prompt with a trained GPT-1.

    uv run python phase1_foundation/project1_gpt/sample.py --PROMPT="The history of"
    uv run python phase1_foundation/project1_gpt/sample.py --CHECKPOINT=path/to/gpt_iter400_loss5.1234.pt
    uv run python phase1_foundation/project1_gpt/sample.py --HF_DIR=path/to/openai-gpt  # the released weights

`--HF_DIR` takes a folder written by transformers' `OpenAIGPTLMHeadModel.save_pretrained` (config.json,
model.safetensors, vocab.json, merges.txt): the same architecture as ours, so the real GPT-1 runs in our code.
README, "Run it".
"""

from pathlib import Path

import torch

from common.errors import run_main
from common.training.config import load_config
from common.training.device import describe, seed_everything
from common.training.run import checkpoint_tokenizer
from phase1_foundation.project1_gpt import config
from phase1_foundation.project1_gpt.generate import generate
from phase1_foundation.project1_gpt.hf_weights import from_hf
from phase1_foundation.project1_gpt.model import GPT
from phase1_foundation.project1_gpt.tokenizer import load_tokenizer


def main(argv: list[str] | None = None) -> str:
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}")
    if cfg.HF_DIR:  # released weights: the tokenizer's files are in the same folder
        model, tokenizer = from_hf(cfg.HF_DIR).to(device).eval(), load_tokenizer(Path(cfg.HF_DIR))
    else:  # our checkpoint: it carries its tokenizer's files
        model, state = GPT.from_checkpoint(cfg.CHECKPOINT, cfg.OUT_DIR, device)
        tokenizer = checkpoint_tokenizer(state, load_tokenizer)
    prompt = torch.tensor([tokenizer.encode(cfg.PROMPT)], device=device)  # (1, T)
    out = generate(model, prompt, cfg.SAMPLE_TOKENS, temperature=cfg.TEMPERATURE, top_k=cfg.TOP_K or None)
    text = tokenizer.decode(out[0].tolist())
    print(text)
    return text


if __name__ == "__main__":
    run_main(main)
