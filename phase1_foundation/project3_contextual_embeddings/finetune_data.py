"""The labelled tasks finetune.py fine-tunes on: lists of Examples, a text (or two) and the label people gave.

    polarity   200 sentences of movie reviews, positive or negative (Pang & Lee 2005's sentence-polarity data,
               the source the Stanford Sentiment Treebank was built from), shipped in the gensim wheel the
               course already installs: offline, the default
    sst2       SST-2 (Socher et al. 2013, in GLUE): sentences of movie reviews, positive or negative
    mrpc       MRPC (Dolan & Brockett 2005): pairs of sentences from the news, paraphrases or not
    TASK_FILE  your own: one example a line, text<TAB>label or text<TAB>text_b<TAB>label, no header line

sst2 and mrpc are downloaded once from their canonical URLs, pinned by size and sha256. A downloaded task
comes with a test split (SST-2's GLUE dev set, as GLUE keeps its test labels private; MRPC's test file); the
others have none, and finetune.py tests every example once by k-fold cross-validation.
"""

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from common.data.download import download, extract_member
from common.errors import CourseError


class Example(NamedTuple):
    text: str
    text_b: str | None  # the second sentence of a pair task, None for a single sentence
    label: str


@dataclass
class Task:
    name: str
    about: str  # what a label means, for the printout
    train: list[Example]
    test: list[Example] | None  # None: k-fold cross-validation over train

    @property
    def labels(self) -> list[str]:
        return sorted({e.label for e in self.train})


class Pinned(NamedTuple):
    url: str
    size: int
    sha256: str


# The files' sizes and sha256 as tensorflow-datasets pins them (its url_checksums).
SST2_ZIP = Pinned("https://dl.fbaipublicfiles.com/glue/data/SST-2.zip", 7_439_277,
                  "d67e16fb55739c1b32cdce9877596db1c127dc322d93c082281f64057c16deaa")
MRPC_TRAIN = Pinned("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt",
                    1_047_044, "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89")
MRPC_TEST = Pinned("https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_test.txt",
                   441_275, "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784")
OFFLINE = "the default task needs no download: leave out --TASK (or give your own with --TASK_FILE)"
TASKS = ("polarity", "sst2", "mrpc")


def fetch(pinned: Pinned, downloads: Path) -> Path:
    return download(pinned.url, downloads / Path(pinned.url).name, size=pinned.size, sha256=pinned.sha256,
                    hint=OFFLINE)


def shipped(name: str) -> Path:
    """A file of labelled data that the gensim wheel ships with its tests (gensim/test/test_data)."""
    spec = importlib.util.find_spec("gensim")  # its path only: importing gensim takes seconds
    if spec is None:
        raise CourseError(f"error: {name} is read from the gensim package; run `uv sync` to install it")
    return Path(spec.submodule_search_locations[0]) / "test" / "test_data" / name


def polarity() -> Task:
    """Pang & Lee's sentences as gensim's tests ship them: `__label__pos text` a line, lower-cased and
    split into words and punctuation, in the Windows-1252 encoding of Pang & Lee's files."""
    path = shipped("pang_lee_polarity.cor")
    examples = []
    for line in path.read_text(encoding="cp1252").splitlines():  # Windows' Latin: "\x97" is an em dash
        label, text = line.split(" ", 1)
        examples.append(Example(text.strip(), None, label.removeprefix("__label__")))
    return Task("polarity", "is this sentence of a movie review positive (pos) or negative (neg)?",
                examples, None)


def sst2(downloads: Path) -> Task:
    """GLUE's SST-2: train.tsv and dev.tsv, `sentence<TAB>label` under a header, label 1 positive."""
    archive = fetch(SST2_ZIP, downloads)
    split = {}
    for name in ("train", "dev"):
        path = extract_member(archive, f"SST-2/{name}.tsv", downloads)
        lines = path.read_text(encoding="utf-8").splitlines()[1:]
        rows = [line.split("\t") for line in lines if line.strip()]
        split[name] = [Example(text, None, {"0": "negative", "1": "positive"}[label]) for text, label in rows]
    return Task("sst2", "is this sentence of a movie review positive or negative?", split["train"],
                split["dev"])


def mrpc(downloads: Path) -> Task:
    """MRPC's train and test files: `Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String` under a
    header, Quality 1 where people judged the two sentences paraphrases of each other."""
    split = {}
    for name, pinned in (("train", MRPC_TRAIN), ("test", MRPC_TEST)):
        # utf-8-sig: the files begin with a byte-order mark. Not the csv module: a quote is text here.
        lines = fetch(pinned, downloads).read_text(encoding="utf-8-sig").splitlines()[1:]
        rows = [line.split("\t") for line in lines if line.strip()]
        split[name] = [Example(a, b, {"0": "different", "1": "paraphrase"}[q]) for q, _, _, a, b in rows]
    return Task("mrpc", "do the two sentences say the same thing (paraphrase) or not (different)?",
                split["train"], split["test"])


def read_task_file(path: Path, folds: int) -> Task:
    """Your task: `text<TAB>label` or `text<TAB>text_b<TAB>label` a line, every line alike, no header.
    A row that breaks the format ends the program with one line naming it."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CourseError(f"error: --TASK_FILE {path} does not exist") from None
    except UnicodeDecodeError as e:
        raise CourseError(f"error: --TASK_FILE {path} is not UTF-8 text ({e.reason} at byte {e.start}); "
                          "save it as UTF-8") from None
    examples, width, rows = [], None, {}
    for row, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        width = width or len(fields)
        if len(fields) not in (2, 3) or len(fields) != width or not all(f.strip() for f in fields):
            raise CourseError(f"error: row {row} of {path} is not text<TAB>label or "
                              f"text<TAB>text_b<TAB>label "
                              f"like the rows before it (it has {len(fields)} tab-separated fields"
                              f"{', one of them empty' if len(fields) in (2, 3) else ''}): {line[:60]!r}")
        text, *text_b, label = (f.strip() for f in fields)
        examples.append(Example(text, text_b[0] if text_b else None, label))
        rows.setdefault(label, row)
    task = Task(Path(path).stem, "the labels of your file", examples, None)
    if len(task.labels) < 2:
        raise CourseError(f"error: {path} has one label ({task.labels[0] if task.labels else 'no rows'}); "
                          "a classifier needs examples of at least two")
    for label in task.labels:
        count = sum(e.label == label for e in examples)
        if count < folds:
            raise CourseError(f"error: label {label!r} of {path} (first at row {rows[label]}) has {count} "
                              f"example(s); {folds}-fold cross-validation needs at least {folds} of each "
                              "(a header line? delete it)")
    return task


def load_task(name: str, task_file: str | None, downloads: Path, folds: int) -> Task:
    if task_file:
        return read_task_file(Path(task_file), folds)
    if name not in TASKS:
        raise CourseError(f"error: unknown --TASK {name!r}; choose one of {', '.join(TASKS)}, "
                          "or give your own with --TASK_FILE")
    return {"polarity": polarity, "sst2": lambda: sst2(downloads), "mrpc": lambda: mrpc(downloads)}[name]()
