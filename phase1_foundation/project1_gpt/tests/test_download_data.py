"""download_data.py's fine-tuning task: questions built once from the prepared corpus, stored beside the
token files."""

import json
import random
from types import SimpleNamespace

import pytest

from common.data.tokens import read_meta
from common.errors import CourseError
from phase1_foundation.project1_gpt import download_data
from phase1_foundation.project1_gpt.download_data import (
    build_questions,
    load_questions,
    prepare_questions,
    shuffle_inner_words,
)


def documents(n: int, sentences: int) -> list[list[str]]:
    """Document d's sentence i reads "d.i.", so every sentence says where it came from."""
    return [[f"{d}.{i}." for i in range(sentences)] for d in range(n)]


def origin(sentence: str) -> tuple[int, int]:
    d, i = sentence.rstrip(".").split(".")
    return int(d), int(i)


def test_a_question_is_a_context_its_true_next_sentence_and_endings_from_other_documents():
    questions = build_questions(documents(5, 9), n=100, n_context=3, n_choices=3, seed=0, task="ending")
    assert len(questions) == 5 * 2  # windows of 4 sentences, not overlapping: 2 per 9-sentence document
    for q in questions:
        context = [origin(s) for s in q.context.split()]
        d, last = context[-1]
        assert [i for _, i in context] == list(range(last - 2, last + 1)) and {c for c, _ in context} == {d}
        assert origin(q.candidates[q.answer]) == (d, last + 1)  # the sentence that really follows
        wrong = [origin(c)[0] for i, c in enumerate(q.candidates) if i != q.answer]
        assert len(wrong) == 2 and d not in wrong  # never from the same document
    windows = {q.context for q in questions}
    assert len(windows) == len(questions)  # no window asked twice


def sentences(n: int, sentences: int) -> list[list[str]]:
    """Document d's sentence i reads "Sentence i of document d has words.": seven words, five inside."""
    return [[f"Sentence {i} of document {d} has words." for i in range(sentences)] for d in range(n)]


def test_a_shuffle_question_is_the_true_next_sentence_and_it_with_its_inner_words_reordered():
    questions = build_questions(sentences(4, 10), n=100, n_context=1, n_choices=2, seed=0, task="shuffle")
    assert len(questions) == 4 * 5  # windows of 2 sentences, not overlapping
    for q in questions:
        true, wrong = q.candidates[q.answer], q.candidates[1 - q.answer]
        d, i = int(q.context.split()[4]), int(q.context.split()[1])
        assert true == f"Sentence {i + 1} of document {d} has words."  # the sentence that really follows
        assert sorted(wrong.split()) == sorted(true.split()) and wrong != true  # the same words, reordered
        assert wrong.split()[0] == "Sentence" and wrong.endswith(" words.")  # first and last kept in place
    assert {q.answer for q in questions} == {0, 1}  # the true sentence's place varies


def test_a_sentence_too_short_or_of_one_inner_word_repeated_is_not_shuffled():
    rng = random.Random(0)
    assert shuffle_inner_words("One two three four five.", rng) is None  # fewer than six words
    assert shuffle_inner_words("The very very very very end.", rng) is None  # no other order exists
    spaced = [["A first  sentence   of  the text  here.", "The  spacing   of  this sentence  goes  on."]] * 2
    question = build_questions(spaced, n=1, n_context=1, n_choices=2, seed=0, task="shuffle")[0]
    assert all(c == " ".join(c.split()) for c in question.candidates)  # spacing gives nothing away
    docs = [["Too short.", "Also short here.", "Then one.", "Six words make a long sentence."]] * 2
    questions = build_questions(docs, n=10, n_context=1, n_choices=2, seed=0, task="shuffle")
    assert [q.candidates[q.answer] for q in questions] == ["Six words make a long sentence."] * 2


def test_the_shuffle_task_has_two_candidates_and_an_unknown_task_is_one_line():
    with pytest.raises(CourseError, match="--FT_CHOICES=2"):
        build_questions(sentences(4, 10), 5, 1, 3, seed=0, task="shuffle")
    with pytest.raises(CourseError, match="--FT_TASK=shuffle"):
        build_questions(sentences(4, 10), 5, 1, 2, seed=0, task="cola")


@pytest.mark.parametrize("task", ["ending", "shuffle"])
def test_questions_are_repeatable_and_capped(task):
    def build(n: int, seed: int) -> list:
        return build_questions(sentences(6, 12), n, 3, 2, seed=seed, task=task)

    assert build(7, seed=1) == build(7, seed=1)
    assert build(7, seed=1) != build(7, seed=2)
    assert len(build(7, seed=1)) == 7
    assert {q.answer for q in build(18, seed=1)} == {0, 1}  # the answer's place varies


def test_too_little_text_is_one_line():
    with pytest.raises(CourseError, match="too few documents or sentences"):
        build_questions(documents(1, 20), 5, 3, 2, seed=0, task="ending")
    with pytest.raises(CourseError, match="too few documents or sentences"):
        build_questions(documents(4, 3), 5, 3, 2, seed=0, task="ending")  # no document has 3 + 1 sentences


def test_prepare_questions_uses_the_token_files_split_and_rebuilds_only_for_new_settings(tiny, monkeypatch):
    data_dir = download_data.main(tiny)
    cfg = SimpleNamespace(FT_TASK="ending", FT_CONTEXT_SENTENCES=3, FT_CHOICES=2, FT_TRAIN_QUESTIONS=16,
                          FT_VAL_QUESTIONS=8, SEED=1)
    path = prepare_questions(cfg, data_dir)
    assert path == data_dir / "questions.json"
    train, val = load_questions(path)
    assert (len(train), len(val)) == (16, 8)

    meta = read_meta(data_dir)
    held_out = set(meta["val_documents"])
    texts = [json.loads(line)["text"] for line in open(meta["corpus_path"], encoding="utf-8")]
    val_text = " ".join(t for i, t in enumerate(texts) if i in held_out)
    train_text = " ".join(t for i, t in enumerate(texts) if i not in held_out)
    # held-out from held-out
    assert all(q.candidates[q.answer][:40] in " ".join(val_text.split()) for q in val)
    assert all(q.candidates[q.answer][:40] in " ".join(train_text.split()) for q in train)

    monkeypatch.setattr(download_data, "open_corpus", None)  # a second call must not read the corpus again
    assert load_questions(prepare_questions(cfg, data_dir)) == (train, val)
    with pytest.raises(TypeError):  # new settings: rebuilt, from the corpus
        prepare_questions(SimpleNamespace(**{**vars(cfg), "SEED": 2}), data_dir)
