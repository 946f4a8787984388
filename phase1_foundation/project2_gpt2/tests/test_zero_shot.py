"""zero_shot.py: the last-word task's passages, baselines and stopping rule, the sliding perplexity windows,
and the script end to end on a tiny model, from our checkpoint and from the same weights in an HF folder."""

import json
from types import SimpleNamespace

import pytest
import torch

from common.data.corpora import open_corpus
from common.data.tokens import read_meta
from common.files import in_repo
from common.training.run import checkpoint_tokenizer
from phase1_foundation.project2_gpt2 import train, zero_shot
from phase1_foundation.project2_gpt2.hf_weights import to_hf
from phase1_foundation.project2_gpt2.model import GPT
from phase1_foundation.project2_gpt2.tokenizer import load_tokenizer
from phase1_foundation.project2_gpt2.zero_shot import (
    Passage,
    build_passages,
    copy_guess,
    document_passages,
    final_word,
    first_word,
    read_documents,
    sliding_windows,
)

# ---- pieces, on hand-made text ----------------------------------------------------------------------------


def test_a_target_is_a_sentence_final_word_of_letters_only():
    assert final_word("She looked at the harbour.").group(1) == "harbour"
    assert final_word('He called it "the island."').group(1) == "island"  # closing quotes after the stop
    assert final_word("Was it the wind?").group(1) == "wind"
    for sentence in ("It was built in 1990.", "He moved to the U.S.", "It was well-known.", "He saw it.",
                     "= = Early life = =", "A heading without a stop"):
        assert final_word(sentence) is None, sentence


def test_passages_are_whole_sentences_with_enough_context_and_keep_paragraph_breaks():
    document = "One two three four. Five six seven eight.\n\nNine ten eleven twelve. The cat sat on the mat."
    passages = list(document_passages(7, document, context_words=8))
    # "eight." has 7 words before it (too few); "twelve." and "mat." have enough.
    assert passages == [
        Passage(7, "One two three four. Five six seven eight.\n\nNine ten eleven", "twelve"),
        Passage(7, "Nine ten eleven twelve. The cat sat on the", "mat"),
    ]
    assert passages[0].text == document[: document.index(". The cat")]  # the document's own text


def test_the_passages_drawn_depend_on_the_seed_only():
    documents = [(i, " ".join(f"Word{i}{k} goes here now." for k in range(30))) for i in range(5)]
    every = [p for index, text in documents for p in document_passages(index, text, context_words=10)]
    assert len(every) == 5 * 28  # 3 words before each last word: the first two sentences have too few
    first, again = (build_passages(documents, 10, count=8, seed=3) for _ in range(2))
    assert first == again and len(first) == 8
    positions = [every.index(p) for p in first]
    assert positions == sorted(positions)  # in corpus order
    assert build_passages(documents, 10, count=8, seed=4) != first
    assert build_passages(documents, 10, count=10_000, seed=3) == every  # all there are


def test_copying_picks_the_most_frequent_content_word_and_the_latest_on_a_tie():
    context = "The lighthouse keeper met Anna near the lighthouse. The keeper and Anna walked home, and the"
    # "the" (4 times) and "and" are stop-words; lighthouse, keeper and Anna occur twice each: Anna came last.
    assert copy_guess(context) == "Anna"
    assert copy_guess(context + " keeper said") == "keeper"  # now three times
    assert copy_guess("Ed is in it, as we are") == ""  # nothing long enough that is not a stop-word


def test_the_first_word_of_a_continuation_ends_at_anything_but_a_letter():
    assert first_word(" Par") == ("Par", False)  # may go on
    assert first_word(" Paris,") == ("Paris", True)
    assert first_word(" Paris is") == ("Paris", True)
    assert first_word(" ") == ("", False)
    assert first_word(",") == ("", True)  # no word at all
    assert first_word("s") == ("", True)  # the previous word went on: not a new word
    assert first_word("<|endoftext|>") == ("", True)


@pytest.mark.parametrize("n, block_size, stride", [(10, 4, 2), (9, 4, 2), (3, 8, 4), (50, 16, 5), (7, 4, 4)])
def test_sliding_windows_score_every_target_once_with_enough_context(n, block_size, stride):
    scored = []
    for begin, end, new in sliding_windows(n, block_size, stride):
        assert 0 < end - begin <= block_size and 0 < new <= end - begin
        targets = range(end - new + 1, end + 1)  # token positions whose prediction is scored
        assert begin == 0 or all(t - begin >= block_size - stride for t in targets)  # tokens of context
        scored += targets
    assert scored == list(range(1, n + 1))


# ---- the script, end to end --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(corpus_file, tmp_path_factory):
    """A tiny model trained once for this module and scored: its settings, OUT_DIR and zero_shot's results."""
    folder = tmp_path_factory.mktemp("zero_shot")
    args = [
        f"--TEXT_FILE={corpus_file}", f"--DATA_DIR={folder / 'data'}", f"--OUT_DIR={folder / 'out'}",
        "--DEVICE=cpu", "--PRESET=cpu", "--VOCAB_SIZE=512", "--N_LAYER=2", "--N_HEAD=2", "--N_EMBD=32",
        "--BLOCK_SIZE=32", "--BATCH_SIZE=4", "--MAX_ITERS=20", "--WARMUP_ITERS=5", "--EVAL_INTERVAL=20",
        "--EVAL_ITERS=2", "--SAMPLE_TOKENS=5", "--ZS_PASSAGES=20", "--ZS_CONTEXT_WORDS=40",
        "--ZS_PPL_TOKENS=1000",
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the root conftest's one_thread, which starts only after module fixtures
    try:
        train.main(args)
        return SimpleNamespace(args=args, out_dir=folder / "out", results=zero_shot.main(args))
    finally:
        torch.set_num_threads(threads)


def test_zero_shot_reports_both_measurements_with_their_baselines(run):
    words, ppl = run.results["last_word"], run.results["perplexity"]
    assert words["passages"] == 20 and words["mean_context_words"] >= 40
    for key in ("accuracy", "constant_accuracy", "copy_accuracy", "target_in_context"):
        assert 0 <= words[key] <= 1, key
    assert words["copy_accuracy"] <= words["target_in_context"]  # copying cannot find what is not there
    assert words["constant_word"].isalpha() and words["word_perplexity"] > 1
    assert ppl["tokens"] == 1000 and ppl["bytes"] > ppl["tokens"] and ppl["stride"] == 16
    for model in ("model", "bigram", "unigram"):
        assert ppl[model]["bits_per_byte"] > 0 and ppl[model]["perplexity"] > 1
    assert json.loads((run.out_dir / "zero_shot.json").read_text()) == run.results


def test_passages_come_from_held_out_documents_only(run):
    meta = read_meta(in_repo(run.results["data"]))
    held_out, _ = read_documents(meta)
    training = [text for index, text in enumerate(open_corpus(meta["corpus_path"]).iter_documents())
                if index not in meta["val_documents"]]
    passages = build_passages(held_out, 40, 20, seed=1337)  # what main drew: the settings' values

    def flat(text):  # passages join a paragraph's lines with spaces: compare without line breaks
        return " ".join(text.split())

    documents = dict(held_out)
    assert len(passages) == 20 and {p.document for p in passages} <= set(meta["val_documents"])
    for passage in passages:
        assert flat(passage.text) in flat(documents[passage.document])
        assert not any(flat(passage.text) in flat(document) for document in training)


def test_an_hf_folder_of_the_same_weights_gives_the_same_numbers(run, tmp_path):
    model, state = GPT.from_checkpoint("latest", run.out_dir)
    tokenizer = checkpoint_tokenizer(state, load_tokenizer)
    to_hf(model, tmp_path, eos_id=tokenizer.eot_id)
    tokenizer.save(tmp_path)
    ours, theirs = run.results, zero_shot.main([*run.args, f"--HF_DIR={tmp_path}"])
    assert not theirs["ours"] and "bigram" not in theirs["perplexity"]  # baselines: our tokenizer's only
    assert (run.out_dir / f"zero_shot_{tmp_path.name}.json").is_file()  # beside ours, not over it
    ours_ppl, their_ppl = ours["perplexity"], theirs["perplexity"]
    assert (their_ppl["tokens"], their_ppl["bytes"]) == (ours_ppl["tokens"], ours_ppl["bytes"])
    nats = ours_ppl["model"]["nats_per_token"]
    assert their_ppl["model"]["nats_per_token"] == pytest.approx(nats, abs=1e-4)
    assert theirs["last_word"]["accuracy"] == ours["last_word"]["accuracy"]
    assert theirs["last_word"]["word_perplexity"] == pytest.approx(ours["last_word"]["word_perplexity"],
                                                                   rel=1e-4)
