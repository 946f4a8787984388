"""Continue a prompt with a trained GPT-1.

    uv run python phase1_foundation/project1_gpt/sample.py --PROMPT="The history of"
    uv run python phase1_foundation/project1_gpt/sample.py --CHECKPOINT=checkpoints/project1/gpt_iter400_loss5.1234.pt
    uv run python phase1_foundation/project1_gpt/sample.py --HF_DIR=path/to/openai-gpt   # the released weights

`--HF_DIR` takes a folder written by transformers' `OpenAIGPTLMHeadModel.save_pretrained` (config.json,
model.safetensors, vocab.json, merges.txt): the same architecture as ours, so the real GPT-1 runs in our code.
"""

from pathlib import Path

import torch

from common import checkpoint as ckpt
from common.config import load_config
from common.device import describe, seed_everything
from common.tokenizers import load_tokenizer
from phase1_foundation.project1_gpt import config
from phase1_foundation.project1_gpt.model import GPT, GPTConfig
from phase1_foundation.project1_gpt.train import KIND, PREFIX


def load_model(cfg, device: torch.device):
    """(model, tokenizer, checkpoint state) from our checkpoint, or (model, tokenizer, None) from an HF folder."""
    if cfg.HF_DIR:
        return GPT.from_hf(cfg.HF_DIR).to(device), load_tokenizer(Path(cfg.HF_DIR)), None
    path = ckpt.find_checkpoint(cfg.CHECKPOINT, Path(cfg.OUT_DIR), PREFIX)
    state = ckpt.load_checkpoint(path, kind=KIND, map_location=device)
    model = GPT(GPTConfig(**state["model_config"])).to(device)
    model.load_state_dict(ckpt.clean_state_dict(state["model"]))
    print(f"loaded {path} (step {state['step']})")
    return model, load_tokenizer(Path(state["tokenizer"])), state


def main(argv: list[str] | None = None) -> str:
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}")
    model, tokenizer, _ = load_model(cfg, device)
    model.eval()
    prompt = torch.tensor([tokenizer.encode(cfg.PROMPT)], device=device)  # (1, T)
    out = model.generate(prompt, cfg.SAMPLE_TOKENS, temperature=cfg.TEMPERATURE, top_k=cfg.TOP_K or None)
    text = tokenizer.decode(out[0].tolist())
    print(text)
    return text


if __name__ == "__main__":
    main()
