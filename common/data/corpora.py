"""Text for the course to learn from: named downloads, an embedded Wikipedia sample, or your own files.

The corpus is where every chapter starts: corpus → tokenizer → token files → batches → model → checkpoint.
This module knows which corpora exist, where their text comes from, and keeps each one parsed in a cache;
it leaves reading each file format to parsers.py, and cutting documents into sentences to sentences.py.

    corpus = prepare_corpus("wiki-sample", data_dir)        # or "books", "tinyshakespeare", ...
    print(corpus.describe())                                # wiki-sample: 101 articles, ... (embedded, ...)
    for document in corpus.iter_documents(): ...

A corpus is a sequence of documents. A document is plain text whose paragraphs are separated by one
blank line ("\\n\\n"); inside a paragraph a single "\\n" may occur (verse, a speaker's lines). Documents
matter downstream: GPT puts <|endoftext|> between them, BERT takes its random "not the next sentence"
from a different one, and the train/val split assigns whole documents.

Every corpus is parsed once into a canonical cache, data_dir/"corpora"/"<slug>.jsonl" with one
{"text": document} per line, plus "<slug>.json" with its counts; later runs stream the cache and never
touch the raw text (or the network) again. Delete data/corpora to force a rebuild.

Your own text (--TEXT_FILE) follows one simple rule:
  * a folder: every .txt file in it (searched recursively, in sorted order) is one document;
  * a single file: two or more blank lines in a row end a document, one blank line ends a paragraph.
    A file without such double gaps is one document.
"""

import bz2
import hashlib
import importlib.util
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from types import SimpleNamespace

from common.data.download import download, extract_member
from common.errors import CourseError
from common.files import write_atomic
from common.data.parsers import (
    gutenberg_chapters,
    tinyshakespeare_speeches,
    tinystories_stories,
    wiki_paragraphs,
    wikitext_articles,
)
from common.progress import progress_bar


@dataclass(frozen=True)
class Corpus:
    """A prepared corpus: where its cache lives and what it holds."""

    name: str  # e.g. "wiki-sample", "tinyshakespeare", "file:notes"
    path: Path  # the cache: one {"text": document} per line
    documents: int
    characters: int
    words: int  # whitespace-separated pieces
    unit: str = "document"  # what one document is, for describe(): "article", "speech", "chapter" ...
    origin: str = ""  # where the text came from, for describe()

    def iter_documents(self) -> Iterator[str]:
        """Stream the documents from the cache, one at a time, so memory stays flat for any corpus size."""
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)["text"]

    def describe(self) -> str:
        unit = self.unit if self.documents == 1 else _plural(self.unit)
        return (f"{self.name}: {self.documents:,} {unit}, {self.characters:,} characters, "
                f"{self.words:,} words ({self.origin})")


def _plural(noun: str) -> str:
    if noun.endswith("y"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("ch", "s")) else "s")


# --- the registry of downloadable corpora -------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """A corpus we download: the file, the size and sha256 that pin it, and how to read documents from it."""

    url: str
    filename: str  # saved as data_dir/"downloads"/filename
    size: int | None  # bytes; None only where `note` says why
    sha256: str | None  # None: recorded on the first download and required from then on
    reader: Callable[[Path], Iterator[str]]  # the downloaded (or extracted) file -> its documents
    unit: str
    about: str
    member: str | None = None  # for a zip archive: the file inside it that holds the text
    note: str = ""  # why size or sha256 are not pinned


def _gutenberg(number: int, title: str) -> Source:
    return Source(
        url=f"https://www.gutenberg.org/cache/epub/{number}/pg{number}.txt",
        filename=f"pg{number}.txt", size=None, sha256=None, reader=gutenberg_chapters, unit="chapter",
        about=f"{title}, Project Gutenberg #{number}",
        note="sha256 recorded on first download, size left open: Project Gutenberg regenerates its files "
             "now and then",
    )


def _tinystories(split: str, size: int, sha256: str) -> Source:
    """TinyStories V2 (stories written by GPT-4 only), as published on the Hugging Face hub."""
    filename = f"TinyStoriesV2-GPT4-{split}.txt"
    return Source(
        url=f"https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/{filename}",
        filename=filename, size=size, sha256=sha256, reader=tinystories_stories, unit="story",
        about=f"TinyStories V2 (GPT-4 stories), {'validation' if split == 'valid' else 'training'} file",
        note="sha256 is the Git LFS oid the Hugging Face hub publishes for the file",
    )

SOURCES: dict[str, Source] = {
    "tinyshakespeare": Source(
        url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        filename="tinyshakespeare.txt", size=1_115_394,
        sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        reader=tinyshakespeare_speeches, unit="speech", about="Tiny Shakespeare from karpathy/char-rnn",
    ),
    "wikitext-2": Source(
        url="https://huggingface.co/datasets/ggml-org/ci/resolve/main/wikitext-2-raw-v1.zip",
        filename="wikitext-2-raw-v1.zip", size=4_721_645,
        sha256="ef7edb566e3e2b2d31b29c1fdb0c89a4cc683597484c3dc2517919c615435a11",
        member="wikitext-2-raw/wiki.train.raw", reader=wikitext_articles, unit="article",
        about="WikiText-2 raw, training split (valid/test left untouched for comparisons)",
    ),
    "wikitext-103": Source(
        url="https://wikitext.smerity.com/wikitext-103-raw-v1.zip",  # the dataset author's own host
        filename="wikitext-103-raw-v1.zip", size=191_984_949,
        sha256="91c00ae287f0d699e18605c84afc9e45c192bc6b7797ff8837e5474655a33794",
        member="wikitext-103-raw/wiki.train.raw", reader=wikitext_articles, unit="article",
        about="WikiText-103 raw, training split (valid/test left untouched for comparisons)",
        note="sha256 as published for the original Salesforce archive (mlx-data, Julia's WikiText loaders)",
    ),
    "tinystories": _tinystories("valid", 22_502_601,
                                "6874bae9a4c1a4e7edcf0e53b86c17817e9cf881fc75ff2368da457b80c0585d"),
    "tinystories-full": _tinystories("train", 2_227_753_162,
                                     "6418d412de72888f52b5142c761ac21a582f7d1166f0bfbdb5f03ccfdec90443"),
    "gutenberg-austen": _gutenberg(1342, "Pride and Prejudice by Jane Austen"),
    "gutenberg-bronte": _gutenberg(1260, "Jane Eyre by Charlotte Brontë"),
    "gutenberg-dickens": _gutenberg(1400, "Great Expectations by Charles Dickens"),
    "gutenberg-doyle": _gutenberg(1661, "The Adventures of Sherlock Holmes by Arthur Conan Doyle"),
    "gutenberg-melville": _gutenberg(2701, "Moby Dick by Herman Melville"),
    "gutenberg-shelley": _gutenberg(84, "Frankenstein by Mary Shelley"),
    "gutenberg-stoker": _gutenberg(345, "Dracula by Bram Stoker"),
    "gutenberg-twain": _gutenberg(76, "Adventures of Huckleberry Finn by Mark Twain"),
}

@dataclass(frozen=True)
class Bundle:
    """Several sources read as one corpus, in order."""

    members: tuple[str, ...]
    about: str


BUNDLES: dict[str, Bundle] = {
    # Chapter 1's "BooksCorpus in spirit": GPT-1 pre-trained on long stretches of contiguous fiction.
    "books": Bundle(tuple(name for name in SOURCES if name.startswith("gutenberg-")),
                    "novels from Project Gutenberg"),
}

WIKI_SAMPLE = "wiki-sample"


def corpus_names() -> list[str]:
    return [WIKI_SAMPLE, *SOURCES, *BUNDLES]


def choose_corpus(cfg: SimpleNamespace, larger: str) -> str:
    """The corpus a run reads, and one line that says which and why.

    The default is the embedded wiki-sample, online or offline: every result in the chapter's README and its
    reference.json was measured on it, so the default run is the run the README describes. A bigger corpus
    (`larger` names the chapter's suggestion) is the learner's choice, and the line says that its numbers
    have nothing to be compared with.
    """
    if cfg.CORPUS == WIKI_SAMPLE and not cfg.TEXT_FILE:
        print(f"corpus: {WIKI_SAMPLE}, embedded (no download): the corpus this chapter's README and "
              f"reference.json were measured on; --CORPUS={larger} reads a larger one")
        return WIKI_SAMPLE
    chosen = f"your text {cfg.TEXT_FILE}" if cfg.TEXT_FILE else f"{cfg.CORPUS}, not the default"
    print(f"corpus: {chosen}; the README's numbers and reference.json have no row for it (the README's run "
          f"reads {WIKI_SAMPLE}: leave out --CORPUS and --TEXT_FILE)")
    return cfg.CORPUS


# --- preparing a corpus -------------------------------------------------------------------------------

def prepare_corpus(name: str, data_dir: Path, text_file: str | None = None) -> Corpus:
    """Return the corpus called `name` (or the text in `text_file`, which wins), building its cache once."""
    data_dir = Path(data_dir)
    if text_file:
        return _own_text(Path(text_file), data_dir)
    if name == WIKI_SAMPLE:
        return _cached(name, name, data_dir, wiki_sample_documents, "article", "embedded, no download")
    if name in SOURCES:
        source = SOURCES[name]
        return _cached(name, name, data_dir, lambda: _downloaded_documents(source, data_dir), source.unit,
                       source.about)
    if name in BUNDLES:
        bundle = BUNDLES[name]
        members = [SOURCES[member] for member in bundle.members]

        def documents() -> Iterator[str]:
            return chain.from_iterable(_downloaded_documents(member, data_dir) for member in members)

        return _cached(name, name, data_dir, documents, members[0].unit, f"{len(members)} {bundle.about}")
    raise CourseError(f"error: unknown corpus {name!r}; choose one of {', '.join(corpus_names())}, "
                      "or give your own text with --TEXT_FILE=path")


def open_corpus(path: Path) -> Corpus:
    """A corpus prepared earlier, from its cache file (as recorded in a prepared dataset's meta.json)."""
    path = Path(path)
    stats_path = path.with_suffix(".json")
    if not (path.exists() and stats_path.exists()):
        raise CourseError(f"error: the corpus cache {path} is gone; run download_data.py again to rebuild it")
    return Corpus(path=path, **json.loads(stats_path.read_text(encoding="utf-8")))


def _downloaded_documents(source: Source, data_dir: Path) -> Iterator[str]:
    downloads = data_dir / "downloads"
    path = download(source.url, downloads / source.filename, size=source.size, sha256=source.sha256)
    if source.member:
        path = extract_member(path, source.member, downloads)
    yield from source.reader(path)


def _cached(name: str, slug: str, data_dir: Path, documents: Callable[[], Iterable[str]], unit: str,
            origin: str) -> Corpus:
    """The corpus from its cache; on the first call, build the cache from `documents()`."""
    path = data_dir / "corpora" / f"{slug}.jsonl"
    if path.exists() and path.with_suffix(".json").exists():
        return open_corpus(path)
    print(f"preparing corpus {name} ({origin}) ...")
    return _write_cache(documents(), path, name, unit, origin)


def _write_cache(documents: Iterable[str], path: Path, name: str, unit: str, origin: str) -> Corpus:
    """Stream `documents` into the JSONL cache, counting as we go; the files appear only when complete.

    The counts file is renamed into place before the JSONL, so a JSONL on disk always has its counts.
    """
    made: list[Corpus] = []  # filled inside the atomic write, once the documents are counted

    def write_documents(tmp: Path) -> None:
        count = characters = words = 0
        with open(tmp, "w", encoding="utf-8") as f:
            for document in progress_bar(documents, desc=name, unit=" docs"):
                f.write(json.dumps({"text": document}, ensure_ascii=False) + "\n")
                count, characters, words = count + 1, characters + len(document), words + len(document.split())
        if count == 0:
            raise CourseError(f"error: found no text in {origin}; a corpus needs at least one paragraph")
        made.append(Corpus(name, path, count, characters, words, unit, origin))
        stats = {key: value for key, value in asdict(made[0]).items() if key != "path"}
        write_atomic(path.with_suffix(".json"), json.dumps(stats, indent=2) + "\n")

    write_atomic(path, write_documents)
    return made[0]


# --- your own text ------------------------------------------------------------------------------------

def _own_text(path: Path, data_dir: Path) -> Corpus:
    """A corpus from a .txt file or a folder of them, cached under a name that changes when they change."""
    if not path.exists():
        raise CourseError(f"error: {path} does not exist; point --TEXT_FILE at a .txt file or a folder")
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        if not files:
            raise CourseError(f"error: {path} holds no .txt files; add some, or point --TEXT_FILE "
                              f"at one file")

        def documents() -> Iterator[str]:
            return (document for document in map(_whole_file_document, files) if document)

        origin, unit = f"your folder {path}, {len(files)} .txt files", "file"
    else:
        files = [path]

        def documents() -> Iterator[str]:
            return _text_file_documents(path)

        origin, unit = f"your file {path}", "document"
    name = path.resolve().stem
    slug = f"file-{re.sub(r'[^A-Za-z0-9_-]+', '-', name)}-{_fingerprint(files)}"
    return _cached(f"file:{name}", slug, data_dir, documents, unit, origin)


def _fingerprint(files: list[Path]) -> str:
    """Ten hex digits that change whenever a file is edited, added, removed or renamed."""
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        digest.update(f"{file.resolve()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:10]


def _text_file_documents(path: Path) -> Iterator[str]:
    """Documents of one file: two or more blank lines end a document, one blank line ends a paragraph."""
    paragraphs: list[str] = []
    for paragraph, blank_lines_before in _paragraphs_of_lines(_utf8_lines(path)):
        if blank_lines_before >= 2 and paragraphs:
            yield "\n\n".join(paragraphs)
            paragraphs = []
        paragraphs.append(paragraph)
    if paragraphs:
        yield "\n\n".join(paragraphs)


def _whole_file_document(path: Path) -> str:
    return "\n\n".join(paragraph for paragraph, _ in _paragraphs_of_lines(_utf8_lines(path)))


def _paragraphs_of_lines(lines: Iterable[str]) -> Iterator[tuple[str, int]]:
    """Yield (paragraph, number of blank lines before it); lines inside a paragraph keep their breaks."""
    current: list[str] = []
    blanks = 0  # blank lines seen since the last text line
    before = 0  # blank lines that preceded the current paragraph
    for line in lines:
        line = line.rstrip()  # drops "\n", "\r\n" and trailing spaces; whitespace-only lines become blank
        if not line:
            blanks += 1
            continue
        if blanks and current:
            yield "\n".join(current), before
            current = []
        if not current:
            before = blanks
        current.append(line)
        blanks = 0
    if current:
        yield "\n".join(current), before


def _utf8_lines(path: Path) -> Iterator[str]:
    try:
        with open(path, encoding="utf-8-sig") as f:  # -sig: ignore the byte-order mark some editors add
            yield from f
    except UnicodeDecodeError:
        raise CourseError(f"error: {path} is not UTF-8 text; save it as UTF-8 (for example: "
                          f"iconv -f latin1 -t utf-8 {path} > {path.stem}-utf8.txt)") from None


# --- wiki-sample: real Wikipedia articles that ship inside gensim ------------------------------------

# gensim's tests include the first ~100 articles of an English Wikipedia dump (2016); gensim is a course
# dependency, so this corpus is always there, offline.
WIKI_DUMP = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def wiki_sample_documents() -> Iterator[str]:
    """The articles of gensim's Wikipedia sample as clean prose, one document per article."""
    for _title, wikitext in wiki_sample_articles():
        paragraphs = wiki_paragraphs(wikitext)
        if paragraphs:
            yield "\n\n".join(paragraphs)


def wiki_sample_articles() -> Iterator[tuple[str, str]]:
    """(title, wikitext) of every real article in the dump: no redirects, talk or project pages."""
    with bz2.open(_wiki_dump_path()) as f:
        for _event, element in ET.iterparse(f):
            if element.tag.rsplit("}", 1)[-1] != "page":
                continue
            title = element.findtext("{*}title")
            wikitext = element.findtext("{*}revision/{*}text") or ""
            is_article = element.findtext("{*}ns") == "0" and element.find("{*}redirect") is None
            if is_article and not title.endswith("(disambiguation)"):  # disambiguation pages are link lists
                yield title, wikitext
            element.clear()  # iterparse keeps what it built: free each page once read


def _wiki_dump_path() -> Path:
    """Locate the dump inside the installed gensim package without importing gensim (that takes seconds)."""
    spec = importlib.util.find_spec("gensim")
    path = Path(spec.submodule_search_locations[0]) / WIKI_DUMP if spec else None
    if path is None or not path.exists():
        raise CourseError("error: wiki-sample is read from gensim's test data, but gensim is missing; "
                          "run: uv sync")
    return path
