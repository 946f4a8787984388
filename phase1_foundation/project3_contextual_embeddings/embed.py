"""What BERT learned, and how to tell it from what any model of its shape would do.

    uv run python phase1_foundation/project3_contextual_embeddings/embed.py
    uv run python phase1_foundation/project3_contextual_embeddings/embed.py --TEXT="Paris is France's [MASK]."
    uv run python phase1_foundation/project3_contextual_embeddings/embed.py --WORD=state
    uv run python phase1_foundation/project3_contextual_embeddings/embed.py --HF_DIR=path/to/bert-base-uncased

Each measurement stands on a scale: the trained model beside the untrained one it started from and Word2Vec
trained on the same sentences. (a) Fill in the blank, with minimal pairs, beside a left-neighbour bigram
model; (b) WORD in CONTEXTS sentences against a different-words floor; (c) a noun/verb sense test (1-NN), the
deciding word and then its right neighbour masked; (d) word similarities against WordSim-353 and SimLex-999.
Draws embeddings.png. README, "What the vectors show" (and its appendix), has the method and the results.
"""

import itertools
import math
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor

from common.data.tokenizers import Tokenizer
from common.errors import CourseError, run_main
from common.training.config import load_config
from common.training.device import describe, seed_everything
from common.training.run import checkpoint_data_dir
from phase1_foundation.project3_contextual_embeddings import config
from phase1_foundation.project3_contextual_embeddings.download_data import (
    encode_sentence,
    load_split,
    prepare,
)
from phase1_foundation.project3_contextual_embeddings.finetune_data import shipped
from phase1_foundation.project3_contextual_embeddings.hf_weights import from_hf
from phase1_foundation.project3_contextual_embeddings.model import BERT
from phase1_foundation.project3_contextual_embeddings.tokenizer import WordPieceTokenizer, load_tokenizer

# (a) Pairs of sentences that are the same up to and including the blank, so that only the words after it
# can change the model's answer, each with the answer it was written for (one token in wiki-sample's
# vocabulary: "bank" is two, so no money in the first pair). About subjects of the wiki-sample corpus.
MINIMAL_PAIRS = [
    (("He went to the [MASK] to catch fish.", "river"), ("He went to the [MASK] to buy food.", "market")),
    (("The [MASK] of the Moon is covered in dust.", "surface"),
     ("The [MASK] of Alabama passed a new law.", "legislature")),
    (("An [MASK] is a compound that reacts with a base.", "acid"),
     ("An [MASK] is a person trained to fly into space.", "astronaut")),
    (("She won the [MASK] for Best Actress.", "award"),
     ("She won the [MASK] with most of the votes.", "election")),
]
# (c) Noun after a determiner, verb after "to": words with at least a dozen of each in wiki-sample.
SENSE_WORDS = ("form", "use", "work", "study", "support", "increase")
NOUN_AFTER = ("the", "The", "a", "A", "an", "An")
VERB_AFTER = ("to",)
MIN_GROUP = 5  # occurrences each group needs before a word is tested
FIGURE_PER_GROUP = 12  # occurrences of each group drawn in the figure


def load_model(cfg: SimpleNamespace, device: torch.device) -> tuple[BERT, Tokenizer, Path, int, str]:
    """(model in eval mode, tokenizer, prepared-data folder, the seed the model was initialised with, how
    much it was trained) from our checkpoint, or from a transformers folder (whose seed we do not know: SEED
    stands in)."""
    if cfg.HF_DIR:
        model, tokenizer = from_hf(cfg.HF_DIR), load_tokenizer(Path(cfg.HF_DIR))
        print(f"loaded {cfg.HF_DIR}")  # the corpus only supplies sentences
        return model.to(device).eval(), tokenizer, prepare(cfg), cfg.SEED, Path(cfg.HF_DIR).name
    model, state = BERT.from_checkpoint(cfg.CHECKPOINT, cfg.OUT_DIR, device)
    data_dir = checkpoint_data_dir(state, load_tokenizer)
    return model, load_tokenizer(data_dir), data_dir, state["config"]["SEED"], f"step {state['step']:,}"


def untrained_twin(model: BERT, seed: int) -> BERT:
    """The model before training: the same config, built right after seeding as train.py builds it (nothing
    draws from torch's generator in between there), so the very weights the run started from."""
    seed_everything(seed)
    return BERT(model.config).to(next(model.parameters()).device).eval()


def special(tokenizer: Tokenizer, name: str) -> int:
    return tokenizer.token_to_id(f"[{name}]")  # at 0..4 in ours, elsewhere in Google's ([MASK] = 103)


def specials(tokenizer: Tokenizer) -> set[int]:
    return {special(tokenizer, name) for name in ("PAD", "UNK", "CLS", "SEP", "MASK")}


def encode_text(tokenizer: Tokenizer, text: str) -> list[int]:
    """[CLS] text [SEP] as ids, each "[MASK]" in the text becoming the [MASK] token (a tokenizer trained on
    plain text would spell the string "[MASK]" in pieces)."""
    ids = [special(tokenizer, "CLS")]
    for i, piece in enumerate(text.split("[MASK]")):
        ids += ([special(tokenizer, "MASK")] if i else []) + (encode_sentence(tokenizer, piece.strip())
                                                              if piece.strip() else [])
    return ids + [special(tokenizer, "SEP")]


def corpus_sentences(data_dir: Path, splits: tuple[str, ...] = ("train", "val")) -> list[str]:
    """Every sentence of the prepared corpus's `splits` as text, decoded from the token files."""
    tokenizer = load_tokenizer(data_dir)
    sentences = []
    for split in splits:
        tokens, offsets, _ = load_split(data_dir, split)
        sentences += [tokenizer.decode(tokens[a:b].tolist()).strip() for a, b in itertools.pairwise(offsets)]
    return sentences


# --- (a) fill in the blank --------------------------------------------------------------------------------

def word_starts(tokenizer: Tokenizer) -> Tensor:
    """(V,) bool: the tokens that begin a word with a letter. Ours mark a word's start with a space (" river",
    but "s", "ion"); Google's WordPiece marks the pieces that continue a word ("##s"). Punctuation, digits and
    special tokens are left out too."""
    start = re.compile(r"[^\W\d_]" if isinstance(tokenizer, WordPieceTokenizer) else r" [^\W\d_]")
    return torch.tensor([bool(start.match(tokenizer.decode([i]))) for i in range(tokenizer.vocab_size)])


def top_words(probs: Tensor, allowed: Tensor, tokenizer: Tokenizer, k: int) -> list[tuple[str, float]]:
    """The k most probable allowed tokens of probs (V,), with their probabilities (not renormalised)."""
    p, top = probs.masked_fill(~allowed, -1.0).topk(k)  # (k,)
    return [(tokenizer.decode([t]).strip(), q) for t, q in zip(top.tolist(), p.tolist(), strict=True)]


def rank(probs: Tensor, allowed: Tensor, token: int) -> int:
    """Where token stands among the allowed tokens, most probable first (1 = the top answer)."""
    return 1 + int(((probs > probs[token]) & allowed).sum())


@torch.no_grad()
def blank_probs(model: BERT, tokenizer: Tokenizer, text: str, device: torch.device) -> Tensor:
    """(number of masks, V): the model's probabilities for each [MASK] in text."""
    if "[MASK]" not in text:
        raise CourseError('error: --TEXT needs at least one [MASK], '
                          'like --TEXT="The [MASK] flowed into the sea."')
    input_ids = torch.tensor([encode_text(tokenizer, text)], device=device)  # (1, T)
    logits, _ = model(input_ids, chosen=input_ids == special(tokenizer, "MASK"))  # (masks, V)
    return F.softmax(logits.float(), dim=-1).cpu()


class Bigram:
    """How often each token follows each other token within a sentence of the training split: the answer
    of a model that reads only the token before the blank."""

    def __init__(self, ids: list[list[int]], vocab_size: int):
        left = np.concatenate([s[:-1] for s in ids if len(s) > 1])  # (pairs,)
        right = np.concatenate([s[1:] for s in ids if len(s) > 1])  # (pairs,)
        order = np.argsort(left, kind="stable")
        self.left, self.right = left[order], right[order]  # sorted by the left token, to slice by it
        self.vocab_size = vocab_size

    def after(self, token: int) -> Tensor:
        """(V,) the share of each token among those that follow `token` (all zeros if it never appears)."""
        a, b = np.searchsorted(self.left, [token, token + 1])
        counts = np.bincount(self.right[a:b], minlength=self.vocab_size)  # (V,)
        return torch.from_numpy(counts / max(counts.sum(), 1))


def show_blanks(model: BERT, bigram: Bigram, tokenizer: Tokenizer, text: str, top_k: int, allowed: Tensor,
                device: torch.device) -> list[tuple[Tensor, Tensor | None]]:
    """Print the bigram model's and BERT's top_k for each [MASK] in text; return their probabilities (V,)
    for each (the bigram's None where the blank has no token before it: [CLS] or another [MASK])."""
    ids = encode_text(tokenizer, text)
    blanks = [i for i, t in enumerate(ids) if t == special(tokenizer, "MASK")]
    print(f"  {text}")
    answers = []
    for i, probs in zip(blanks, blank_probs(model, tokenizer, text, device), strict=True):
        after = None if ids[i - 1] in specials(tokenizer) else bigram.after(ids[i - 1])  # (V,)
        left = tokenizer.decode([ids[i - 1]]).strip()
        for name, p in ((f"bigram (after '{left}')", after), ("BERT", probs)):
            if p is not None:
                top = top_words(p, allowed, tokenizer, top_k)
                print(f"    {name}: " + ", ".join(f"{t} {q:.1%}" for t, q in top)
                      + f"  (all word starts together: {float(p[allowed].sum()):.0%})")
        answers.append((probs, after))
    return answers


def show_pair(model: BERT, bigram: Bigram, tokenizer: Tokenizer, pair: tuple, top_k: int, allowed: Tensor,
              device: torch.device) -> list[list[tuple[str, float]]]:
    """Print a minimal pair's blanks and where each sentence's own answer ranks among the words, in it and in
    the other sentence; return BERT's top_k for each sentence."""
    (first, first_answer), (second, second_answer) = pair
    [(p, before)] = show_blanks(model, bigram, tokenizer, first, top_k, allowed, device)
    [(q, _)] = show_blanks(model, bigram, tokenizer, second, top_k, allowed, device)
    for answer, own, other in ((first_answer, p, q), (second_answer, q, p)):
        token, *rest = encode_sentence(tokenizer, answer)
        if not rest:  # an answer spelt in several tokens has no rank at one blank
            counted = f"ranks it {rank(before, allowed, token)}" if before[token] else "never saw it there"
            print(f"    '{answer}': BERT ranks it {rank(own, allowed, token)} in its sentence, "
                  f"{rank(other, allowed, token)} in the other; the bigram model {counted}")
    return [top_words(probs, allowed, tokenizer, top_k) for probs in (p, q)]


# --- words in sentences, as the model reads them ----------------------------------------------------------

@dataclass
class Sentence:
    """A sentence as the model reads it: [CLS] tokens [SEP], the text the tokens spell, and where each
    token ends in that text, so that a word found in the text can be found among the tokens."""

    ids: list[int]  # (T,) [CLS], the sentence's tokens, [SEP]
    text: str  # what the tokens decode to (ours: the sentence with a space in front)
    ends: list[int]  # (T,) token k is text[ends[k-1]:ends[k]]; [CLS] ends at 0, [SEP] adds nothing

    @classmethod
    def read(cls, tokenizer: Tokenizer, sentence: str, max_tokens: int) -> "Sentence":
        """The sentence encoded as in training; one longer than max_tokens with [CLS] and [SEP] is cut before
        the word that does not fit (the text with it)."""
        body = encode_sentence(tokenizer, sentence)
        # Decoding growing prefixes, not single tokens: a character spelt in several byte tokens is only
        # whole once its last byte is there.
        ends = [len(tokenizer.decode(body[: k + 1])) for k in range(min(len(body), max_tokens - 1))]
        if len(body) > max_tokens - 2:  # keep the tokens that end before the last space of what fits
            keep = bisect_right(ends, tokenizer.decode(body[: max_tokens - 1]).rfind(" "))
            body, ends = body[:keep], ends[:keep]
        return cls([special(tokenizer, "CLS"), *body, special(tokenizer, "SEP")], tokenizer.decode(body),
                   [0, *ends, ends[-1] if ends else 0])

    def tokens(self, start: int, end: int) -> slice | None:
        """The tokens that spell text[start:end] and nothing else (a space before it allowed), or None where
        a token runs across either edge ("form" inside a token "forms" or "m,")."""
        first = bisect_right(self.ends, start, 1, len(self.ends) - 1)  # the first token ending after start
        last = bisect_left(self.ends, end, 1, len(self.ends) - 1)  # the first token ending at or after end
        if self.ends[last] != end or self.text[self.ends[first - 1] : start].strip():
            return None
        return slice(first, last + 1)

    def hide(self, tokens: slice, mask_id: int) -> "Sentence":
        """The same sentence with `tokens` shown to the model as [MASK] (the text still names them)."""
        ids = list(self.ids)
        ids[tokens] = [mask_id] * len(ids[tokens])
        return Sentence(ids, self.text, self.ends)


class Occurrence(NamedTuple):
    sentence: Sentence
    tokens: slice  # the word's tokens in sentence.ids
    word: str


def words_in(sentence: Sentence) -> list[Occurrence]:
    """Every word (a run of letters) of the sentence that whole tokens spell."""
    found = [(m.group(), sentence.tokens(*m.span())) for m in re.finditer(r"[^\W\d_]+", sentence.text)]
    return [Occurrence(sentence, tokens, word) for word, tokens in found if tokens]


# --- the three kinds of vectors ---------------------------------------------------------------------------

@torch.no_grad()
def contextual_vectors(model: BERT, occurrences: list[Occurrence], device: torch.device,
                       batch_size: int = 32) -> Tensor:
    """(n, C): for each occurrence, the final hidden state averaged over its word's tokens. Each distinct
    sentence runs once, in padded batches (the padding mask keeps padding out of every real token's view)."""
    rows = list(dict.fromkeys(tuple(o.sentence.ids) for o in occurrences))  # distinct inputs, in order
    states = {}
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        ids = torch.zeros(len(batch), max(map(len, batch)), dtype=torch.long)  # (B, T), padded ...
        real = torch.zeros_like(ids)  # (B, T): 1 at real tokens, 0 at padding
        for b, row in enumerate(batch):
            ids[b, : len(row)], real[b, : len(row)] = torch.tensor(row), 1
        out = model.hidden_states(ids.to(device), attention_mask=real.to(device)).float().cpu()  # (B, T, C)
        states.update(zip(batch, out, strict=True))
    return torch.stack([states[tuple(o.sentence.ids)][o.tokens].mean(0) for o in occurrences])  # (n, C)


def train_word2vec(sentences: list[str], seed: int):
    """Word2Vec (Mikolov et al. 2013) trained on the corpus: one vector per word, whatever its context."""
    from gensim.models import Word2Vec  # imported here: it takes seconds

    # 20 passes, not gensim's default 5, which leaves unrelated words close on wiki-sample (README appendix)
    return Word2Vec([words(s) for s in sentences], vector_size=100, window=5, min_count=1, workers=1,
                    seed=seed, epochs=20).wv


def words(sentence: str) -> list[str]:
    return re.findall(r"[^\W\d_]+", sentence)  # cased, as our tokenizer is: "Bank" and "bank" differ


def static_vectors(word_vectors, occurrences: list[Occurrence]) -> Tensor:
    """(n, 100): Word2Vec's vector of each occurrence's word, the same in every sentence."""
    return torch.from_numpy(np.stack([word_vectors[o.word] for o in occurrences]))


def cosine_matrix(vectors: Tensor) -> Tensor:
    """(n, n) cosine similarities between the rows of vectors (n, C), in float64, so that equal vectors give
    equal similarities."""
    unit = F.normalize(vectors.double(), dim=-1)  # (n, C)
    return unit @ unit.T


# --- (b) one word, many sentences, against the floor ------------------------------------------------------

def contexts_of(word: str, sentences: list[str], tokenizer: Tokenizer, n: int, block_size: int
                ) -> tuple[str, list[Occurrence]]:
    """Up to n occurrences of word, one per sentence, spread over the corpus (every k-th sentence under 300
    characters that contains it, case included, so that each is the same token and only the context
    differs); if fewer than two are found, a frequent word of the corpus instead."""
    def occurrences(w):
        pattern = re.compile(rf"\b{re.escape(w)}\b")
        found = [s for s in sentences if len(s) < 300 and pattern.search(s)]
        chosen = []
        for s in found[:: max(1, len(found) // n)]:
            sentence = Sentence.read(tokenizer, s, block_size)
            spans = [sentence.tokens(*m.span()) for m in pattern.finditer(sentence.text)]
            chosen += [Occurrence(sentence, t, w) for t in spans if t][:1]
        return chosen[:n]

    chosen = occurrences(word)
    if len(chosen) < 2:
        counts = Counter(w for s in sentences for w in set(words(s)) if len(w) >= 5)
        fallback = counts.most_common(1)[0][0]
        print(f"'{word}' is in {len(chosen)} sentence(s) of this corpus; "
              f"showing '{fallback}' instead (--WORD=...)")
        word, chosen = fallback, occurrences(fallback)
    return word, chosen


def same_word_and_floor(vectors_of: Callable[[list[Occurrence]], Tensor], occurrences: list[Occurrence]
                        ) -> tuple[Tensor, float, float]:
    """For one word's n occurrences: their similarity matrix (n, n), its mean off the diagonal, and the floor,
    the mean similarity between the word and every other word of its sentence (each word of the sentence
    that is not this word, as often as it occurs)."""
    others = [[o for o in words_in(x.sentence) if o.word != x.word] for x in occurrences]
    sentence_of = torch.tensor([i for i, found in enumerate(others) for _ in found])  # (m,)
    vectors = vectors_of(occurrences + [o for found in others for o in found])  # (n + m, C)
    n = len(occurrences)
    same = cosine_matrix(vectors[:n])  # (n, n)
    floor = F.cosine_similarity(vectors[:n][sentence_of].double(), vectors[n:].double(), dim=-1)  # (m,)
    return same, float(same[~torch.eye(n, dtype=torch.bool)].mean()), float(floor.mean())


# --- (c) do the differences follow meaning? ---------------------------------------------------------------

class SenseGroups(NamedTuple):
    word: str
    occurrences: list[Occurrence]  # one per sentence
    before: list[slice]  # the tokens of the word before it, which decided the group
    after: list[slice]  # the token after it (empty at the end of the sentence)
    verb: Tensor  # (n,) bool: after "to" (True) or after a determiner (False)

    def hidden(self, mask_id: int, after: bool = False) -> list[Occurrence]:
        """The occurrences with the word before them, and the token after them if `after`, shown as [MASK]."""
        hide = [(b, a if after else slice(0, 0)) for b, a in zip(self.before, self.after, strict=True)]
        return [Occurrence(o.sentence.hide(b, mask_id).hide(a, mask_id), o.tokens, o.word)
                for o, (b, a) in zip(self.occurrences, hide, strict=True)]


def sense_groups(word: str, sentences: list[str], tokenizer: Tokenizer, block_size: int) -> SenseGroups:
    """The word's occurrences after a determiner (a noun) or after "to" (a verb), at most one a sentence
    (sentences cut to block_size tokens)."""
    pattern = re.compile(rf"\b({'|'.join(NOUN_AFTER + VERB_AFTER)}) ({word})\b")
    occurrences, before, after, verb = [], [], [], []
    for s in sentences:
        if not pattern.search(s):
            continue
        sentence = Sentence.read(tokenizer, s, block_size)
        for m in pattern.finditer(sentence.text):
            left, tokens = sentence.tokens(*m.span(1)), sentence.tokens(*m.span(2))
            if left and tokens:
                occurrences.append(Occurrence(sentence, tokens, word))
                before.append(left)
                after.append(slice(tokens.stop, min(tokens.stop + 1, len(sentence.ids) - 1)))  # not [SEP]
                verb.append(m.group(1) in VERB_AFTER)
                break
    return SenseGroups(word, occurrences, before, after, torch.tensor(verb, dtype=torch.bool))


def separation(vectors: Tensor, group: Tensor) -> dict[str, float]:
    """How well vectors (n, C) keep two groups (n,) bool apart.

    within, across: mean cosine similarity between two occurrences of the same group, of different groups.
    nn_accuracy: leave-one-out 1-nearest-neighbour, the share of occurrences whose most similar other
    occurrence is in its own group. Where the most similar are several, equally similar, and in both groups
    (for a static embedding: all the others), it answers the larger group; so it scores chance, the larger
    group's share, when the vectors say nothing.
    """
    n = len(group)
    similarity = cosine_matrix(vectors)  # (n, n)
    same = group[:, None] == group[None, :]  # (n, n)
    off_diagonal = ~torch.eye(n, dtype=torch.bool)
    larger = bool(group.sum() * 2 > n)  # the larger group (ties: False)
    others = similarity.masked_fill(~off_diagonal, float("-inf"))  # (n, n): an occurrence is not its own
    nearest = others >= others.max(dim=1, keepdim=True).values - 1e-12  # (n, n): the most similar, all
    votes = (nearest & group[None, :]).sum(dim=1)  # (n,): how many of them are in group True
    split = (votes > 0) & (votes < nearest.sum(dim=1))  # (n,): nearest in both groups
    predicted = torch.where(split, larger, votes > 0)  # (n,)
    share = float(group.double().mean())  # of group True
    return {"within": float(similarity[same & off_diagonal].mean()),
            "across": float(similarity[~same].mean()),
            "nn_accuracy": float((predicted == group).double().mean()), "chance": max(share, 1 - share),
            # a neighbour drawn at random is in one's own group this often: below chance unless equal groups
            "random_neighbour": float((same & off_diagonal).sum() / off_diagonal.sum())}


# --- the figure -------------------------------------------------------------------------------------------

def plot(panels: list[list[tuple[str, Tensor, int]]], floors: dict[str, float], png: Path) -> Path:
    """Rows of panels (title, similarity matrix, where the second group starts or 0), drawn as 1 - cosine on
    one colour scale that reaches every model's floor (1 - the floor's similarity), marked on the colour
    bar: the distance between different words of the same sentences."""
    top = max([1 - floor for floor in floors.values()]
              + [float((1 - matrix).max()) for row in panels for _, matrix, _ in row])
    fig = Figure(figsize=(4.2 * len(panels[0]) + 1.5, 4.2 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), len(panels[0]), squeeze=False)
    for ax, (title, matrix, split) in zip(axes.flat, [p for row in panels for p in row], strict=True):
        image = ax.imshow(1 - matrix.numpy(), vmin=0.0, vmax=top, cmap="viridis")
        if split:  # between the groups
            ax.axhline(split - 0.5, color="white", linewidth=1)
            ax.axvline(split - 0.5, color="white", linewidth=1)
        ax.set_title(title, fontsize=9)
        ax.set(xlabel="occurrence", ylabel="occurrence")
    bar = fig.colorbar(image, ax=axes, shrink=0.9, aspect=40,
                       label="1 - cosine similarity (0: the same vector)")
    for name, floor in floors.items():
        bar.ax.axhline(1 - floor, color="red", linewidth=1.5)
        bar.ax.text(-0.2, 1 - floor, f"{name}:\ndifferent words", fontsize=7, color="red", ha="right",
                    va="center", transform=bar.ax.get_yaxis_transform())
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=120)
    return png


def sample(groups: SenseGroups, per_group: int) -> list[int]:
    """Indices of up to per_group occurrences of each group, spread over the corpus: the nouns, then the
    verbs."""
    chosen = []
    for verb in (False, True):
        members = (groups.verb == verb).nonzero().flatten().tolist()
        chosen += members[:: max(1, len(members) // per_group)][:per_group]
    return chosen


# --- (d) words beside human judgements --------------------------------------------------------------------
# Pairs of words with the mean similarity people gave them: WordSim-353 (Finkelstein et al. 2002; relatedness,
# so "cup" and "coffee" score high) and SimLex-999 (Hill et al. 2015; similarity only, so they score low),
# both shipped in the gensim wheel. Scored on the pairs whose two words the corpus holds, the same pairs for
# every model.
HUMAN_JUDGEMENTS = {"WordSim-353": "wordsim353.tsv", "SimLex-999": "simlex999.txt"}
PER_WORD = 10  # sentences a word's contextual vectors are averaged over (its first ones in the corpus)
MAX_SENTENCE_CHARS = 300  # longer sentences are passed over, as in (b)


def judged_pairs(file: str) -> list[tuple[str, str, float]]:
    """(word, word, the people's mean score) for each pair of a judgement file: word<TAB>word<TAB>score."""
    lines = shipped(file).read_text(encoding="utf-8").splitlines()
    return [(a, b, float(score)) for a, b, score, *_ in (line.split("\t") for line in lines
                                                          if line.strip() and not line.startswith("#"))]


def first_occurrences(wanted: set[str], sentences: list[str], tokenizer: Tokenizer, block_size: int
                      ) -> dict[str, list[Occurrence]]:
    """Up to PER_WORD occurrences of each wanted word, case as written, in the first sentences (under 300
    characters) that hold it; a word the corpus lacks, or never spells in whole tokens, is left out."""
    where = {word: [] for word in wanted}
    for i, sentence in enumerate(sentences):
        if len(sentence) >= MAX_SENTENCE_CHARS:
            continue
        for word in set(words(sentence)) & wanted:
            if len(where[word]) < PER_WORD:
                where[word].append(i)
    found = {}
    for word, rows in where.items():
        for i in rows:
            sentence = Sentence.read(tokenizer, sentences[i], block_size)
            match = re.search(rf"(?<![^\W\d_]){re.escape(word)}(?![^\W\d_])", sentence.text)
            tokens = match and sentence.tokens(*match.span())
            if tokens:
                found.setdefault(word, []).append(Occurrence(sentence, tokens, word))
    return found


def input_table_vector(model: BERT, tokenizer: Tokenizer, word: str) -> Tensor:
    """(C,): the mean of the input table's rows for the word's tokens, as the model reads it in a sentence."""
    ids = torch.tensor(encode_sentence(tokenizer, word), device=model.embeddings.token.weight.device)
    return model.embeddings.token.weight[ids].mean(0).detach().float().cpu()


def spearman(vectors: dict[str, Tensor], pairs: list[tuple[str, str, float]]) -> float:
    """Spearman's rank correlation between the cosine similarities of the pairs' vectors and the people's
    scores."""
    from scipy.stats import spearmanr  # imported here: only this part needs it

    cosines = [F.cosine_similarity(vectors[a].double(), vectors[b].double(), dim=0).item()
               for a, b, _ in pairs]
    return float(spearmanr(cosines, [score for _, _, score in pairs]).statistic)


def human_similarity(models: dict[str, BERT], word_vectors, sentences: list[str], tokenizer: Tokenizer,
                     device: torch.device) -> dict[str, dict]:
    """(d), printed: Spearman's rho of each kind of vector against each set of judgements, with how many
    pairs the corpus covers and an approximate 95% interval (Fisher's z, standard error 1.03 / sqrt(n - 3),
    Fieller et al. 1957)."""
    sets = {name: judged_pairs(file) for name, file in HUMAN_JUDGEMENTS.items()}
    wanted = {w for pairs in sets.values() for a, b, _ in pairs for w in (a, b)}
    found = first_occurrences(wanted, sentences, tokenizer, models["trained"].config.block_size)
    covered = {name: [p for p in pairs if p[0] in found and p[1] in found] for name, pairs in sets.items()}
    flat = [o for word in found for o in found[word]]
    spans = np.cumsum([0] + [len(found[word]) for word in found])

    def averaged(model: BERT) -> dict[str, Tensor]:
        vectors = contextual_vectors(model, flat, device)  # (n, C)
        return {word: vectors[spans[i] : spans[i + 1]].mean(0) for i, word in enumerate(found)}

    kinds = {"BERT's input table (trained)": {w: input_table_vector(models["trained"], tokenizer, w)
                                              for w in found},
             "BERT in context, averaged (trained)": averaged(models["trained"]),
             "BERT in context, averaged (untrained)": averaged(models["untrained"]),
             "Word2Vec (static)": {w: torch.from_numpy(word_vectors[w].copy()) for w in found}}
    print(f"\n(d) Words beside human judgements: Spearman's rho between a model's cosine similarity of two "
          f"words and the mean score people gave the pair;\na word's contextual vector is averaged over its "
          f"first {PER_WORD} sentences. Only pairs whose two words the corpus spells in whole tokens are "
          "scored: "
          + "; ".join(f"{name} {len(covered[name])} of {len(sets[name])}" for name in sets)
          + ".\n95% intervals: Fisher's z, standard error 1.03 / sqrt(n - 3).")
    print(f"{'':<40}" + "".join(f"{name:>26}" for name in sets))
    result = {"covered": {name: len(covered[name]) for name in sets},
              "pairs": {name: len(pairs) for name, pairs in sets.items()}}
    for kind, vectors in kinds.items():
        cells = {}
        for name, pairs in covered.items():
            rho = spearman(vectors, pairs) if len(pairs) > 3 else float("nan")
            half = 1.96 * 1.03 / math.sqrt(max(len(pairs) - 3, 1))
            z = math.atanh(max(-0.999999, min(0.999999, rho)))  # rho = +-1 has no finite z
            cells[name] = {"rho": rho, "interval": (math.tanh(z - half), math.tanh(z + half))}
        result[kind] = cells
        print(f"  {kind:<38}" + "".join(f"{c['rho']:>8.2f} [{c['interval'][0]:+.2f}, {c['interval'][1]:+.2f}]"
                                        .rjust(26) for c in cells.values()))
    return result


def main(argv: list[str] | None = None) -> dict:
    cfg = load_config(config, argv)
    device = torch.device(cfg.DEVICE)
    seed_everything(cfg.SEED)
    print(f"device: {describe(device)}")
    model, tokenizer, data_dir, seed, step = load_model(cfg, device)
    untrained = untrained_twin(model, seed)
    block_size = model.config.block_size
    train = corpus_sentences(data_dir, ("train",))
    sentences = train + corpus_sentences(data_dir, ("val",))
    encoded = [encode_sentence(tokenizer, s) for s in sentences]  # as the model reads them

    print(f"\n(a) Fill in the blank: BERT's top {cfg.TOP_K} beside a bigram model's, which reads only the "
          "token before the blank (counted on the training split).\nOnly tokens that begin a word are "
          "listed: pieces that continue a word ('s', 'ion') and punctuation are skipped; the probabilities "
          "are the models' own, not renormalised,\nand the share of all word starts together says how much "
          "of the probability the skipped tokens had.")
    allowed = word_starts(tokenizer)
    bigram = Bigram(encoded[: len(train)], tokenizer.vocab_size)
    blanks = show_blanks(model, bigram, tokenizer, cfg.TEXT, cfg.TOP_K, allowed, device)
    predictions = [top_words(probs, allowed, tokenizer, cfg.TOP_K) for probs, _ in blanks]
    print("Minimal pairs, the same up to the blank: the bigram model answers both alike; where BERT does "
          "not, it read the words after the blank.")
    pairs = [show_pair(model, bigram, tokenizer, pair, cfg.TOP_K, allowed, device) for pair in MINIMAL_PAIRS]

    word_vectors = train_word2vec([tokenizer.decode(ids) for ids in encoded], cfg.SEED)
    models = {  # name -> the vectors (n, C) of a list of occurrences
        "untrained": lambda found: contextual_vectors(untrained, found, device),
        "trained": lambda found: contextual_vectors(model, found, device),
        "Word2Vec": lambda found: static_vectors(word_vectors, found),
    }
    described = {"untrained": f"BERT untrained (seed {seed})", "trained": f"BERT trained ({step})",
                 "Word2Vec": "Word2Vec (static)"}
    word, occurrences = contexts_of(cfg.WORD, sentences, tokenizer, cfg.CONTEXTS, block_size)
    print(f"\n(b) '{word}' in {len(occurrences)} sentences of the corpus:")
    for i, o in enumerate(occurrences):
        text = o.sentence.text.strip()
        print(f"  {i}: {text[:100]}{'...' if len(text) > 100 else ''}")
    rows = {name: same_word_and_floor(vectors_of, occurrences) for name, vectors_of in models.items()}
    print(f"mean cosine similarity           '{word}' in different sentences   floor: different words, "
          "same sentences")
    for name, (_, same, floor) in rows.items():
        print(f"  {described[name]:<30} {same:>26.4f}   {floor:>36.4f}")
    print(f"Word2Vec's nearest words to '{word}': "
          + ", ".join(w for w, _ in word_vectors.most_similar(word, topn=5)))

    senses, pictured, summary = sense_test(models, described, sentences, tokenizer, block_size)
    similarity = human_similarity({"trained": model, "untrained": untrained}, word_vectors, sentences,
                                  tokenizer, device)

    panels = [[(f"{described[name]}\n'{word}' in {len(occurrences)} sentences: mean {same:.4f}\n"
                f"floor (different words): {floor:.4f}", matrix, 0)
               for name, (matrix, same, floor) in rows.items()]]
    if pictured:
        chosen = sample(pictured, FIGURE_PER_GROUP)
        nouns = int((~pictured.verb[chosen]).sum())
        found = [pictured.occurrences[i] for i in chosen]
        scores = senses[pictured.word]
        panels.append([(f"{described[name]}\n'{pictured.word}': {nouns} after a determiner | "
                        f"{len(chosen) - nouns} after 'to'\n1-NN {scores[name]['nn_accuracy']:.0%} "
                        f"(chance {scores[name]['chance']:.0%}) on all {scores['nouns'] + scores['verbs']}",
                        cosine_matrix(vectors_of(found)), nouns) for name, vectors_of in models.items()])
    floors = {name: floor for name, (_, _, floor) in rows.items()}
    png = plot(panels, floors, Path(cfg.OUT_DIR) / "embeddings.png")
    print(f"\nfigure: {png}")
    return {"predictions": predictions, "pairs": pairs, "word": word,
            "contexts": [o.sentence.text.strip() for o in occurrences],
            "rows": {name: {"similarity": matrix, "same_word": same, "floor": floor}
                     for name, (matrix, same, floor) in rows.items()},
            "senses": senses, "summary": summary, "similarity": similarity, "figure": str(png)}


def sense_test(models: dict[str, Callable[[list[Occurrence]], Tensor]], described: dict[str, str],
               sentences: list[str], tokenizer: Tokenizer, block_size: int
               ) -> tuple[dict[str, dict], SenseGroups | None, str]:
    """(c), printed: for each of SENSE_WORDS, how well each model's vectors keep its two groups apart. Returns
    the scores by word, the first word's groups (for the figure) and the conclusion."""
    print(f"\n(c) Do the differences follow meaning? No hand labels: each word's occurrences are split by "
          f"the word before it,\na noun after {'/'.join(NOUN_AFTER[::2])}, a verb after "
          f"{'/'.join(VERB_AFTER)}. within / across: mean cosine similarity of two occurrences in the same "
          "group / in different groups.\n1-NN: how often an occurrence's most similar other occurrence is in "
          "its own group (leave one out). chance: always answering the larger group,\nwhich is what 1-NN "
          "scores when all vectors are the same, as a static embedding's are (equally similar neighbours in "
          "both groups: the larger group).\nThe trained model is also run with the word that decided the "
          "group shown as [MASK], and then with the token after the word as [MASK] too.")
    runs = {**described, "before": "  word before as [MASK]", "both": "  and the token after too"}
    mask_id = special(tokenizer, "MASK")
    senses, pictured = {}, None
    for word in SENSE_WORDS:
        groups = sense_groups(word, sentences, tokenizer, block_size)
        verbs = int(groups.verb.sum())
        nouns = len(groups.verb) - verbs
        print(f"\n'{word}': {nouns} after {'/'.join(NOUN_AFTER[::2])}, {verbs} after {'/'.join(VERB_AFTER)}",
              end="")
        if min(nouns, verbs) < MIN_GROUP:
            print(f": too few to test (fewer than {MIN_GROUP} in a group)")
            continue
        scores = {name: separation(vectors_of(groups.occurrences), groups.verb)
                  for name, vectors_of in models.items()}
        scores["before"] = separation(models["trained"](groups.hidden(mask_id)), groups.verb)
        scores["both"] = separation(models["trained"](groups.hidden(mask_id, after=True)), groups.verb)
        print(f"; chance {scores['trained']['chance']:.1%} (a neighbour drawn at random: "
              f"{scores['trained']['random_neighbour']:.1%})\n{'':<34}{'within':>8}{'across':>8}{'1-NN':>8}")
        for name in ("untrained", "trained", "before", "both", "Word2Vec"):
            score = scores[name]
            print(f"  {runs[name]:<32}{score['within']:>8.4f}{score['across']:>8.4f}"
                  f"{score['nn_accuracy']:>8.1%}")
        senses[word] = {"nouns": nouns, "verbs": verbs, **scores}
        pictured = pictured or groups
    if not senses:
        return senses, None, ""
    mean = {name: float(np.mean([s[name]["nn_accuracy"] for s in senses.values()]))
            for name in ("untrained", "trained", "before", "both", "Word2Vec")}
    chance = float(np.mean([s["trained"]["chance"] for s in senses.values()]))
    summary = context_says(mean, chance, len(senses))
    print("\n" + summary)
    return senses, pictured, summary


def context_says(mean: dict[str, float], chance: float, words: int) -> str:
    """What the sense test showed, in words, from the mean 1-NN accuracies of each run over the words."""
    said = (f"Mean 1-NN over {words} words: untrained {mean['untrained']:.1%}, trained "
            f"{mean['trained']:.1%}, trained with the word before as [MASK] {mean['before']:.1%}, and the "
            f"token after too {mean['both']:.1%}; Word2Vec {mean['Word2Vec']:.1%}; chance {chance:.1%}.\n")
    gained = mean["trained"] - chance
    if gained < 0.05:
        return said + "The trained vectors do not tell the two groups apart better than chance."
    if mean["both"] - chance < gained / 2:
        return said + ("At this size 'context' is mostly the neighbouring words: the trained vectors tell "
                       "the groups apart while the words next to them are visible, and lose most of that "
                       "once they are shown as [MASK].")
    return said + ("The trained vectors keep most of the difference with both neighbours shown as [MASK]: "
                   "they read more of the sentence than the words next to them.")


if __name__ == "__main__":
    run_main(main)
