"""What BERT learned, shown two ways: it fills in blanks, and it gives a word a different vector in
every context.

    uv run python phase1_foundation/project3_contextual_embeddings/embed.py
    uv run python phase1_foundation/project3_contextual_embeddings/embed.py --TEXT="Paris is France's [MASK]."
    uv run python phase1_foundation/project3_contextual_embeddings/embed.py --WORD=state
    uv run python phase1_foundation/project3_contextual_embeddings/embed.py --HF_DIR=path/to/bert-base-uncased

(a) Fill in the blank: the model's top TOP_K tokens for each [MASK] in TEXT, the task it was trained on.
(b) Contextual embeddings: CONTEXTS sentences of the corpus that contain WORD, and the final hidden state of
WORD in each. A static embedding such as Word2Vec (trained here on the same sentences) gives WORD one vector,
so every pair of occurrences has cosine similarity 1; BERT's vectors differ with the sentence around the
word. The figure embeddings.png shows both similarity matrices side by side.

`--HF_DIR` takes a folder written by transformers' `BertForPreTraining.save_pretrained` (config.json, weights,
vocab.txt), for example Google's bert-base-uncased: the same architecture as ours, so it runs in this code.
"""

import itertools
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from common import checkpoint as ckpt
from common.config import load_config
from common.device import describe, seed_everything
from common.tokenizers import Tokenizer
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.download_data import (
    encode_sentence,
    load_split,
    prepare,
)
from phase1_foundation.project3_contextual_embeddings.model import BERT
from phase1_foundation.project3_contextual_embeddings.tokenizer import load_tokenizer


def load_model(cfg: SimpleNamespace, device: torch.device) -> tuple[BERT, Tokenizer, Path]:
    """(model in eval mode, tokenizer, prepared-data folder) from our checkpoint, or from a
    transformers folder."""
    if cfg.HF_DIR:
        model, tokenizer = BERT.from_hf(cfg.HF_DIR), load_tokenizer(Path(cfg.HF_DIR))
        print(f"loaded {cfg.HF_DIR}")
        return model.to(device).eval(), tokenizer, prepare(cfg)  # the corpus only supplies example sentences
    model, state = BERT.from_checkpoint(cfg.CHECKPOINT, cfg.OUT_DIR, device)
    data_dir = ckpt.checkpoint_data_dir(state, load_tokenizer)
    return model, load_tokenizer(data_dir), data_dir


def special(tokenizer: Tokenizer, name: str) -> int:
    return tokenizer.token_to_id(f"[{name}]")  # at 0..4 in ours, elsewhere in Google's ([MASK] = 103)


def encode_pieces(tokenizer: Tokenizer, pieces: list[str]) -> list[list[int]]:
    """Each piece of a sentence encoded on its own, so we know exactly which tokens came from which piece."""
    return [encode_sentence(tokenizer, piece.strip()) if piece.strip() else [] for piece in pieces]


def encode_text(tokenizer: Tokenizer, text: str) -> list[int]:
    """[CLS] text [SEP] as ids, each "[MASK]" in the text becoming the [MASK] token (a tokenizer trained on
    plain text would spell the string "[MASK]" in pieces)."""
    ids = [special(tokenizer, "CLS")]
    for i, piece in enumerate(encode_pieces(tokenizer, text.split("[MASK]"))):
        ids += ([special(tokenizer, "MASK")] if i else []) + piece
    return ids + [special(tokenizer, "SEP")]


# --- (a) fill in the blank --------------------------------------------------------------------------------

@torch.no_grad()
def fill_mask(model: BERT, tokenizer: Tokenizer, text: str, top_k: int,
              device: torch.device) -> list[list[tuple[str, float]]]:
    """The top_k (token, probability) for each [MASK] in text."""
    if "[MASK]" not in text:
        raise SystemExit('error: --TEXT needs at least one [MASK], '
                         'like --TEXT="The [MASK] flowed into the sea."')
    input_ids = torch.tensor([encode_text(tokenizer, text)], device=device)  # (1, T)
    masked = input_ids == special(tokenizer, "MASK")  # (1, T)
    logits, _ = model(input_ids, masked=masked)  # (number of masks, V)
    probs, top = F.softmax(logits.float(), dim=-1).topk(top_k, dim=-1)  # (masks, top_k)
    return [[(tokenizer.decode([t]).strip() or repr(tokenizer.decode([t])), p) for t, p in
             zip(row.tolist(), prob.tolist(), strict=True)] for row, prob in zip(top, probs, strict=True)]


# --- (b) one word, many contexts --------------------------------------------------------------------------

def corpus_sentences(data_dir: Path) -> list[str]:
    """Every sentence of the prepared corpus as text (both splits), decoded from the token files."""
    tokenizer = load_tokenizer(data_dir)
    sentences = []
    for split in ("train", "val"):
        tokens, offsets, _ = load_split(data_dir, split)
        sentences += [tokenizer.decode(tokens[a:b].tolist()).strip() for a, b in itertools.pairwise(offsets)]
    return sentences


def words(sentence: str) -> list[str]:
    return re.findall(r"[A-Za-z]+", sentence)  # cased, as our tokenizer is: "Bank" and "bank" differ


def contexts_of(word: str, sentences: list[str], n: int) -> tuple[str, list[str]]:
    """Up to n sentences that contain word (exactly, case included, so every occurrence is the same token and
    only the context differs); if fewer than two do, a frequent word of the corpus instead."""
    def containing(w):
        return [s for s in sentences if re.search(rf"\b{w}\b", s) and len(s) < 300]

    found = containing(word)
    if len(found) < 2:
        counts = Counter(w for s in sentences for w in set(words(s)) if len(w) >= 5)
        fallback = counts.most_common(1)[0][0]
        print(f"'{word}' is in {len(found)} sentence(s) of this corpus; "
              f"showing '{fallback}' instead (--WORD=...)")
        word, found = fallback, containing(fallback)
    step = max(1, len(found) // n)  # spread over the corpus rather than the first n of one article
    return word, found[::step][:n]


@torch.no_grad()
def contextual_vectors(model: BERT, tokenizer: Tokenizer, word: str, sentences: list[str],
                       device: torch.device) -> torch.Tensor:
    """(n, C): for each sentence, the mean final hidden state over the tokens of its first
    occurrence of word."""
    vectors = []
    for sentence in sentences:
        match = re.search(rf"\b{word}\b", sentence)
        before, middle, after = encode_pieces(tokenizer, [sentence[: match.start()],
                                                          sentence[match.start() : match.end()],
                                                          sentence[match.end() :]])
        ids = [special(tokenizer, "CLS"), *before, *middle, *after, special(tokenizer, "SEP")]
        ids = ids[: model.config.block_size]
        states = model.hidden_states(torch.tensor([ids], device=device))[0]  # (T, C)
        vectors.append(states[1 + len(before) : 1 + len(before) + len(middle)].mean(0))  # (C,)
    return torch.stack(vectors).float().cpu()


def word2vec_vector(sentences: list[str], word: str, seed: int) -> np.ndarray:
    """Word2Vec (Mikolov et al. 2013) trained on the same corpus: one vector per word,
    whatever its context."""
    from gensim.models import Word2Vec  # imported here: it takes seconds, and only part (b) needs it

    model = Word2Vec([words(s) for s in sentences], vector_size=100, window=5, min_count=1, workers=1,
                     seed=seed, epochs=5)
    neighbours = ", ".join(w for w, _ in model.wv.most_similar(word, topn=5))
    print(f"Word2Vec's nearest words to '{word}': {neighbours}")
    return model.wv[word]


def cosine_matrix(vectors: torch.Tensor) -> np.ndarray:
    unit = F.normalize(vectors, dim=-1)  # (n, C)
    return (unit @ unit.T).numpy()  # (n, n)


def plot(bert: np.ndarray, static: np.ndarray, word: str, png: Path) -> Path:
    fig = Figure(figsize=(10, 4.5))
    for ax, matrix, title in zip(fig.subplots(1, 2), (bert, static),
                                 ("BERT (contextual)", "Word2Vec (static)"), strict=True):
        image = ax.imshow(matrix, vmin=min(0.0, bert.min()), vmax=1.0, cmap="viridis")
        ax.set(title=f"{title}: '{word}'", xlabel="sentence", ylabel="sentence")
        fig.colorbar(image, ax=ax, label="cosine similarity")
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    return png


def main(argv: list[str] | None = None) -> dict:
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}")
    model, tokenizer, data_dir = load_model(cfg, device)

    print(f"\n(a) {cfg.TEXT}")
    predictions = fill_mask(model, tokenizer, cfg.TEXT, cfg.TOP_K, device)
    for i, top in enumerate(predictions, start=1):
        print(f"  [MASK] {i}: " + ", ".join(f"{token} {p:.1%}" for token, p in top))

    sentences = corpus_sentences(data_dir)
    word, contexts = contexts_of(cfg.WORD, sentences, cfg.CONTEXTS)
    bert = cosine_matrix(contextual_vectors(model, tokenizer, word, contexts, device))
    vector = torch.tensor(word2vec_vector(sentences, word, cfg.SEED))  # (100,): the same in every sentence
    static = cosine_matrix(vector.expand(len(contexts), -1))  # all ones: cos(v, v) = 1
    print(f"\n(b) '{word}' in {len(contexts)} sentences of the corpus:")
    for i, sentence in enumerate(contexts):
        print(f"  {i}: {sentence[:100]}{'...' if len(sentence) > 100 else ''}")
    off_diagonal = bert[~np.eye(len(bert), dtype=bool)]
    print(f"cosine similarity between occurrences: BERT {off_diagonal.mean():.2f} on average "
          f"(min {off_diagonal.min():.2f}, max {off_diagonal.max():.2f}); Word2Vec 1.00 for every pair")
    png = plot(bert, static, word, Path(cfg.OUT_DIR) / "embeddings.png")
    print(f"figure: {png}")
    return {"predictions": predictions, "word": word, "contexts": contexts, "bert_similarity": bert,
            "mean_similarity": float(off_diagonal.mean()), "figure": str(png)}


if __name__ == "__main__":
    main()
