"""Paragraphs and sentences of a document, for the tasks that are built from sentences.

Language modelling reads whole documents, but some tasks are made of sentences: they are cut here, after
the corpus and before the tokenizer in corpus → tokenizer → token files → batches → model → checkpoint.
"""

import re


def split_paragraphs(document: str) -> list[str]:
    """The paragraphs of a document: blocks separated by blank lines."""
    return [p.strip() for p in re.split(r"\n\s*\n", document) if p.strip()]


# Words that end in a period without ending the sentence. Single capitals (initials: "J. R. R. Tolkien")
# and dotted forms ("U.S.", "e.g.", "Ph.D.") are recognised by shape, see _ends_sentence.
ABBREVIATIONS = frozenset("""
    mr mrs ms messrs dr prof rev hon sr jr st mt ft gen col maj capt lt sgt gov sen rep pres
    vs cf al approx ca fig figs vol vols pp inc ltd co corp bros dept univ
""".split())
SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+")  # terminator, closing quotes or brackets, then space
OPENERS = "\"'“‘(["
LAST_WORD = re.compile(r"\S*\Z")


def split_sentences(paragraph: str) -> list[str]:
    """Split a paragraph into sentences, well enough for next-sentence prediction on Wikipedia prose.

    A sentence ends at ".", "!" or "?" (plus any closing quotes or brackets) followed by a space and a
    capital letter, unless the word before the period is an abbreviation, an initial or a dotted form.
    So "3.14" (no space), "No. 5" (a digit follows) and "e.g. the" (lowercase follows) never split. A
    sentence starting with a digit is therefore glued to the one before: rare in edited prose.
    """
    sentences, start = [], 0
    for match in SENTENCE_END.finditer(paragraph):
        if _ends_sentence(paragraph, match.start(), match.end()):
            sentences.append(paragraph[start:match.end()].strip())
            start = match.end()
    sentences.append(paragraph[start:].strip())
    return [s for s in sentences if s]


def _ends_sentence(text: str, stop: int, next_start: int) -> bool:
    """Does the terminator at text[stop] end a sentence, given that the next one would begin at next_start?

    Only a few characters on either side are looked at, so splitting stays linear in the paragraph length.
    """
    following = text[next_start:next_start + 8].lstrip(OPENERS)
    if not following[:1].isupper():
        return False
    if text[stop] in "!?":
        return True
    word = LAST_WORD.search(text, max(0, stop - 30), stop).group().lstrip(OPENERS)
    is_initial = len(word) == 1 and word.isupper()
    is_dotted = "." in word and all(len(part) <= 2 for part in word.split("."))
    return not (word.lower() in ABBREVIATIONS or is_initial or is_dotted)


def document_sentences(text: str) -> list[str]:
    """A document's sentences, paragraph by paragraph, in order.

    Chapter 1 (its fine-tuning questions) and chapter 3 (its next-sentence pairs) both cut documents into
    sentences this way; one function keeps the two from drifting apart. No sentence runs across a paragraph
    break, and a line break inside a paragraph (verse, a speaker's lines) becomes a space, so no sentence
    holds a newline.
    """
    return [s for p in split_paragraphs(text) for s in split_sentences(p.replace("\n", " "))]
