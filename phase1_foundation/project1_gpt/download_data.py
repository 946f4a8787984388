"""Prepare chapter 1's data, once: corpus -> tokenizer -> train.bin / val.bin, and fine-tuning questions.

    uv run python phase1_foundation/project1_gpt/download_data.py   # the embedded wiki-sample
    uv run python phase1_foundation/project1_gpt/download_data.py --CORPUS=books  # 8 novels, downloaded
    uv run python phase1_foundation/project1_gpt/download_data.py --CORPUS=tinyshakespeare --TOKENIZER=char
    uv run python phase1_foundation/project1_gpt/download_data.py --TEXT_FILE=my_notes.txt

`train.py` calls `prepare()` itself when nothing is prepared yet, and `finetune.py` calls
`prepare_questions()`, so this script is only needed to choose another corpus or tokenizer ahead of time.
Nothing after this step reads raw text again.
"""

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

from common.data.corpora import choose_corpus, open_corpus, prepare_corpus
from common.data.sentences import document_sentences
from common.data.tokenizers import CharTokenizer, SentencePieceTokenizer
from common.data.tokens import read_meta, write_token_files
from common.errors import CourseError, run_main
from common.files import write_atomic
from common.progress import say_how_long
from common.training.config import load_config
from phase1_foundation.project1_gpt import config

# Fixed ids 0..4. GPT-1 added its start, delimiter and extract tokens for fine-tuning (§3.3); we reserve them
# in the vocabulary up front. Pre-training never feeds them, but the tied head trains their rows as tokens
# never to predict.
SPECIAL_TOKENS = ["<unk>", "<|endoftext|>", "<|start|>", "<|delim|>", "<|extract|>"]
END_OF_TEXT = "<|endoftext|>"  # separates documents in the token stream
# Characters a second each tokenizer reads to learn its vocabulary, and encodes into token files, on two CPU
# cores (root README, "Data")
TRAINING_RATE = {"bpe": 37.2e6, "char": 34.1e6}
ENCODING_RATE = {"bpe": 5.0e6, "char": 22.7e6}


def prepare(cfg: SimpleNamespace) -> Path:
    """Return the folder holding tokenizer + token files for this config, building it if it is missing."""
    corpus = prepare_corpus(choose_corpus(cfg, larger="books"), Path(cfg.DATA_DIR), cfg.TEXT_FILE)
    print(f"corpus: {corpus.describe()}")
    vocab = "" if cfg.TOKENIZER == "char" else str(cfg.VOCAB_SIZE)
    out_dir = Path(cfg.DATA_DIR) / "project1" / f"{corpus.path.stem}-{cfg.TOKENIZER}{vocab}"
    if (out_dir / "meta.json").exists() and read_meta(out_dir)["val_fraction"] == cfg.VAL_FRACTION:
        return out_dir

    (out_dir / QUESTIONS).unlink(missing_ok=True)  # built from the old split: made again when needed
    print(f"training a {cfg.TOKENIZER} tokenizer on {corpus.name} ...")
    if cfg.TOKENIZER in TRAINING_RATE:
        say_how_long("reading", corpus.characters, TRAINING_RATE[cfg.TOKENIZER])
    if cfg.TOKENIZER == "char":
        tokenizer = CharTokenizer.train(corpus.iter_documents(), SPECIAL_TOKENS)
        tokenizer.save(out_dir)
    elif cfg.TOKENIZER == "bpe":
        tokenizer = SentencePieceTokenizer.train(
            corpus.iter_documents(), out_dir, cfg.VOCAB_SIZE,
            model_type="bpe", special_tokens=SPECIAL_TOKENS, unk_token="<unk>",
        )
    else:
        raise CourseError(f"error: unknown tokenizer {cfg.TOKENIZER!r}; "
                          "use --TOKENIZER=bpe or --TOKENIZER=char")

    print(f"encoding {corpus.name} with {tokenizer.vocab_size:,} tokens ...")
    say_how_long("encoding", corpus.characters, ENCODING_RATE[cfg.TOKENIZER])
    meta = write_token_files(
        corpus.iter_documents(), tokenizer, out_dir,
        val_fraction=cfg.VAL_FRACTION, separator_id=tokenizer.token_to_id(END_OF_TEXT),
        extra_meta={"corpus": corpus.name, "corpus_path": str(corpus.path), "tokenizer": cfg.TOKENIZER},
    )
    print(f"wrote {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens to {out_dir}")
    return out_dir


# --- the fine-tuning task -----------------------------------------------------------------------------------
# Built here, from the same documents as the token files and the same train/val split, so that finetune.py
# reads questions and never goes back to the raw text.

QUESTIONS = "questions.json"  # beside the token files


@dataclass
class Question:
    context: str
    candidates: list[str]
    answer: int  # index of the true sentence in candidates


MIN_WORDS = 6  # a sentence to shuffle has at least four words between its first and its last


def shuffle_inner_words(sentence: str, rng: random.Random) -> str | None:
    """The sentence with the words between its first and its last in a random new order, or None if it is
    too short or no new order differs. The first and last words stay, so no capital letter or full stop
    moves: only the order gives it away."""
    words = sentence.split()
    if len(words) < MIN_WORDS or len(set(words[1:-1])) < 2:
        return None
    inner = words[1:-1]
    while (shuffled := rng.sample(inner, len(inner))) == inner:
        pass
    return " ".join([words[0], *shuffled, words[-1]])


def build_questions(documents: list[list[str]], n: int, n_context: int, n_choices: int, seed: int,
                    task: str) -> list[Question]:
    """Up to n questions (documents given as their sentences) from non-overlapping windows of n_context + 1
    sentences: the context, then the true sentence among n_choices candidates.

    task "shuffle": the other candidate is the true sentence with its inner words shuffled (two choices only),
    so both hold the same words. task "ending": the others are sentences of other documents, so a wrong
    candidate is never the true continuation, but is usually about something else."""
    if task not in ("shuffle", "ending"):
        raise CourseError(f"error: unknown fine-tuning task {task!r}; use --FT_TASK=shuffle or ending")
    if task == "shuffle" and n_choices != 2:
        raise CourseError("error: the shuffle task has two candidates; use --FT_CHOICES=2")
    rng = random.Random(seed)
    windows = [(d, i) for d, sentences in enumerate(documents)
               for i in range(0, len(sentences) - n_context, n_context + 1)]
    rng.shuffle(windows)
    if len(documents) < 2 or not windows:
        raise CourseError("error: too few documents or sentences to build questions; use a bigger corpus")
    questions = []
    for d, i in windows:
        context, ending = " ".join(documents[d][i : i + n_context]), documents[d][i + n_context]
        if task == "shuffle":
            ending = " ".join(ending.split())  # as the shuffled copy is written: spacing gives nothing away
            others = [shuffle_inner_words(ending, rng)]
            if others[0] is None:
                continue
        else:
            others = [rng.choice(documents[o]) for o in rng.choices(
                [o for o in range(len(documents)) if o != d and documents[o]], k=n_choices - 1)]
        candidates = [ending, *others]
        rng.shuffle(candidates)
        questions.append(Question(context, candidates, candidates.index(ending)))
        if len(questions) == n:
            break
    return questions


def prepare_questions(cfg: SimpleNamespace, data_dir: Path) -> Path:
    """Return data_dir/questions.json: training questions from pre-training's training documents, held-out
    ones from its held-out documents (meta.json's val_documents), building them if missing or made with other
    settings (FT_TASK, FT_CONTEXT_SENTENCES, FT_CHOICES, FT_TRAIN_QUESTIONS, FT_VAL_QUESTIONS, SEED)."""
    path = Path(data_dir) / QUESTIONS
    settings = {"task": cfg.FT_TASK, "context_sentences": cfg.FT_CONTEXT_SENTENCES, "choices": cfg.FT_CHOICES,
                "train_questions": cfg.FT_TRAIN_QUESTIONS, "val_questions": cfg.FT_VAL_QUESTIONS,
                "seed": cfg.SEED}
    if path.exists() and json.loads(path.read_text(encoding="utf-8"))["settings"] == settings:
        return path
    meta = read_meta(data_dir)
    held_out, train_docs, val_docs = set(meta["val_documents"]), [], []
    for index, text in enumerate(open_corpus(Path(meta["corpus_path"])).iter_documents()):
        (val_docs if index in held_out else train_docs).append(document_sentences(text))
    args = (cfg.FT_CONTEXT_SENTENCES, cfg.FT_CHOICES, cfg.SEED, cfg.FT_TASK)
    questions = {"train": build_questions(train_docs, cfg.FT_TRAIN_QUESTIONS, *args),
                 "val": build_questions(val_docs, cfg.FT_VAL_QUESTIONS, *args)}
    saved = {"settings": settings, **{split: [asdict(q) for q in qs] for split, qs in questions.items()}}
    write_atomic(path, json.dumps(saved, ensure_ascii=False, indent=1))
    print(f"wrote {len(questions['train'])} training and {len(questions['val'])} held-out questions "
          f"to {path}")
    return path


def load_questions(path: Path) -> tuple[list[Question], list[Question]]:
    """(training questions, held-out questions) from a questions.json written by prepare_questions."""
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    return tuple([Question(**q) for q in saved[split]] for split in ("train", "val"))


def main(argv: list[str] | None = None) -> Path:
    cfg = load_config(config, argv)
    data_dir = prepare(cfg)
    prepare_questions(cfg, data_dir)
    return data_dir


if __name__ == "__main__":
    run_main(main)
