"""download_data.py's fine-tuning task: questions built once from the prepared corpus, stored beside the
token files."""

import json
from types import SimpleNamespace

import pytest

from common.tokens import read_meta
from phase1_foundation.project1_gpt import download_data
from phase1_foundation.project1_gpt.download_data import build_questions, load_questions, prepare_questions


def documents(n: int, sentences: int) -> list[list[str]]:
    """Document d's sentence i reads "d.i.", so every sentence says where it came from."""
    return [[f"{d}.{i}." for i in range(sentences)] for d in range(n)]


def origin(sentence: str) -> tuple[int, int]:
    d, i = sentence.rstrip(".").split(".")
    return int(d), int(i)


def test_a_question_is_a_context_its_true_next_sentence_and_endings_from_other_documents():
    questions = build_questions(documents(5, 9), n=100, n_context=3, n_choices=3, seed=0)
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


def test_questions_are_repeatable_and_capped():
    docs = documents(6, 12)
    assert build_questions(docs, 7, 3, 2, seed=1) == build_questions(docs, 7, 3, 2, seed=1)
    assert build_questions(docs, 7, 3, 2, seed=1) != build_questions(docs, 7, 3, 2, seed=2)
    assert len(build_questions(docs, 7, 3, 2, seed=1)) == 7
    assert {q.answer for q in build_questions(docs, 18, 3, 2, seed=1)} == {0, 1}  # the answer's place varies


def test_too_little_text_is_one_line():
    with pytest.raises(SystemExit, match="too few documents or sentences"):
        build_questions(documents(1, 20), 5, 3, 2, seed=0)
    with pytest.raises(SystemExit, match="too few documents or sentences"):
        build_questions(documents(4, 3), 5, 3, 2, seed=0)  # no document has 3 + 1 sentences


def test_prepare_questions_uses_the_token_files_split_and_rebuilds_only_for_new_settings(tiny, monkeypatch):
    data_dir = download_data.main(tiny)
    cfg = SimpleNamespace(FT_CONTEXT_SENTENCES=3, FT_CHOICES=2, FT_TRAIN_QUESTIONS=16, FT_VAL_QUESTIONS=8,
                          SEED=1)
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
