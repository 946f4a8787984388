"""Sentences and paragraphs: abbreviations, initials and numbers do not end a sentence; a blank line does."""

from itertools import islice

import pytest

from common.data.corpora import wiki_sample_documents
from common.data.sentences import OPENERS, document_sentences, split_paragraphs, split_sentences


@pytest.mark.parametrize(
    ("paragraph", "sentences"),
    [
        ("It rained. Then it stopped.", ["It rained.", "Then it stopped."]),
        ("Is it true? Yes! It is.", ["Is it true?", "Yes!", "It is."]),
        ("Dr. Smith met Mr. and Mrs. Jones. They talked.",
         ["Dr. Smith met Mr. and Mrs. Jones.", "They talked."]),
        ("The U.S. Army was formed in 1775. It fought.", ["The U.S. Army was formed in 1775.", "It fought."]),
        ("Some fruit, e.g. Apples, is sweet. Not all.", ["Some fruit, e.g. Apples, is sweet.", "Not all."]),
        ("Sour, i.e. Acidic, food. Yes.", ["Sour, i.e. Acidic, food.", "Yes."]),
        ("J. R. R. Tolkien wrote it. George W. Bush read it.",
         ["J. R. R. Tolkien wrote it.", "George W. Bush read it."]),
        ("Pi is about 3.14159. It is irrational.", ["Pi is about 3.14159.", "It is irrational."]),
        ("He wore No. 5 in 1990. Later he left.", ["He wore No. 5 in 1990.", "Later he left."]),
        ('She said "It is over." Then she left.', ['She said "It is over."', "Then she left."]),
        ("It was big (about 5 km wide.) The town grew.", ["It was big (about 5 km wide.)", "The town grew."]),
        ("He left. “Why?” she asked. (Nobody knew.) Fine.",
         ["He left.", "“Why?” she asked.", "(Nobody knew.)", "Fine."]),
        ("He moved to St. Louis in 1900. It grew.", ["He moved to St. Louis in 1900.", "It grew."]),
        ("Smith et al. Found it. Gen. Lee agreed.", ["Smith et al. Found it.", "Gen. Lee agreed."]),
        ("He paused... Then he spoke.", ["He paused...", "Then he spoke."]),
        ("the game 's first . It sold", ["the game 's first .", "It sold"]),  # WikiText's spacing
        ("Roses are red.\nViolets are blue.", ["Roses are red.", "Violets are blue."]),
        ("No full stop at the end", ["No full stop at the end"]),
        ("", []),
    ],
)
def test_split_sentences(paragraph, sentences):
    assert split_sentences(paragraph) == sentences


def test_split_sentences_is_linear_in_paragraph_length():
    assert len(split_sentences("It rained on Mr. Smith. " * 50_000)) == 50_000  # quadratic would take minutes


def test_split_paragraphs():
    assert split_paragraphs("One.\nStill one.\n\n\nTwo.\n \nThree.\n") == [
        "One.\nStill one.", "Two.", "Three."]


def test_document_sentences_go_paragraph_by_paragraph_without_newlines():
    document = "Roses are red, violets\nare blue. Sugar is sweet.\n\nNo full stop here\n\nAnd so are you."
    assert document_sentences(document) == [
        "Roses are red, violets are blue.", "Sugar is sweet.", "No full stop here", "And so are you."]


def test_wiki_sample_sentences():
    documents = list(islice(wiki_sample_documents(), 10))
    first = split_paragraphs(documents[0])[0]
    assert split_sentences(first)[0] == ("Anarchism is a political philosophy that advocates self-governed "
                                        "societies based on voluntary institutions.")
    later = [s for d in documents for p in split_paragraphs(d) for s in split_sentences(p)[1:]]
    assert len(later) > 1500
    assert all(s.lstrip(OPENERS)[0].isupper() for s in later)  # a split is always before a capital
