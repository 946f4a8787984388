"""Format parsers: each turns a downloaded file (or one article's wiki markup) into documents.

The first step of corpus → tokenizer → token files → batches → model → checkpoint is a corpus, and every
source publishes its text its own way: speeches between blank lines, " = Title = " lines, <|endoftext|>
markers, a novel wrapped in a licence, wiki markup. A parser undoes one such format and yields documents
in the one shape the rest of the course reads (paragraphs separated by one blank line); corpora.py runs
it once per corpus and caches what it yields.
"""

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from common.errors import CourseError

# --- downloaded files -> documents --------------------------------------------------------------------

def tinyshakespeare_speeches(path: Path) -> Iterator[str]:
    """Tiny Shakespeare: every blank-line separated block is one speech (speaker's name, then the lines)."""
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        if block.strip():
            yield block.strip()


WIKITEXT_TITLE = re.compile(r"= (?!=).*(?<!=) =")  # " = Title = " starts an article, " = = Section = = " not


def wikitext_articles(path: Path) -> Iterator[str]:
    """WikiText: an article starts at a line " = Title = "; every other non-blank line is a paragraph.

    Section headings (" = = History = = ") and titles are dropped: they are not sentences. WikiText's
    split-number markers ("1 @,@ 000", "well @-@ known") are joined back; its other tokenization spaces
    ("the game 's") stay as published.
    """
    paragraphs: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if WIKITEXT_TITLE.fullmatch(line):
                if paragraphs:
                    yield "\n\n".join(paragraphs)
                paragraphs = []
            elif line and not line.startswith("="):
                paragraphs.append(line.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", "."))
    if paragraphs:
        yield "\n\n".join(paragraphs)


END_OF_TEXT = "<|endoftext|>"


def tinystories_stories(path: Path) -> Iterator[str]:
    """TinyStories: stories separated by <|endoftext|>; each non-empty line of a story is one paragraph."""
    pieces: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            *finished, rest = line.split(END_OF_TEXT)
            for piece in finished:
                story = _lines_as_paragraphs(pieces + [piece])
                pieces = []
                if story:
                    yield story
            pieces.append(rest)
    story = _lines_as_paragraphs(pieces)
    if story:
        yield story


def _lines_as_paragraphs(pieces: list[str]) -> str:
    return "\n\n".join(line.strip() for line in "".join(pieces).splitlines() if line.strip())


GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (?:THE|THIS) PROJECT GUTENBERG E?BOOK.*$", re.I | re.M)
GUTENBERG_END = re.compile(r"^\*\*\* ?END OF (?:THE|THIS) PROJECT GUTENBERG E?BOOK", re.I | re.M)
# A chapter heading is a short block whose first line is like "CHAPTER I.", "Chapter 12", "Letter 4",
# "STAVE ONE", "BOOK II" or "I. A SCANDAL IN BOHEMIA" (possibly inside an illustration's brackets),
# optionally followed by a title line.
NUMBER = (r"(?:\d+|[ivxlcdm]+|(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
          r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty)(?:-\w+)?)")
CHAPTER_HEADING = re.compile(
    rf"(?i:(?:chapter|letter|stave|book|volume|part)\s+{NUMBER}\b).*"  # CHAPTER I. / Letter 4 / STAVE ONE
    r"|[IVXLCDM]+\.(?:\s.*)?"  # I. A SCANDAL IN BOHEMIA (capitals only: "I." starting prose is rare)
)
MAX_HEADING_CHARS = 100
# "[Illustration]" or "[Illustration: caption ... [_Copyright 1894 ..._]]", one level of nesting, any lines
ILLUSTRATION = re.compile(r"\s*\[Illustration(?:[^\[\]]|\[[^\[\]]*\])*\]\s*")
MIN_CHAPTER_CHARS = 500  # shorter "chapters" are table-of-contents entries


def gutenberg_chapters(path: Path) -> Iterator[str]:
    """A Project Gutenberg novel: its chapters, without licence, front matter, illustrations or hard wraps.

    The licence header and footer are cut at the "*** START/END OF THE PROJECT GUTENBERG EBOOK" lines.
    Text before the first chapter heading (title page, contents, an editor's preface) is dropped.
    """
    text = path.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    start, end = GUTENBERG_START.search(text), GUTENBERG_END.search(text)
    if not (start and end):
        raise CourseError(f"error: {path} is not a Project Gutenberg text (no START/END lines); "
                          "delete it and run again to download it afresh")
    chapters: list[list[str]] = []  # the blocks of each chapter; nothing is kept before the first heading
    for block in re.split(r"\n\s*\n", text[start.end():end.start()]):
        if _is_chapter_heading(block):
            chapters.append([])
        elif chapters:
            chapters[-1].append(block)
    for blocks in chapters:
        if document := _gutenberg_chapter_text(blocks):
            yield document


def _is_chapter_heading(block: str) -> bool:
    lines = block.strip().strip("[]").split("\n")
    return (len(lines) <= 2 and len(block.strip()) <= MAX_HEADING_CHARS
            and CHAPTER_HEADING.fullmatch(lines[0].strip()) is not None)


def _gutenberg_chapter_text(blocks: list[str]) -> str:
    """The chapter as one document, or "" if it is too short to be more than a table-of-contents entry."""
    text = ILLUSTRATION.sub("\n\n", "\n\n".join(blocks))
    paragraphs: list[str] = []
    for block in text.split("\n\n"):
        paragraph = " ".join(block.split())  # unwrap the hard-wrapped lines
        paragraph = paragraph.replace("_", "")  # Gutenberg marks _italics_ with underscores
        if not paragraph:
            continue
        if paragraphs and paragraph[0].islower():  # an illustration had split this paragraph in two
            paragraphs[-1] += " " + paragraph
        else:
            paragraphs.append(paragraph)
    document = "\n\n".join(paragraphs)
    return document if len(document) >= MIN_CHAPTER_CHARS else ""


# --- wiki markup: one article's markup -> its prose paragraphs ----------------------------------------

# Sections from these on hold links and citations, not prose; we stop reading an article there.
END_SECTIONS = ("see also", "references", "notes", "external links", "further reading", "bibliography",
                "sources", "citations", "footnotes", "works cited", "notes and references")
MIN_PARAGRAPH_CHARS = 40  # shorter leftovers are captions, list items and fragments, not prose
DROP = "\x00"  # put in place of a formula or code block: the paragraph around it is dropped


def wiki_paragraphs(wikitext: str) -> list[str]:
    """Turn one article's wiki markup into its prose paragraphs (headings and lists end a paragraph)."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in _strip_wiki_markup(wikitext).split("\n"):
        line = line.strip()
        heading = re.fullmatch(r"(=+)\s*(.*?)\s*\1", line)
        if heading and heading.group(2).lower() in END_SECTIONS:
            break
        if not line or heading or line[0] in "*#:;|!":  # a new block starts: finish the paragraph
            paragraphs.append(" ".join(current))
            current = []
            if line[:1] in ("*", "#", ":", ";"):  # a list item becomes a paragraph of its own
                paragraphs.append(line.lstrip("*#:; "))
            continue
        current.append(line)
    paragraphs.append(" ".join(current))
    cleaned = (_tidy(p) for p in paragraphs)
    # "ISBN": a citation in a list of works, which is not prose either
    return [p for p in cleaned if len(p) >= MIN_PARAGRAPH_CHARS and DROP not in p and "ISBN" not in p]


def _strip_wiki_markup(text: str) -> str:
    """Remove everything that is not running text: comments, references, templates, tables, files, tags."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"<ref[^>]*/>", "", text, flags=re.I)  # <ref name="x"/> first: it has no closing tag
    text = re.sub(r"<ref[^>]*>.*?</ref\s*>", "", text, flags=re.I | re.S)
    blocks = "math|chem|syntaxhighlight|source|pre|score|timeline|gallery|imagemap|hiero"
    text = re.sub(rf"<({blocks})\b.*?</\1\s*>", DROP, text, flags=re.I | re.S)
    text = _replace_nested(text, "[[", "]]", _link_text)  # image captions hold links: [[File:a|b [[c]]]]
    text = _replace_nested(text, "{{", "}}", _template_text)  # templates nest: {{a|{{b}}}}
    text = _replace_nested(text, "{|", "|}", lambda table: "")  # so do tables
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.I)
    text = re.sub(r"</?[a-zA-Z][^>]*>", "", text)  # other tags go, their text stays: <small>x</small> -> x
    text = re.sub(r"\[(?:https?:)?//[^\s\]]+\s*([^\]]*)\]", r"\1", text)  # [http://x label] -> label
    text = re.sub(r"'{2,}", "", text)  # ''italic'', '''bold'''
    text = re.sub(r"__[A-Z]+__", "", text)  # __NOTOC__ and friends
    return html.unescape(text).replace("\xa0", " ")  # &nbsp; &ndash; ... -> characters


def _replace_nested(text: str, opener: str, closer: str, replace: Callable[[str], str]) -> str:
    """Replace each outermost opener...closer span by replace(what is inside), counting nested pairs.

    A regular expression cannot count, and templates, tables and links all nest. An opener that is
    never closed is kept as text.
    """
    pieces, depth, kept_until, inner_start = [], 0, 0, 0
    for match in re.finditer(f"{re.escape(opener)}|{re.escape(closer)}", text):
        if match.group() == opener:
            if depth == 0:
                pieces.append(text[kept_until:match.start()])
                inner_start, kept_until = match.end(), match.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                pieces.append(replace(text[inner_start:match.start()]))
                kept_until = match.end()
    pieces.append(text[kept_until:])
    return "".join(pieces)


# Templates whose text belongs to the sentence around them, and which positional argument holds it.
# {{convert|8,848|m|ft}} is handled on its own (-> "8,848 m"); every other template (citations,
# infoboxes, navigation boxes, pronunciations) is dropped.
INLINE_TEMPLATES = {"lang": -1, "transl": -1, "nowrap": 0, "small": 0, "smaller": 0, "quote": 0}
RANGE_WORDS = ("to", "-", "–", "and", "or", "by", "x")


def _template_text(template: str) -> str:
    """The words a template contributes to the prose: mostly none."""
    template = _replace_nested(template, "{{", "}}", _template_text)
    name, *args = (part.strip() for part in template.split("|"))
    positional = [arg for arg in args if "=" not in arg]  # named arguments are options, not text
    name = name.lower()
    if name == "convert" and len(positional) >= 2:
        if positional[1] in RANGE_WORDS and len(positional) >= 4:  # {{convert|2|to|3|km}}
            return " ".join(positional[:4])
        return f"{positional[0]} {positional[1]}"
    if name in INLINE_TEMPLATES and positional:
        return positional[INLINE_TEMPLATES[name]]
    return ""


def _link_text(link: str) -> str:
    """target|label -> label, target -> target; files, images, categories and other languages -> ""."""
    link = _replace_nested(link, "{{", "}}", _template_text)  # [[Edge of space|altitude of {{convert|..}}]]
    target, _, label = link.partition("|")
    if re.match(r"\s*(file|image|media|category)\s*:|[a-z]{2,3}(-[a-z]+)?:", target, flags=re.I):
        return ""
    return (label.rpartition("|")[2] if label else target).strip().lstrip(":")


def _tidy(paragraph: str) -> str:
    """Close the gaps that removed references and templates leave: "( )", "(, word", "word ,", spaces."""
    paragraph = re.sub(r"\(\s*[,;:]?\s*\)", "", paragraph)  # "( )" or "(; )" left by a removed pronunciation
    paragraph = re.sub(r"\(\s*[,;:]\s*", "(", paragraph)  # "(, Akhilleus" -> "(Akhilleus"
    paragraph = re.sub(r"\s+([,.;:!?)])", r"\1", paragraph)  # "word ," -> "word,"
    return " ".join(paragraph.split()).lstrip(".,;: ")

