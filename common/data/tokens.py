"""Token files: a corpus encoded once, then read by training straight from disk.

    out_dir/train.bin, out_dir/val.bin   raw token ids, documents one after another (np.uint16, or np.uint32
                                         for vocabularies over 65,536), each document followed by a
                                         separator token when one is given (GPT's <|endoftext|>)
    out_dir/meta.json                    dtype, token counts and how the split was made

`write_token_files` writes this flat stream, the format of the GPT chapters; a chapter whose model needs
more structure (BERT's sentence pairs) writes its own files beside the same two with `SplitWriter`. Training
reads the .bin files as memory maps (np.memmap): the operating system pages in the windows a batch touches,
so a corpus larger than RAM trains just as well. meta.json is written last; its presence means the folder is
complete.
"""

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from common.errors import CourseError
from common.files import write_atomic
from common.progress import progress_bar
from common.data.tokenizers import Tokenizer

SPLITS = ("train", "val")
CHUNK_TOKENS = 1 << 20  # tokens buffered in memory before they are written out (4 MiB as uint32)


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned type that holds every id: uint16 halves the files of vocabularies to 65,536."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class DocumentSplit:
    """Sends whole documents to train or val: a document goes to val whenever it fits in val's share so far
    (val tokens <= val_fraction of all tokens), to train otherwise.

    So val gets its fraction to within one document, spread evenly through the corpus, and no document is cut
    in two: val text is text the model never saw, not the other half of a page it trained on. (A coin flip
    per document would do the same on average, but on a corpus of a hundred articles it can hand val a single
    short one.) No randomness: the same documents, encoded the same way, always split the same way.
    """

    def __init__(self, val_fraction: float):
        if not 0 < val_fraction < 1:
            raise CourseError(f"error: --VAL_FRACTION={val_fraction} must be between 0 and 1, e.g. 0.05")
        self.val_fraction = val_fraction
        self.seen = 0  # tokens of every document so far
        self.val_seen = 0  # tokens of the documents sent to val

    def to_val(self, n_tokens: int) -> bool:
        """Does the next document, `n_tokens` long, go to val?"""
        self.seen += n_tokens
        if self.val_seen + n_tokens <= self.val_fraction * self.seen:
            self.val_seen += n_tokens
            return True
        return False


class _TokenFile:
    """Appends token arrays to one file, buffering up to `chunk_tokens` of them so memory stays bounded."""

    def __init__(self, path: Path, chunk_tokens: int):
        self.file = open(path, "wb")  # closed by close()
        self.chunk_tokens = chunk_tokens
        self.buffer: list[np.ndarray] = []
        self.buffered = 0
        self.tokens = 0  # written so far, buffer included

    def append(self, ids: np.ndarray) -> None:
        self.buffer.append(ids)
        self.buffered += len(ids)
        self.tokens += len(ids)
        if self.buffered >= self.chunk_tokens:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            np.concatenate(self.buffer).tofile(self.file)
        self.buffer, self.buffered = [], 0

    def close(self) -> None:
        self.flush()
        self.file.close()


class SplitWriter:
    """Writes a corpus, document by document, into out_dir/train.bin and val.bin, then meta.json:

        with SplitWriter(out_dir, tokenizer.vocab_size, val_fraction=0.05) as writer:
            for ids in encoded_documents:
                split = writer.write(ids)  # "train" or "val": the whole document goes to one split
            writer.publish({"corpus": name})  # other files of the chapter's format may be published with it

    Documents go whole to one split (DocumentSplit); an empty document is counted but written nowhere. Tokens
    are streamed to disk in chunks, so memory holds one chunk whatever the corpus size. Everything is written
    under temporary names and renamed by publish(), which writes meta.json last: its presence means the folder
    is complete, and an interrupted run leaves the previous files as they were.
    """

    def __init__(self, out_dir: Path, vocab_size: int, val_fraction: float, chunk_tokens: int = CHUNK_TOKENS):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.vocab_size = vocab_size
        self.dtype = token_dtype(vocab_size)
        self.chunk_tokens = chunk_tokens
        self.document_split = DocumentSplit(val_fraction)
        self.tmp = {split: self.out_dir / f"{split}.bin.tmp" for split in SPLITS}
        self.files = {split: _TokenFile(path, chunk_tokens) for split, path in self.tmp.items()}
        self.documents = 0  # every document written, empty ones included: an index into the corpus
        self.val_documents: list[int] = []  # the indices of those that went to val

    def write(self, ids: Sequence[int] | np.ndarray) -> str | None:
        """Append one document's token ids to train or val, and say which (None for an empty document)."""
        self.documents += 1
        if len(ids) == 0:
            return None
        split = "val" if self.document_split.to_val(len(ids)) else "train"
        if split == "val":
            self.val_documents.append(self.documents - 1)
        self.files[split].append(np.asarray(ids, dtype=self.dtype))
        return split

    def tokens(self, split: str) -> int:
        return self.files[split].tokens

    def publish(self, extra_meta: dict, files: dict[str, np.ndarray] | None = None) -> dict:
        """Close the token files; save `files` (name -> array, as .npy) beside them; rename everything into
        place and write meta.json last (files.write_atomic): the folder is complete exactly when it has one. Returns the meta as read_meta() gives it: dtype, counts, the split and
        `extra_meta`."""
        for file in self.files.values():
            file.close()
        for name, array in (files or {}).items():
            self.tmp[name] = self.out_dir / f"{name}.tmp"
            with open(self.tmp[name], "wb") as f:
                np.save(f, array)
        meta = {
            "dtype": self.dtype.name,
            "vocab_size": self.vocab_size,
            "train_tokens": self.tokens("train"),
            "val_tokens": self.tokens("val"),
            "documents": self.documents,
            "val_fraction": self.document_split.val_fraction,
            "val_documents": self.val_documents,
            **extra_meta,
        }
        if "corpus_path" in meta:  # recorded from this folder, so the two can move together
            meta["corpus_path"] = Path(os.path.relpath(meta["corpus_path"], self.out_dir)).as_posix()
        (self.out_dir / "meta.json").unlink(missing_ok=True)  # from here on, no meta.json = not finished
        for split in SPLITS:
            os.replace(self.tmp.pop(split), self.out_dir / f"{split}.bin")
        for name in list(self.tmp):
            os.replace(self.tmp.pop(name), self.out_dir / name)
        write_atomic(self.out_dir / "meta.json", json.dumps(meta, indent=1))
        return read_meta(self.out_dir)

    def __enter__(self) -> "SplitWriter":
        return self

    def __exit__(self, *exc) -> None:
        """On an error or Ctrl-C (or after publish), nothing temporary is left behind."""
        for file in self.files.values():
            file.file.close()
        for path in self.tmp.values():
            path.unlink(missing_ok=True)


def _move_tail(src: _TokenFile, dst: _TokenFile, count: int, dtype: np.dtype, chunk_tokens: int) -> None:
    """Move the last `count` tokens of `src` (closed here: nothing more goes there) to the end of `dst`."""
    src.flush()
    src.file.close()
    path = Path(src.file.name)
    tokens = np.memmap(path, dtype=dtype, mode="r")
    keep = len(tokens) - count
    for start in range(keep, len(tokens), chunk_tokens):
        dst.append(np.array(tokens[start : start + chunk_tokens]))
    del tokens  # release the map before shrinking the file under it
    os.truncate(path, keep * dtype.itemsize)
    src.tokens = keep


def _ensure_both_splits(writer: SplitWriter, val_fraction: float) -> None:
    """Make train and val both non-empty.

    Documents are split whole, so a corpus of very few documents (one long text file, say) can leave a split
    empty. Then we split by tokens instead: the tail of the full split moves over, val_fraction of the tokens
    to val, the rest to train.
    """
    total = writer.tokens("train") + writer.tokens("val")
    if total < 2:
        raise CourseError(
            f"error: the corpus encodes to {total} token(s), too few to train on; use a bigger corpus"
        )
    val_tokens = min(max(round(total * val_fraction), 1), total - 1)
    files, args = writer.files, (writer.dtype, writer.chunk_tokens)
    if writer.tokens("val") == 0:
        _move_tail(files["train"], files["val"], val_tokens, *args)
    elif writer.tokens("train") == 0:
        _move_tail(files["val"], files["train"], total - val_tokens, *args)


def write_token_files(
    documents: Iterable[str],
    tokenizer: Tokenizer,
    out_dir: Path,
    *,
    val_fraction: float = 0.1,
    separator_id: int | None,
    extra_meta: dict | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
) -> dict:
    """Encode `documents` as one flat token stream per split (out_dir/train.bin, val.bin); return the meta.

    The format of GPT-style language models: each document is followed by `separator_id` (GPT's
    <|endoftext|>), and training reads random windows across the stream. meta.json lists the val documents'
    indices, so a later step can tell which documents training never saw.
    """
    with SplitWriter(out_dir, tokenizer.vocab_size, val_fraction, chunk_tokens) as writer:
        for text in progress_bar(documents, desc="encoding", unit=" documents"):
            writer.write(tokenizer.encode(text) + ([] if separator_id is None else [separator_id]))
        _ensure_both_splits(writer, val_fraction)
        return writer.publish(extra_meta or {})


def read_meta(out_dir: Path) -> dict:
    """A prepared folder's meta.json; its corpus_path, recorded relative to the folder, as a full path."""
    path = Path(out_dir) / "meta.json"
    if not path.exists():
        raise CourseError(f"error: no token files in {out_dir} ({path.name} is missing); run "
                          f"download_data.py")
    meta = json.loads(path.read_text(encoding="utf-8"))
    if "corpus_path" in meta:
        meta["corpus_path"] = os.path.normpath(Path(out_dir) / meta["corpus_path"])
    return meta


def load_tokens(out_dir: Path, split: str) -> np.memmap:
    """The token ids of one split as a read-only memory map, checked against the count in meta.json."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    meta = read_meta(out_dir)
    path = Path(out_dir) / f"{split}.bin"
    expected = meta[f"{split}_tokens"] * np.dtype(meta["dtype"]).itemsize
    if not path.exists() or path.stat().st_size != expected:
        raise CourseError(f"error: {path} is missing or incomplete; delete {out_dir} and run "
                          f"download_data.py")
    return np.memmap(path, dtype=meta["dtype"], mode="r")


class Batches:
    """Random (B, T) windows from a token memmap, drawn from a seeded torch.Generator whose state a checkpoint
    saves, so a resumed run sees exactly the batches an uninterrupted run would have.

    The generator is a private CPU one: dropout or sampling drawing from the global generator cannot shift the
    batches, and the same seed gives the same batches on every device.

    Data-parallel training (several processes, one per GPU) passes `rank` and `world_size`: every process
    draws the same batch_size window starts and reads only its own batch_size / world_size of them, so the
    processes together see exactly the batch one process would, whatever their number.
    """

    def __init__(self, tokens: np.ndarray, block_size: int, batch_size: int, device: torch.device, seed: int,
                 rank: int = 0, world_size: int = 1):
        if batch_size % world_size:
            raise CourseError(f"error: BATCH_SIZE={batch_size} does not split evenly over {world_size} "
                              f"processes; use a multiple of {world_size}")
        if len(tokens) < block_size + 1:
            raise CourseError(
                f"error: only {len(tokens):,} tokens, fewer than BLOCK_SIZE + 1 = {block_size + 1:,}; "
                "lower --BLOCK_SIZE or use a bigger corpus"
            )
        self.tokens = tokens
        self.block_size = block_size
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)
        share = batch_size // world_size
        self.rows = slice(rank * share, (rank + 1) * share)  # this process's rows of every batch

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs x and targets y, both int64 (B, T): y[b, t] is the token that follows x[b, t].

        B is batch_size / world_size: this process's share of the batch."""
        T = self.block_size
        starts = torch.randint(len(self.tokens) - T, (self.batch_size,), generator=self.generator)  # (B,)
        windows = np.stack([self.tokens[s : s + T + 1] for s in starts[self.rows].tolist()])  # (B, T+1)
        windows = torch.from_numpy(windows.astype(np.int64))  # embeddings and cross_entropy want int64
        x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # (B, T), (B, T)
        if self.device.type == "cuda":
            # Page-locked memory lets the copy run asynchronously while the GPU is still busy.
            x, y = x.pin_memory(), y.pin_memory()
            return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        return x.to(self.device), y.to(self.device)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}  # a uint8 tensor: loads with weights_only=True

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"].cpu())  # cpu(): in case it was loaded with map_location
