"""Corpora: the registry, the cache, your own text and the embedded wiki-sample. No network."""

import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest

from common.data import corpora
from common.data.corpora import Corpus, Source, corpus_names, open_corpus, prepare_corpus
from common.data.parsers import MIN_PARAGRAPH_CHARS, gutenberg_chapters, wikitext_articles
from common.data.sentences import split_paragraphs
from common.errors import CourseError

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
    assert all(len(p) >= MIN_PARAGRAPH_CHARS for doc in paragraphs for p in doc)
    assert sorted(map(len, paragraphs))[len(paragraphs) // 2] >= 20  # a typical article has many paragraphs
    assert corpus.characters == sum(map(len, documents)) > 2_000_000
    assert corpus.words == sum(len(d.split()) for d in documents)


def test_wiki_sample_drops_lists_of_references_and_disambiguation_pages(wiki):
    _, documents = wiki
    text = "\n\n".join(documents)
    assert "Retrieved" not in text and "ISBN" not in text
    assert not any(d.startswith(("Austin may refer to", "Aberdeen may refer to")) for d in documents)


def test_wiki_sample_cache_is_reused_and_described(wiki, monkeypatch):
    corpus, documents = wiki
    lines = corpus.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines[:2]] == [{"text": documents[0]}, {"text": documents[1]}]
    assert corpus.path == corpus.path.parent.parent / "corpora" / "wiki-sample.jsonl"
    monkeypatch.setattr(corpora, "wiki_sample_documents", lambda: pytest.fail("parsed again"))
    assert prepare_corpus("wiki-sample", corpus.path.parent.parent) == corpus
    described = r"wiki-sample: \d+ articles, [\d,]+ characters, [\d,]+ words \(embedded, no download\)"
    assert re.fullmatch(described, corpus.describe())


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
             (tmp_path / "empty", "holds no .txt files"),
             (tmp_path / "blank.txt", "found no text in your file")]
    for path, message in cases:
        with pytest.raises(CourseError, match=message) as failure:
            prepare_corpus("wiki-sample", tmp_path / "data", text_file=str(path))
        assert "\n" not in str(failure.value)
    assert list((tmp_path / "data" / "corpora").iterdir()) == []  # no half-written cache


def test_unknown_corpus_lists_the_choices(tmp_path):
    with pytest.raises(CourseError,
                       match="unknown corpus 'shakespeare'; choose one of wiki-sample, tinyshakespeare"):
        prepare_corpus("shakespeare", tmp_path)


# --- the registry, downloads and the cache ---------------------------------------------------------------

def test_registry_entries_are_pinned_or_say_why_not():
    assert corpus_names()[:2] == ["wiki-sample", "tinyshakespeare"]
    for name in ["wikitext-2", "wikitext-103", "tinystories", "tinystories-full", "gutenberg-austen",
                 "books"]:
        assert name in corpus_names()
    for name, source in corpora.SOURCES.items():
        assert source.url.startswith("https://"), name
        assert source.size is not None or "recorded" in source.note, name
        assert (source.sha256 is not None and re.fullmatch(r"[0-9a-f]{64}", source.sha256)) or \
            "recorded" in source.note, name
    assert corpora.SOURCES["tinyshakespeare"].size == 1_115_394
    books = corpora.BUNDLES["books"].members
    assert len(books) >= 5 and all(corpora.SOURCES[member].reader is gutenberg_chapters for member in books)


PROSE = "A chapter long enough to be more than an entry in the table of contents. " * 8


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
    book_a.write_text(f"*** START OF THE PROJECT GUTENBERG EBOOK A ***\n\nCHAPTER 1\n\n{PROSE}\n\n"
                      f"CHAPTER 2\n\n{PROSE}\n*** END OF THE PROJECT GUTENBERG EBOOK A ***\n",
                      encoding="utf-8")
    book_b.write_text(f"*** START OF THE PROJECT GUTENBERG EBOOK B ***\n\nCHAPTER 1\n\n{PROSE}\n"
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


def test_open_corpus_reads_a_prepared_cache(tmp_path):
    prepared = prepare_corpus("wiki-sample", tmp_path)
    reopened = open_corpus(prepared.path)
    assert reopened == prepared
    assert next(reopened.iter_documents()) == next(prepared.iter_documents())
    with pytest.raises(CourseError, match="run download_data.py again"):
        open_corpus(tmp_path / "corpora" / "gone.jsonl")
