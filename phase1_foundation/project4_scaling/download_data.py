"""Prepare chapter 4's data, once, and say whether it is enough: corpus -> characters -> train.bin / val.bin.

    uv run python phase1_foundation/project4_scaling/download_data.py                      # the cpu sweep's
    uv run python phase1_foundation/project4_scaling/download_data.py --PRESET=gpu         # WikiText-103
    uv run python phase1_foundation/project4_scaling/download_data.py --TEXT_FILE=my_notes.txt

The text is read as characters: it is the tokenizer that makes the most tokens of a small corpus, and it needs
no training of its own. Characters seen fewer than MIN_CHAR_COUNT times become <unk>, so the embedding table
stays small beside the tiny models of the cpu sweep.

A scaling law is a law of data the model has not seen before. Repeating a little costs almost nothing: up to
about four epochs, repeated tokens were worth nearly as much as fresh ones (Muennighoff et al. 2023, §4).
So runs may read the training text up to MAX_EPOCHS times, and this script lists what the sweep will ask for:
the tokens of its longest run against the tokens there are.
"""

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from common.config import load_config
from common.corpora import prepare_corpus
from common.tokenizers import CharTokenizer
from common.tokens import read_meta, write_token_files
from phase1_foundation.project4_scaling import config
from phase1_foundation.project4_scaling.model import GPTConfig, flops_per_token, non_embedding_parameters
from phase1_foundation.project4_scaling.results import COUNTINGS

END_OF_TEXT = "<|endoftext|>"  # between documents
SPECIAL_TOKENS = ["<unk>", END_OF_TEXT]  # <unk>: a character the training text never had


def corpus_name(cfg: SimpleNamespace) -> str:
    """`auto` is the embedded wiki-sample: the cpu sweep is sized to it, and it needs no network."""
    if cfg.TEXT_FILE:
        return cfg.CORPUS
    return "wiki-sample" if cfg.CORPUS == "auto" else cfg.CORPUS


def prepare(cfg: SimpleNamespace) -> Path:
    """Return the folder holding the tokenizer and token files for this config, building it if missing."""
    corpus = prepare_corpus(corpus_name(cfg), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    print(f"corpus: {corpus.describe()}")
    out_dir = Path(cfg.DATA_DIR) / "project4" / f"{corpus.path.stem}-char-min{cfg.MIN_CHAR_COUNT}"
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["val_fraction"] == cfg.VAL_FRACTION:
        return out_dir
    tokenizer = CharTokenizer.train(corpus.iter_documents(), SPECIAL_TOKENS, min_count=cfg.MIN_CHAR_COUNT)
    tokenizer.save(out_dir)
    meta = write_token_files(corpus.iter_documents(), tokenizer, out_dir, val_fraction=cfg.VAL_FRACTION,
                             separator_id=tokenizer.token_to_id(END_OF_TEXT),
                             extra_meta={"corpus": corpus.name})
    print(f"wrote {meta['train_tokens']:,} train and {meta['val_tokens']:,} val characters to {out_dir}")
    return out_dir


# --- what the sweep asks for -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One point of the sweep: a model shape trained on the tokens its budget buys under its counting."""

    counting: str  # "kaplan" or "chinchilla" (results.COUNTINGS): how `budget` counts FLOPs
    budget: float  # C, FLOPs as the counting counts them
    n_layer: int
    n_embd: int
    params: int  # N, non-embedding (Kaplan's N, whatever the counting)
    flops_per_token: float  # training FLOPs per token under the counting: 6N, or App. F's
    steps: int  # optimizer steps of BATCH_SIZE x BLOCK_SIZE tokens: C / flops_per_token / tokens per step
    tokens: int  # D = steps x tokens per step, within half a step of C / flops_per_token

    @property
    def name(self) -> str:  # e.g. "kaplan_4e10_2x48", "chinchilla_1.2e11_1x16": counting, budget, shape
        mantissa, exponent = f"{self.budget:.1e}".split("e")
        return f"{self.counting}_{mantissa.removesuffix('.0')}e{int(exponent)}_{self.n_layer}x{self.n_embd}"


def parse_shape(text: str, head_size: int) -> tuple[int, int]:
    """"4x128" -> (4, 128): n_layer x d_model, d_model a multiple of head_size."""
    layers, _, width = text.partition("x")
    if not (layers.isdigit() and width.isdigit() and int(layers) > 0 and int(width) > 0):
        raise SystemExit(f"error: cannot read the shape {text!r}; write n_layer x d_model, like 4x128")
    if int(width) % head_size:
        raise SystemExit(f"error: shape {text}: d_model {width} is not a multiple of HEAD_SIZE={head_size}")
    return int(layers), int(width)


def planned_runs(cfg: SimpleNamespace, vocab_size: int) -> tuple[list[Run], list[Run]]:
    """(runs, too short): every shape at every budget of each counting in COUNTINGS, ordered by counting,
    budget and size, split by MIN_STEPS."""
    tokens_per_step = cfg.BATCH_SIZE * cfg.BLOCK_SIZE
    runs = []
    for counting in cfg.COUNTINGS:
        if counting not in COUNTINGS:
            raise SystemExit(f"error: unknown counting {counting!r}; choose from {', '.join(COUNTINGS)}")
        budgets = cfg.BUDGETS if counting == "kaplan" else cfg.CHINCHILLA_BUDGETS
        for budget in sorted(budgets):
            for n_layer, n_embd in sorted(parse_shape(s, cfg.HEAD_SIZE) for s in cfg.SHAPES):
                params = non_embedding_parameters(n_layer, n_embd)
                shape = GPTConfig(vocab_size=vocab_size, block_size=cfg.BLOCK_SIZE, n_layer=n_layer,
                                  n_head=n_embd // cfg.HEAD_SIZE, n_embd=n_embd)
                per_token = 6.0 * params if counting == "kaplan" else flops_per_token(shape, "chinchilla")
                steps = round(budget / per_token / tokens_per_step)  # D = C / (FLOPs per token)
                runs.append(Run(counting, budget, n_layer, n_embd, params, per_token, steps,
                                steps * tokens_per_step))
    order = list(COUNTINGS)
    runs.sort(key=lambda run: (order.index(run.counting), run.budget, run.params))
    return [r for r in runs if r.steps >= cfg.MIN_STEPS], [r for r in runs if r.steps < cfg.MIN_STEPS]


def affordable_runs(runs: list[Run], train_tokens: int, max_epochs: float) -> tuple[list[Run], list[Run]]:
    """(runs, too long): those that read the training text at most max_epochs times, and those that would
    read it more often."""
    return ([r for r in runs if r.tokens <= max_epochs * train_tokens],
            [r for r in runs if r.tokens > max_epochs * train_tokens])


def main(argv: list[str] | None = None) -> Path:
    cfg = load_config(config, argv)
    data_dir = prepare(cfg)
    meta = read_meta(data_dir)
    runs, too_short = planned_runs(cfg, meta["vocab_size"])
    runs, too_long = affordable_runs(runs, meta["train_tokens"], cfg.MAX_EPOCHS)
    print(f"{meta['vocab_size']} tokens (characters seen at least {cfg.MIN_CHAR_COUNT} times, and specials); "
          f"{meta['train_tokens']:,} train / {meta['val_tokens']:,} val tokens")
    if runs:
        longest = max(runs, key=lambda run: run.tokens)
        print(f"the sweep: {len(runs)} runs; the longest, {longest.name}, reads {longest.tokens:,} tokens, "
              f"{longest.tokens / meta['train_tokens']:.2f} epochs of the training split")
    if too_long:
        print(f"left out, as they would read the text more than MAX_EPOCHS={cfg.MAX_EPOCHS:g} times: "
              f"{', '.join(r.name for r in too_long)} (up to {max(r.tokens for r in too_long):,} tokens; a "
              "bigger --CORPUS or --TEXT_FILE has more)")
    if too_short:
        print(f"left out, fewer than MIN_STEPS={cfg.MIN_STEPS} steps: {', '.join(r.name for r in too_short)}")
    return data_dir


if __name__ == "__main__":
    main()
