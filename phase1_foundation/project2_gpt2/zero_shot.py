"""GPT-2's claim, measured: a language model does tasks it was never trained for, zero-shot.

    uv run python phase1_foundation/project2_gpt2/zero_shot.py                        # the newest checkpoint
    uv run python phase1_foundation/project2_gpt2/zero_shot.py --CHECKPOINT=path/to/gpt2_iter800_loss4.1234.pt
    uv run python phase1_foundation/project2_gpt2/zero_shot.py --HF_DIR=path/to/gpt2  # OpenAI's GPT-2

Two of GPT-2's measurements (§3, Table 3), rebuilt on the held-out documents of the prepared corpus: the
last word of a passage (LAMBADA-style, Paperno et al. 2016), written greedily, beside guesses that need no
model; and the perplexity of held-out text, in nats per token and in bits per byte, which any two tokenizers
can be compared in. Both use the model's own tokenizer, so a folder of the real GPT-2 is scored on the same
text. README, "Zero-shot: does our model do tasks it was not trained for?", has the results;
the appendix has the paper's.
"""

import json
import math
import random
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import regex
import torch
import torch.nn.functional as F

from common.data.corpora import open_corpus
from common.data.sentences import document_sentences, split_paragraphs, split_sentences
from common.data.tokens import load_tokens, read_meta
from common.errors import CourseError, run_main
from common.files import portable
from common.training import checkpoint as ckpt
from common.training.baselines import bigram_cross_entropy, unigram_cross_entropy
from common.training.config import load_config
from common.training.device import describe, seed_everything
from common.training.run import checkpoint_data_dir
from phase1_foundation.project2_gpt2 import config
from phase1_foundation.project2_gpt2.download_data import prepare
from phase1_foundation.project2_gpt2.generate import generate
from phase1_foundation.project2_gpt2.hf_weights import from_hf
from phase1_foundation.project2_gpt2.model import GPT, PREFIX
from phase1_foundation.project2_gpt2.tokenizer import ByteBPETokenizer, load_tokenizer

MIN_TARGET_LETTERS = 3  # shorter last words ("it", "up") are too easy to reach by chance
MAX_WORD_TOKENS = 16  # greedy decoding gives up here: even a small vocabulary spells a word in fewer
TRAINING_CHARACTERS = 5_000_000  # the constant guess is counted on at most this much training text
PPL_BATCH_TOKENS = 4096  # tokens per perplexity batch: (4096 / block_size) windows at a time

# Function words, left out by the copying baseline: they fill every context and seldom end a sentence.
STOPWORDS = frozenset("""
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours yourself
""".split())

WORD = regex.compile(r"\p{L}+")  # a word, for counting: a run of letters
# The last word of a sentence: a space, letters, then only punctuation to the end, a terminator among it.
FINAL_WORD = regex.compile(r" (\p{L}+)([^\s\p{L}\p{N}]*)\Z")
FIRST_WORD = regex.compile(r" (\p{L}*)")  # the word a continuation starts with: a space, then letters


# --- the last-word task: passages ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Passage:
    """Running text whose last word is to be predicted: the model reads `context`, should write " target"."""

    document: int  # the document's index in the corpus (one of meta.json's val_documents)
    context: str  # whole sentences, the last one cut before its final word
    target: str  # that word, without the punctuation after it

    @property
    def text(self) -> str:
        return f"{self.context} {self.target}"


def final_word(sentence: str) -> regex.Match | None:
    """The match of a sentence's last word, if it can be a target: letters only (no digits, hyphens or dotted
    abbreviations), at least MIN_TARGET_LETTERS of them, followed by punctuation that ends the sentence.
    group(1) is the word; the match starts at the space before it."""
    match = FINAL_WORD.search(sentence)
    if match and len(match.group(1)) >= MIN_TARGET_LETTERS and regex.search(r"[.!?]", match.group(2)):
        return match
    return None


def sentences_with_separators(document: str) -> list[tuple[str, str]]:
    """(separator, sentence) pairs in document order: the separator is what joins the sentence to the one
    before it in running text, a blank line at a new paragraph and a space inside one."""
    pairs = []
    for paragraph in split_paragraphs(document):
        for k, sentence in enumerate(split_sentences(paragraph.replace("\n", " "))):
            pairs.append((" " if k else "\n\n", sentence))
    return pairs


def document_passages(index: int, document: str, context_words: int) -> Iterator[Passage]:
    """Every passage of one document: one per sentence with a usable last word, preceded by the fewest whole
    sentences that give its context at least `context_words` words. Sentences near the start of the document,
    with too little before them, make none."""
    pairs = sentences_with_separators(document)
    counts = [len(sentence.split()) for _, sentence in pairs]
    for end, (_, sentence) in enumerate(pairs):
        match = final_word(sentence)
        if match is None:
            continue
        start, words = end, counts[end] - 1  # the last sentence, without its final word
        while words < context_words and start > 0:
            start -= 1
            words += counts[start]
        if words < context_words:
            continue
        whole = "".join(separator + s for separator, s in pairs[start:end])  # the sentences before the last
        context = (whole + pairs[end][0] + sentence[: match.start()]).lstrip()  # nothing before the first
        yield Passage(index, context, match.group(1))


def build_passages(documents: Iterable[tuple[int, str]], context_words: int, count: int, seed: int
                   ) -> list[Passage]:
    """Up to `count` passages drawn from (index, text) documents, the same ones for the same seed, in corpus
    order. Passages ending at neighbouring sentences share most of their text; the draw spreads them out."""
    candidates = [p for index, text in documents for p in document_passages(index, text, context_words)]
    chosen = random.Random(seed).sample(range(len(candidates)), min(count, len(candidates)))
    return [candidates[i] for i in sorted(chosen)]


# --- the last-word task: what needs no model ----------------------------------------------------------------

def most_frequent_final_word(documents: Iterable[str]) -> str:
    """The best constant answer: the commonest last word of the documents' sentences, among usable targets."""
    counts = Counter(match.group(1) for document in documents for sentence in document_sentences(document)
                     if (match := final_word(sentence)))
    return counts.most_common(1)[0][0] if counts else ""


def copy_guess(context: str) -> str:
    """Copying: the context's most frequent word that is not a stop-word and long enough to be a target; a tie
    goes to the one seen last, since what was just mentioned is likelier to come up again."""
    candidates = [word for word in WORD.findall(context)
                  if len(word) >= MIN_TARGET_LETTERS and word.lower() not in STOPWORDS]
    if not candidates:
        return ""
    counts = Counter(candidates)
    last_seen = {word: position for position, word in enumerate(candidates)}
    return max(counts, key=lambda word: (counts[word], last_seen[word]))


# --- the last-word task: the model --------------------------------------------------------------------------

def first_word(continuation: str) -> tuple[str, bool]:
    """The word a continuation begins with, and whether it is over.

    The word is what follows the continuation's leading space up to the first character that is not a letter;
    that character, or a start without the space (the model went on with the previous word, or wrote
    punctuation), ends it. " Paris," -> ("Paris", True); " Par" -> ("Par", False); "," -> ("", True).
    """
    match = FIRST_WORD.match(continuation)
    if match is None:
        return "", bool(continuation)
    return match.group(1), match.end() < len(continuation)


def text_of(tokenizer: ByteBPETokenizer, ids: torch.Tensor) -> str:
    """The tokens' text, leaving out an unfinished UTF-8 character at the end: a letter whose bytes are split
    over two tokens does not end the word after its first byte."""
    return tokenizer.decode_bytes(ids.tolist()).decode("utf-8", errors="ignore")


def greedy_word(model: GPT, tokenizer: ByteBPETokenizer, context_ids: list[int]) -> str:
    """The word the model writes after the context, decoding greedily with the KV cache until it is over.

    A context longer than block_size is read from its last block_size tokens (generate keeps those).
    """
    prompt = torch.tensor([context_ids], device=next(model.parameters()).device)  # (1, T)

    def word_is_over(new_ids: torch.Tensor) -> bool:  # (1, n): the tokens written so far
        return first_word(text_of(tokenizer, new_ids[0]))[1]

    out = generate(model, prompt, MAX_WORD_TOKENS, temperature=0, eos_id=tokenizer.eot_id, stop=word_is_over,
                   use_cache=True)  # (1, T + n)
    return first_word(text_of(tokenizer, out[0, len(context_ids):]))[0]


@torch.no_grad()
def word_log_prob(model: GPT, context_ids: list[int], word_ids: list[int]) -> float:
    """log p(word | context) in nats: the sum of the log-probabilities of the word's tokens, each given the
    context and the word's tokens before it (the model reads at most the last block_size of them)."""
    ids = torch.tensor(context_ids + word_ids, device=next(model.parameters()).device)
    inputs, targets = ids[:-1][-model.config.block_size :], ids[1:][-model.config.block_size :]  # (T,), (T,)
    logits, _ = model(inputs[None])  # (1, T, V)
    log_probs = F.log_softmax(logits[0, -len(word_ids) :].float(), dim=-1)  # (W, V): the word's positions
    return log_probs.gather(1, targets[-len(word_ids) :, None]).sum().item()


def last_word_task(model: GPT, tokenizer: ByteBPETokenizer, passages: list[Passage], constant: str) -> dict:
    """Accuracy of the model, of the constant guess and of copying on the passages; the share of targets found
    in their context; the target word's perplexity; and three examples."""
    model_right = copy_right = constant_right = in_context = 0
    nats, context_tokens, examples = 0.0, 0, []
    for passage in passages:
        context_ids = tokenizer.encode(passage.context)
        # " target" is a pre-token of its own (tokenizer.PRETOKENIZE): the passage encodes as these two parts
        word_ids = tokenizer.encode(" " + passage.target)
        predicted, copied = greedy_word(model, tokenizer, context_ids), copy_guess(passage.context)
        model_right += predicted == passage.target
        copy_right += copied == passage.target
        constant_right += constant == passage.target
        in_context += passage.target in WORD.findall(passage.context)
        nats -= word_log_prob(model, context_ids, word_ids)
        context_tokens += len(context_ids)
        if len(examples) < 3:
            examples.append(dict(context_end=passage.context[-70:], target=passage.target, model=predicted,
                                 copy=copied))
    n = len(passages)
    return {
        "passages": n, "accuracy": model_right / n, "word_perplexity": math.exp(nats / n),
        "constant_word": constant, "constant_accuracy": constant_right / n, "copy_accuracy": copy_right / n,
        "target_in_context": in_context / n,
        "mean_context_words": sum(len(p.context.split()) for p in passages) / n,
        "mean_context_tokens": context_tokens / n, "examples": examples,
    }


# --- perplexity of held-out text ----------------------------------------------------------------------------

def sliding_windows(n: int, block_size: int, stride: int) -> Iterator[tuple[int, int, int]]:
    """Windows that score each of n targets once: (begin, end, new), the model reads tokens[begin:end] and its
    last `new` predictions, of tokens[end - new + 1 : end + 1], are the ones scored.

    The tokens are n + 1 long, the first only context. Each window starts `stride` tokens after the one before
    and scores what that one did not, so every target after the first window has at least block_size - stride
    tokens of context. Windows that do not overlap (stride = block_size) would give the first token of each
    almost none, and perplexity would measure the cuts as much as the model; stride 1 would give every token a
    full window at block_size times the cost. Half a block is the usual middle way.
    """
    done, begin = 0, 0  # targets scored so far: tokens[1 : done + 1]
    while done < n:
        end = min(begin + block_size, n)
        yield begin, end, end - done
        done, begin = end, begin + stride


@torch.no_grad()
def stream_nats(model: GPT, ids: np.ndarray, stride: int) -> float:
    """The total negative log-likelihood, in nats, of ids[1:] given what precedes each (sliding_windows).

    Windows of equal length go through the model together, PPL_BATCH_TOKENS tokens at a time; only the last
    window of the stream can be shorter.
    """
    device, block_size = next(model.parameters()).device, model.config.block_size
    tokens = torch.from_numpy(ids.astype(np.int64)).to(device)
    windows = list(sliding_windows(len(ids) - 1, block_size, stride))
    rows = max(1, PPL_BATCH_TOKENS // block_size)
    total = 0.0
    while windows:
        length = windows[0][1] - windows[0][0]
        batch = [w for w in windows[:rows] if w[1] - w[0] == length]
        windows = windows[len(batch) :]
        inputs = torch.stack([tokens[b:e] for b, e, _ in batch])  # (B, T)
        targets = torch.stack([tokens[b + 1 : e + 1] for b, e, _ in batch])  # (B, T)
        logits, _ = model(inputs)  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), reduction="none")  # (B*T,)
        nll = nll.view(len(batch), length)  # (B, T)
        total += sum(nll[row, length - new :].sum().item() for row, (_, _, new) in enumerate(batch))
    return total


def heldout_stream(tokenizer: ByteBPETokenizer, documents: Iterable[str], max_tokens: int) -> np.ndarray:
    """The documents as one token stream, <|endoftext|> first and after each document (as in train.bin), cut
    to max_tokens scored tokens (0 = all): max_tokens + 1 ids, the first only context."""
    ids = [tokenizer.eot_id]
    for document in documents:
        ids += tokenizer.encode(document) + [tokenizer.eot_id]
        if max_tokens and len(ids) > max_tokens:
            break
    return np.array(ids[: max_tokens + 1] if max_tokens else ids)


def byte_counts(tokenizer: ByteBPETokenizer) -> np.ndarray:
    """(V,) the bytes of text each token stands for. <|endoftext|> counts as one, like the blank line a
    document boundary would be in a text file, not as the 13 characters of its name."""
    counts = np.array([len(tokenizer.decode_bytes([i])) for i in range(tokenizer.vocab_size)])
    counts[tokenizer.eot_id] = 1
    return counts


def heldout_perplexity(model: GPT, tokenizer: ByteBPETokenizer, documents: list[str], max_tokens: int,
                       data_dir: Path | None) -> dict:
    """Nats per token, perplexity and bits per byte of the model on the held-out text; with data_dir (our
    model: the prepared data it was trained on), the unigram and bigram models on the same tokens."""
    ids = heldout_stream(tokenizer, documents, max_tokens)
    n, stride = len(ids) - 1, max(1, model.config.block_size // 2)
    n_bytes = int(byte_counts(tokenizer)[ids[1:]].sum())
    nats = stream_nats(model, ids, stride)

    def scores(total_nats: float) -> dict:
        return {"nats_per_token": total_nats / n, "perplexity": math.exp(total_nats / n),
                "bits_per_byte": total_nats / math.log(2) / n_bytes}

    result = {"tokens": n, "bytes": n_bytes, "window": model.config.block_size, "stride": stride,
              "model": scores(nats)}
    if data_dir is not None:  # counted on our tokenizer's training tokens: only our model shares them
        train = np.asarray(load_tokens(data_dir, "train"))
        result["bigram"] = scores(n * bigram_cross_entropy(train, ids, tokenizer.vocab_size))
        result["unigram"] = scores(n * unigram_cross_entropy(train, ids[1:], tokenizer.vocab_size))
    return result


# --- the script ---------------------------------------------------------------------------------------------

def load(cfg: SimpleNamespace) -> tuple[GPT, ByteBPETokenizer, Path, str | None]:
    """The model, its tokenizer, the prepared-data folder whose held-out documents it is scored on, and for
    our own model the checkpoint's path (None for an HF folder).

    Our checkpoint names the folder it was trained from, so its held-out documents are the ones it never saw,
    whatever the config now says. A released model saw neither split: the config's prepared data serves.
    """
    device = torch.device(cfg.DEVICE)
    if cfg.HF_DIR:  # released weights: the tokenizer's files are in the same folder
        model = from_hf(cfg.HF_DIR).to(device).eval()
        return model, load_tokenizer(Path(cfg.HF_DIR)), prepare(cfg), None
    checkpoint = ckpt.find_checkpoint(cfg.CHECKPOINT, Path(cfg.OUT_DIR), PREFIX)  # the file the report names
    model, state = GPT.from_checkpoint(checkpoint, device=device)
    data_dir = checkpoint_data_dir(state, load_tokenizer)
    return model, load_tokenizer(data_dir), data_dir, portable(checkpoint)


def read_documents(meta: dict) -> tuple[list[tuple[int, str]], list[str]]:
    """The held-out documents with their index in the corpus, and the training documents up to
    TRAINING_CHARACTERS of text (for the constant guess), in one pass over the corpus."""
    held_out_indices = set(meta["val_documents"])
    if not held_out_indices:
        raise CourseError("error: this corpus has no held-out documents (too few to split whole, so "
                          "val holds "
                          "the end of one); use a corpus of several documents, or raise --VAL_FRACTION")
    held_out, training, characters = [], [], 0
    for index, document in enumerate(open_corpus(Path(meta["corpus_path"])).iter_documents()):
        if index in held_out_indices:
            held_out.append((index, document))
        elif characters < TRAINING_CHARACTERS:
            training.append(document)
            characters += len(document)
    return held_out, training


def report(results: dict) -> None:
    """The two measurements as a small table, with what needs no model beside the model."""
    words, ppl = results["last_word"], results["perplexity"]
    print(f"\nlast word of {words['passages']} held-out passages ({words['mean_context_words']:.0f} words, "
          f"{words['mean_context_tokens']:.0f} tokens of context on average)")
    for example in words["examples"]:
        print(f"  ...{example['context_end']!r} -> {example['target']!r}: model {example['model']!r}, "
              f"copy {example['copy']!r}")
    rows = [("model, greedy", words["accuracy"]),
            (f"always {words['constant_word']!r} (commonest last word)", words["constant_accuracy"]),
            ("copy the commonest context word", words["copy_accuracy"]),
            ("target occurs in its context", words["target_in_context"])]
    for label, value in rows:
        print(f"  {label:<44}{value:>8.1%}")
    print(f"  {'word perplexity of the model':<44}{words['word_perplexity']:>8,.1f}")
    print(f"\nheld-out text: {ppl['tokens']:,} tokens, {ppl['bytes']:,} bytes, in windows of {ppl['window']} "
          f"tokens moving by {ppl['stride']}")
    print(f"  {'':<12}{'nats/token':>12}{'perplexity':>12}{'bits/byte':>12}")
    for name in ("model", "bigram", "unigram"):
        if name in ppl:
            score = ppl[name]
            print(f"  {name:<12}{score['nats_per_token']:>12.3f}{score['perplexity']:>12.1f}"
                  f"{score['bits_per_byte']:>12.3f}")
    print("\nthe paper's 117M GPT-2 on its benchmarks (Table 3; other text, see zero_shot.py): LAMBADA "
          "45.99%, word perplexity 35.13; WikiText-103 perplexity 37.50 per word; enwik8 1.16 bits per byte")


def main(argv: list[str] | None = None) -> dict:
    cfg = load_config(config, argv)
    seed_everything(cfg.SEED)
    print(f"device: {describe(torch.device(cfg.DEVICE))}; fp32 throughout")
    model, tokenizer, data_dir, checkpoint = load(cfg)
    ours = checkpoint is not None
    meta = read_meta(data_dir)
    held_out, training = read_documents(meta)
    passages = build_passages(held_out, cfg.ZS_CONTEXT_WORDS, cfg.ZS_PASSAGES, cfg.SEED)
    if not passages:
        raise CourseError(f"error: no held-out sentence has {cfg.ZS_CONTEXT_WORDS} words before it in its "
                          "document; lower --ZS_CONTEXT_WORDS or use a bigger corpus")
    print(f"{model.num_parameters():,} parameters, {tokenizer.vocab_size:,} tokens; scored on "
          f"{len(held_out)} held-out documents of {meta['corpus']} ({data_dir})")
    results = {
        "model": checkpoint or cfg.HF_DIR, "ours": ours, "data": portable(data_dir),
        "parameters": model.num_parameters(), "vocab_size": tokenizer.vocab_size,
        "block_size": model.config.block_size,
        "last_word": last_word_task(model, tokenizer, passages, most_frequent_final_word(training)),
        "perplexity": heldout_perplexity(model, tokenizer, [text for _, text in held_out], cfg.ZS_PPL_TOKENS,
                                         data_dir if ours else None),
    }
    report(results)
    out_dir = Path(cfg.OUT_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ("zero_shot.json" if ours else f"zero_shot_{Path(cfg.HF_DIR).name}.json")
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"saved {path}")
    return results


if __name__ == "__main__":
    run_main(main)
