"""Corpora: the embedded wiki-sample, the registry's readers, your own text, sentences. No network."""

import hashlib
import json
import re
import socket
import zipfile
from pathlib import Path

import pytest

from common import corpora
from common.corpora import (
    Corpus,
    Source,
    corpus_names,
    gutenberg_chapters,
    network_available,
    open_corpus,
    prepare_corpus,
    split_paragraphs,
    split_sentences,
    tinystories_stories,
    wiki_paragraphs,
    wikitext_articles,
)

# --- wiki-sample -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("data")
    corpus = prepare_corpus("wiki-sample", data_dir)
    return corpus, list(corpus.iter_documents())


MARKUP = ["{{", "}}", "[[", "]]", "''", "{|", "|}", "|-", "<!--", "&nbsp;", "&amp;", "&quot;", "&lt;", "==",
          "thumb|", "File:", "Image:", "Category:", "http://", "https://", "\x00", "()"]


def test_wiki_sample_is_clean_prose(wiki):
    _, documents = wiki
    text = "\n\n".join(documents)
    for markup in MARKUP:
        at = text.find(markup)
        assert at == -1, f"{markup!r} in: {text[max(at - 80, 0):at + 80]!r}"
    tags = "ref|br|math|sup|sub|small|span|div|blockquote|gallery|nowiki|references"
    assert not re.search(rf"</?({tags})\b", text, re.I)
    assert not re.search(r" [,.;:]", text)  # no gap left where a reference or template was


def test_wiki_sample_has_articles_made_of_paragraphs(wiki):
    corpus, documents = wiki
    assert 95 <= corpus.documents == len(documents) <= 106
    for title in ["Anarchism", "Albert Einstein", "Aristotle", "Abraham Lincoln", "Alabama"]:
        assert any(document.startswith(title) for document in documents), title
    paragraphs = [split_paragraphs(document) for document in documents]
    assert sum(map(len, paragraphs)) > 4000
    assert all(len(p) >= corpora.MIN_PARAGRAPH_CHARS for doc in paragraphs for p in doc)
    assert sorted(map(len, paragraphs))[len(paragraphs) // 2] >= 20  # a typical article has many paragraphs
    assert corpus.characters == sum(map(len, documents)) > 2_000_000
    assert corpus.words == sum(len(d.split()) for d in documents)


def test_wiki_sample_drops_lists_of_references_and_disambiguation_pages(wiki):
    _, documents = wiki
    text = "\n\n".join(documents)
    assert "Retrieved" not in text and "ISBN" not in text
    assert not any(d.startswith(("Austin may refer to", "Aberdeen may refer to")) for d in documents)


def test_wiki_sample_sentences(wiki):
    _, documents = wiki
    first = split_paragraphs(documents[0])[0]
    assert split_sentences(first)[0] == ("Anarchism is a political philosophy that advocates self-governed "
                                        "societies based on voluntary institutions.")
    later = [s for d in documents[:10] for p in split_paragraphs(d) for s in split_sentences(p)[1:]]
    assert len(later) > 1500
    assert all(s.lstrip(corpora.OPENERS)[0].isupper() for s in later)  # a split is always before a capital


def test_wiki_sample_cache_is_reused_and_described(wiki, monkeypatch):
    corpus, documents = wiki
    lines = corpus.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines[:2]] == [{"text": documents[0]}, {"text": documents[1]}]
    assert corpus.path == corpus.path.parent.parent / "corpora" / "wiki-sample.jsonl"
    monkeypatch.setattr(corpora, "wiki_sample_documents", lambda: pytest.fail("parsed again"))
    assert prepare_corpus("wiki-sample", corpus.path.parent.parent) == corpus
    assert re.fullmatch(r"wiki-sample: \d+ articles, [\d,]+ characters, [\d,]+ words \(embedded, offline\)",
                        corpus.describe())


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
"""


def test_wiki_paragraphs_strip_markup_and_keep_structure():
    assert wiki_paragraphs(WIKITEXT) == [
        "Ada Lovelace (10 December 1815) was an English mathematicians and writer. She lived in London.",
        "She walked 3 km every day and spoke bonjour to her friends – daily.",
        "Her father was Lord Byron, the poet, who left when she was an infant.",
        "a list item long enough to be kept as its own paragraph here",
    ]


# --- sentences and paragraphs ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("paragraph", "sentences"),
    [
        ("It rained. Then it stopped.", ["It rained.", "Then it stopped."]),
        ("Is it true? Yes! It is.", ["Is it true?", "Yes!", "It is."]),
        ("Dr. Smith met Mr. and Mrs. Jones. They talked.", ["Dr. Smith met Mr. and Mrs. Jones.", "They talked."]),
        ("The U.S. Army was formed in 1775. It fought.", ["The U.S. Army was formed in 1775.", "It fought."]),
        ("Some fruit, e.g. Apples, is sweet. Not all.", ["Some fruit, e.g. Apples, is sweet.", "Not all."]),
        ("Sour, i.e. Acidic, food. Yes.", ["Sour, i.e. Acidic, food.", "Yes."]),
        ("J. R. R. Tolkien wrote it. George W. Bush read it.", ["J. R. R. Tolkien wrote it.", "George W. Bush read it."]),
        ("Pi is about 3.14159. It is irrational.", ["Pi is about 3.14159.", "It is irrational."]),
        ("He wore No. 5 in 1990. Later he left.", ["He wore No. 5 in 1990.", "Later he left."]),
        ('She said "It is over." Then she left.', ['She said "It is over."', "Then she left."]),
        ("It was big (about 5 km wide.) The town grew.", ["It was big (about 5 km wide.)", "The town grew."]),
        ("He left. “Why?” she asked. (Nobody knew.) Fine.", ["He left.", "“Why?” she asked.", "(Nobody knew.)", "Fine."]),
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
    assert split_paragraphs("One.\nStill one.\n\n\nTwo.\n \nThree.\n") == ["One.\nStill one.", "Two.", "Three."]


# --- your own text -----------------------------------------------------------------------------------------

def test_own_text_file_documents_and_paragraphs(tmp_path):
    notes = tmp_path / "my notes.txt"
    notes.write_bytes("\ufeffFirst doc, para one.\r\nStill para one.\r\n\r\nPara two.\r\n\r\n\r\n"
                      "Second doc.\n   \n\n\n\nThird doc.\n\n".encode())
    corpus = prepare_corpus("wiki-sample", tmp_path / "data", text_file=str(notes))  # the file wins
    assert list(corpus.iter_documents()) == [
        "First doc, para one.\nStill para one.\n\nPara two.", "Second doc.", "Third doc."]
    assert corpus.name == "file:my notes"
    assert corpus.path.parent == tmp_path / "data" / "corpora"
    assert re.fullmatch(r"file-my-notes-[0-9a-f]{10}\.jsonl", corpus.path.name)
    assert corpus.describe() == (f"file:my notes: 3 documents, {corpus.characters:,} characters, 13 words "
                                 f"(your file {notes})")


def test_own_text_cache_follows_edits(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("Version one.\n", encoding="utf-8")
    first = prepare_corpus("wiki-sample", tmp_path / "data", text_file=str(notes))
    assert prepare_corpus("wiki-sample", tmp_path / "data", text_file=str(notes)) == first
    notes.write_text("Version two, longer.\n", encoding="utf-8")
    second = prepare_corpus("wiki-sample", tmp_path / "data", text_file=str(notes))
    assert second.path != first.path
    assert list(second.iter_documents()) == ["Version two, longer."]


def test_own_text_folder_is_one_document_per_file(tmp_path):
    folder = tmp_path / "texts"
    (folder / "sub").mkdir(parents=True)
    (folder / "b.txt").write_text("Bee one.\n\n\n\nBee two.\n", encoding="utf-8")
    (folder / "a.txt").write_text("Ay.\n", encoding="utf-8")
    (folder / "sub" / "c.txt").write_text("Sea.\n", encoding="utf-8")
    (folder / "empty.txt").write_text("\n\n", encoding="utf-8")
    (folder / "skip.md").write_text("Not text.\n", encoding="utf-8")
    corpus = prepare_corpus("books", tmp_path / "data", text_file=str(folder))
    assert list(corpus.iter_documents()) == ["Ay.", "Bee one.\n\nBee two.", "Sea."]
    assert corpus.describe().startswith("file:texts: 3 files, ")


def test_own_text_mistakes_end_in_one_line(tmp_path):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Caf\xe9 au lait.\n".encode("latin-1"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "blank.txt").write_text("\n  \n", encoding="utf-8")
    cases = [(latin1, "is not UTF-8 text; save it as UTF-8"), (tmp_path / "nope.txt", "does not exist"),
             (tmp_path / "empty", "holds no .txt files"), (tmp_path / "blank.txt", "found no text in your file")]
    for path, message in cases:
        with pytest.raises(SystemExit, match=message) as failure:
            prepare_corpus("wiki-sample", tmp_path / "data", text_file=str(path))
        assert "\n" not in str(failure.value)
    assert list((tmp_path / "data" / "corpora").iterdir()) == []  # no half-written cache


def test_unknown_corpus_lists_the_choices(tmp_path):
    with pytest.raises(SystemExit, match="unknown corpus 'shakespeare'; choose one of wiki-sample, tinyshakespeare"):
        prepare_corpus("shakespeare", tmp_path)


# --- the registry and its readers ------------------------------------------------------------------------

def test_registry_entries_are_pinned_or_say_why_not():
    assert corpus_names()[:2] == ["wiki-sample", "tinyshakespeare"]
    for name in ["wikitext-2", "wikitext-103", "tinystories", "tinystories-full", "gutenberg-austen", "books"]:
        assert name in corpus_names()
    for name, source in corpora.SOURCES.items():
        assert source.url.startswith("https://"), name
        assert source.size is not None or "recorded" in source.note, name
        assert (source.sha256 is not None and re.fullmatch(r"[0-9a-f]{64}", source.sha256)) or \
            "recorded" in source.note, name
    assert corpora.SOURCES["tinyshakespeare"].size == 1_115_394
    books = corpora.BUNDLES["books"].members
    assert len(books) >= 5 and all(corpora.SOURCES[member].reader is gutenberg_chapters for member in books)


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
                    f"II. A LEAGUE\n\n{BODY}\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n", encoding="utf-8")
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
    with pytest.raises(SystemExit, match="is not a Project Gutenberg text"):
        list(gutenberg_chapters(book))


def file_source(path: Path, reader, unit: str, *, pinned: bool = True, member: str | None = None) -> Source:
    """A registry entry that 'downloads' from a file:// URL, so the whole path runs without a network."""
    data = path.read_bytes()
    return Source(url=path.as_uri(), filename=path.name, size=len(data) if pinned else None,
                  sha256=hashlib.sha256(data).hexdigest() if pinned else None, reader=reader, unit=unit,
                  about=f"test {path.name}", member=member, note="" if pinned else "sha256 recorded")


def test_prepare_downloads_extracts_parses_and_caches(tmp_path, monkeypatch):
    raw = tmp_path / "wiki.train.raw"
    raw.write_text(" = One = \n First article text . \n = Two = \n Second article . \n", encoding="utf-8")
    archive = tmp_path / "wikitext-test.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(raw, "wikitext-test/wiki.train.raw")
    book_a, book_b = tmp_path / "pg1.txt", tmp_path / "pg2.txt"
    book_a.write_bytes(GUTENBERG_BOOK.encode())
    book_b.write_text(f"*** START OF THE PROJECT GUTENBERG EBOOK B ***\n\nCHAPTER 1\n\n{BODY}\n"
                      "*** END OF THE PROJECT GUTENBERG EBOOK B ***\n", encoding="utf-8")
    sources = {
        "wikitext-test": file_source(archive, wikitext_articles, "article",
                                     member="wikitext-test/wiki.train.raw"),
        "book-a": file_source(book_a, gutenberg_chapters, "chapter", pinned=False),
        "book-b": file_source(book_b, gutenberg_chapters, "chapter", pinned=False),
    }
    monkeypatch.setattr(corpora, "SOURCES", sources)
    monkeypatch.setattr(corpora, "BUNDLES", {"books": corpora.Bundle(("book-a", "book-b"), "test books")})
    data_dir = tmp_path / "data"

    wikitext = prepare_corpus("wikitext-test", data_dir)
    assert list(wikitext.iter_documents()) == ["First article text .", "Second article ."]
    assert wikitext.describe() == ("wikitext-test: 2 articles, 36 characters, 7 words "
                                   "(test wikitext-test.zip)")
    books = prepare_corpus("books", data_dir)
    assert books.documents == 3
    assert books.describe() == (f"books: 3 chapters, {books.characters:,} characters, {books.words:,} words "
                                "(2 test books)")
    recorded = json.loads((data_dir / "downloads" / "sha256-recorded.json").read_text())
    assert sorted(recorded) == ["pg1.txt", "pg2.txt"]

    for path in (archive, book_a, book_b):
        path.unlink()  # "offline" from now on: the caches must suffice
    assert prepare_corpus("wikitext-test", data_dir) == wikitext
    assert prepare_corpus("books", data_dir) == books


def test_describe_counts_units_in_plain_english(tmp_path):
    def describe(unit: str, documents: int) -> str:
        return Corpus("c", tmp_path, documents, 10, 2, unit, "here").describe()

    assert describe("story", 1) == "c: 1 story, 10 characters, 2 words (here)"
    assert describe("story", 2).startswith("c: 2 stories,")
    assert describe("speech", 7_222).startswith("c: 7,222 speeches,")
    assert describe("chapter", 3).startswith("c: 3 chapters,")


def test_network_available(monkeypatch):
    class Connection:
        def close(self):
            pass

    def refuse(address, timeout):
        raise OSError("no network")

    monkeypatch.setattr(socket, "create_connection", lambda address, timeout: Connection())
    assert network_available() is True
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert network_available(timeout=0.1) is False


def test_open_corpus_reads_a_prepared_cache(tmp_path):
    prepared = prepare_corpus("wiki-sample", tmp_path)
    reopened = open_corpus(prepared.path)
    assert reopened == prepared
    assert next(reopened.iter_documents()) == next(prepared.iter_documents())
    with pytest.raises(SystemExit, match="run download_data.py again"):
        open_corpus(tmp_path / "corpora" / "gone.jsonl")
