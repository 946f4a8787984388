"""The format parsers: each format's quirks undone, and wiki markup turned into prose."""

import pytest

from common.data.parsers import (
    gutenberg_chapters,
    tinyshakespeare_speeches,
    tinystories_stories,
    wiki_paragraphs,
    wikitext_articles,
)
from common.errors import CourseError

# --- downloaded files -> documents -----------------------------------------------------------------------

def test_tinyshakespeare_speeches(tmp_path):
    raw = tmp_path / "input.txt"
    raw.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n",
                   encoding="utf-8")
    assert list(tinyshakespeare_speeches(raw)) == [
        "First Citizen:\nBefore we proceed any further, hear me speak.", "All:\nSpeak, speak."]


def test_wikitext_articles(tmp_path):
    raw = tmp_path / "wiki.train.raw"
    raw.write_text(" \n = Valkyria Chronicles = \n \n The game 's 1 @,@ 000 well @-@ known units . \n \n"
                   " = = Gameplay = = \n \n Play is 3 @.@ 5 hours . \n = Tower = \n \n A tower . \n",
                   encoding="utf-8")
    assert list(wikitext_articles(raw)) == [
        "The game 's 1,000 well-known units .\n\nPlay is 3.5 hours .", "A tower ."]


def test_tinystories_stories(tmp_path):
    raw = tmp_path / "stories.txt"
    raw.write_text("Once there was a cat.\nThe cat was happy.\n<|endoftext|>\nLily ran.\n\n\nShe fell."
                   "<|endoftext|>Tom sat.<|endoftext|>\n<|endoftext|>\n", encoding="utf-8")
    assert list(tinystories_stories(raw)) == [
        "Once there was a cat.\n\nThe cat was happy.", "Lily ran.\n\nShe fell.", "Tom sat."]


BODY = "It is a truth universally acknowledged, that a single man in\npossession of a good fortune. " * 6
GUTENBERG_BOOK = f"""\ufeffThe Project Gutenberg eBook of A Test Novel\r
\r
Title: A Test Novel\r
\r
*** START OF THE PROJECT GUTENBERG EBOOK A TEST NOVEL ***\r
\r
PREFACE\r
\r
An editor's preface that is not part of the novel and goes on for a while.\r
\r
CONTENTS\r
\r
CHAPTER I. The Start\r
\r
CHAPTER II. The End\r
\r
[Illustration: ·A TEST NOVEL·\r
\r
Chapter I.]\r
\r
\r
{BODY}\r
\r
“_You_ want to tell me,” she said, and the story went on\r
\r
[Illustration:\r
\r
“He came down to see the place”\r
\r
[_Copyright 1894 by George Allen._]]\r
\r
without a break.\r
\r
CHAPTER II.\r
\r
\r
[Illustration]\r
\r
{BODY}\r
\r
*** END OF THE PROJECT GUTENBERG EBOOK A TEST NOVEL ***\r
\r
The licence, which must not be read as part of the novel.\r
"""
UNWRAPPED = " ".join(BODY.split())


def test_gutenberg_chapters(tmp_path):
    book = tmp_path / "pg1.txt"
    book.write_bytes(GUTENBERG_BOOK.encode())
    assert list(gutenberg_chapters(book)) == [
        f"{UNWRAPPED}\n\n“You want to tell me,” she said, and the story went on without a break.",
        UNWRAPPED,
    ]


def test_gutenberg_sherlock_style_headings(tmp_path):
    book = tmp_path / "pg2.txt"
    book.write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nContents\n\n   I.     A Scandal\n"
                    f"   II.    A League\n\n\nI. A SCANDAL\n\n\nI.\n\n{BODY}\n\nII.\n\n{BODY}\n\n"
                    f"II. A LEAGUE\n\n{BODY}\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n",
                    encoding="utf-8")
    assert list(gutenberg_chapters(book)) == [UNWRAPPED] * 3


def test_gutenberg_heading_variants(tmp_path):
    book = tmp_path / "pg4.txt"
    book.write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n"
                    f"CHAPTER I\nThe Beginning\n\n{BODY}\n\nLetter from Jane\narrived today.\n\n{BODY}\n\n"
                    f"STAVE TWO.\n\n{BODY}\n\nLetter 4\n\n{BODY}\n"
                    "*** END OF THE PROJECT GUTENBERG EBOOK X ***\n", encoding="utf-8")
    assert list(gutenberg_chapters(book)) == [
        f"{UNWRAPPED}\n\nLetter from Jane arrived today.\n\n{UNWRAPPED}", UNWRAPPED, UNWRAPPED]


def test_gutenberg_without_markers_is_refused(tmp_path):
    book = tmp_path / "pg3.txt"
    book.write_text("CHAPTER I.\n\nSome text.\n", encoding="utf-8")
    with pytest.raises(CourseError, match="is not a Project Gutenberg text"):
        list(gutenberg_chapters(book))


# --- wiki markup, piece by piece ---------------------------------------------------------------------------

WIKITEXT = """{{Infobox person|name=Ada|image={{nested|x}}}}
'''Ada Lovelace''' ({{IPAc-en|ˈ|æ|d|ə}}; 10 December 1815) was an [[England|English]] [[mathematician]]s<ref name="a">{{cite web|url=http://x.org|title=T}}</ref> and writer.<ref name="b"/> She lived in [[London]].<!-- hidden note -->

[[File:Ada.jpg|thumb|Ada with a [[piano|pianoforte]] and [a bracket] inside]]
She walked {{convert|3|km|mi}} every day and spoke {{lang|fr|bonjour}} to [http://example.org her friends] &ndash; daily.

== Early life ==
{| class="wikitable"
|-
| cell || {| nested table |} cell
|}
Her father was Lord Byron, the poet, who left when she was an infant.
* a list item long enough to be kept as its own paragraph here
* short item
The area is <math>\\pi r^2</math> which is a formula sentence that should go.

== See also ==
* [[Charles Babbage]] and a long enough line to be a paragraph if kept
"""  # noqa: E501 (a sample of raw wiki markup: its long lines are the input under test)


def test_wiki_paragraphs_strip_markup_and_keep_structure():
    assert wiki_paragraphs(WIKITEXT) == [
        "Ada Lovelace (10 December 1815) was an English mathematicians and writer. She lived in London.",
        "She walked 3 km every day and spoke bonjour to her friends – daily.",
        "Her father was Lord Byron, the poet, who left when she was an infant.",
        "a list item long enough to be kept as its own paragraph here",
    ]
