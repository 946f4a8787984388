"""Token files: a corpus encoded once, then read by training straight from disk.

    out_dir/train.bin, out_dir/val.bin   raw token ids, documents one after another (np.uint16, or np.uint32 for
                                         vocabularies over 65,536), each document followed by a separator
                                         token when one is given (GPT's <|endoftext|>)
    out_dir/meta.json                    dtype, token counts and how the split was made

Training reads the .bin files as memory maps (np.memmap): the operating system pages in the windows a batch
touches, so a corpus larger than RAM trains just as well. meta.json is written last; its presence means the
two .bin files are complete.
"""

import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

SPLITS = ("train", "val")
CHUNK_TOKENS = 1 << 20  # tokens buffered in memory before they are written out (4 MiB as uint32)


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned type that holds every id: uint16 halves the files of any vocabulary up to 65,536."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class TokenWriter:
    """Appends token arrays to one file, buffering up to `chunk_tokens` of them so memory stays bounded."""

    def __init__(self, path: Path, chunk_tokens: int):
        self.file = open(path, "wb")  # closed by __exit__
        self.chunk_tokens = chunk_tokens
        self.buffer: list[np.ndarray] = []
        self.buffered = 0

    def append(self, ids: np.ndarray) -> None:
        self.buffer.append(ids)
        self.buffered += len(ids)
        if self.buffered >= self.chunk_tokens:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            np.concatenate(self.buffer).tofile(self.file)
        self.buffer, self.buffered = [], 0

    def __enter__(self) -> "TokenWriter":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.flush()
        self.file.close()


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
            raise SystemExit(f"error: --VAL_FRACTION={val_fraction} must be between 0 and 1, e.g. 0.05")
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


def _move_tail(src: Path, dst: Path, count: int, dtype: np.dtype, chunk_tokens: int) -> None:
    """Move the last `count` tokens of file `src` to the end of file `dst`, a chunk at a time."""
    tokens = np.memmap(src, dtype=dtype, mode="r")
    keep = len(tokens) - count
    with open(dst, "ab") as f:
        for start in range(keep, len(tokens), chunk_tokens):
            tokens[start : start + chunk_tokens].tofile(f)
    del tokens  # release the map before shrinking the file under it
    os.truncate(src, keep * dtype.itemsize)


def _ensure_both_splits(paths: dict[str, Path], val_fraction: float, dtype: np.dtype, chunk_tokens: int) -> dict:
    """Make train and val both non-empty and return their token counts.

    Documents are split whole, so a corpus of very few documents (one long text file, say) can leave a split
    empty. Then we split by tokens instead: the tail of the full split moves over, val_fraction of the tokens
    to val, the rest to train.
    """
    counts = {split: paths[split].stat().st_size // dtype.itemsize for split in SPLITS}
    total = sum(counts.values())
    if total < 2:
        raise SystemExit(f"error: the corpus encodes to {total} token(s), too few to train on; use a bigger corpus")
    val_tokens = min(max(round(total * val_fraction), 1), total - 1)
    if counts["val"] == 0:
        _move_tail(paths["train"], paths["val"], val_tokens, dtype, chunk_tokens)
        counts = {"train": total - val_tokens, "val": val_tokens}
    elif counts["train"] == 0:
        _move_tail(paths["val"], paths["train"], total - val_tokens, dtype, chunk_tokens)
        counts = {"train": total - val_tokens, "val": val_tokens}
    return counts


def write_token_files(
    documents: Iterable[str],
    tokenizer,
    out_dir: Path,
    *,
    val_fraction: float = 0.1,
    separator_id: int | None,
    extra_meta: dict | None = None,
    chunk_tokens: int = CHUNK_TOKENS,
) -> dict:
    """Encode `documents` into out_dir/train.bin, val.bin and meta.json; return the meta dict.

    Documents go whole to one split or the other (see DocumentSplit). meta.json lists the val documents'
    indices, so a later task (fine-tuning questions, say) can be built from the same held-out documents.
    Documents are streamed and tokens written in chunks, so memory holds one document and one chunk, whatever
    the corpus size. Files are written under temporary names and renamed only at the end: an interrupted run
    leaves the previous files as they were.
    """
    document_split = DocumentSplit(val_fraction)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(tokenizer.vocab_size)
    tmp = {split: out_dir / f"{split}.bin.tmp" for split in SPLITS}
    try:
        with TokenWriter(tmp["train"], chunk_tokens) as train, TokenWriter(tmp["val"], chunk_tokens) as val:
            n_documents, val_documents = 0, []
            for text in tqdm(documents, desc="encoding", unit=" documents", disable=None):
                ids = tokenizer.encode(text) + ([] if separator_id is None else [separator_id])
                if document_split.to_val(len(ids)):
                    val.append(np.asarray(ids, dtype=dtype))
                    val_documents.append(n_documents)
                else:
                    train.append(np.asarray(ids, dtype=dtype))
                n_documents += 1
        counts = _ensure_both_splits(tmp, val_fraction, dtype, chunk_tokens)
        meta = {
            "dtype": dtype.name,
            "vocab_size": tokenizer.vocab_size,
            "train_tokens": counts["train"],
            "val_tokens": counts["val"],
            "documents": n_documents,
            "val_fraction": val_fraction,
            "val_documents": val_documents,
            **(extra_meta or {}),
        }
        publish(out_dir, {f"{split}.bin": tmp[split] for split in SPLITS}, meta)
    finally:
        for path in tmp.values():
            path.unlink(missing_ok=True)
    return meta


def publish(out_dir: Path, files: dict[str, Path], meta: dict) -> None:
    """Give finished temporary files their names in out_dir, then write meta.json, last: its presence means that
    everything it describes is complete, so a run killed halfway leaves a folder that is rebuilt, not trusted."""
    (out_dir / "meta.json").unlink(missing_ok=True)  # from here on, no meta.json = not finished
    for name, path in files.items():
        os.replace(path, out_dir / name)
    (out_dir / "meta.json.tmp").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(out_dir / "meta.json.tmp", out_dir / "meta.json")


def read_meta(out_dir: Path) -> dict:
    path = Path(out_dir) / "meta.json"
    if not path.exists():
        raise SystemExit(f"error: no token files in {out_dir} ({path.name} is missing); run download_data.py")
    return json.loads(path.read_text(encoding="utf-8"))


def load_tokens(out_dir: Path, split: str) -> np.memmap:
    """The token ids of one split as a read-only memory map, checked against the count in meta.json."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    meta = read_meta(out_dir)
    path = Path(out_dir) / f"{split}.bin"
    expected = meta[f"{split}_tokens"] * np.dtype(meta["dtype"]).itemsize
    if not path.exists() or path.stat().st_size != expected:
        raise SystemExit(f"error: {path} is missing or incomplete; delete {out_dir} and run download_data.py")
    return np.memmap(path, dtype=meta["dtype"], mode="r")


class Batches:
    """Random (B, T) windows from a token memmap, drawn from a seeded torch.Generator whose state a checkpoint
    saves, so a resumed run sees exactly the batches an uninterrupted run would have.

    The generator is a private CPU one: dropout or sampling drawing from the global generator cannot shift the
    batches, and the same seed gives the same batches on every device.
    """

    def __init__(self, tokens: np.ndarray, block_size: int, batch_size: int, device: torch.device, seed: int):
        if len(tokens) < block_size + 1:
            raise SystemExit(
                f"error: only {len(tokens):,} tokens, fewer than BLOCK_SIZE + 1 = {block_size + 1:,}; "
                "lower --BLOCK_SIZE or use a bigger corpus"
            )
        self.tokens = tokens
        self.block_size = block_size
        self.batch_size = batch_size
        self.device = torch.device(device)
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs x and targets y, both int64 (B, T): y[b, t] is the token that follows x[b, t]."""
        T = self.block_size
        starts = torch.randint(len(self.tokens) - T, (self.batch_size,), generator=self.generator)  # (B,)
        windows = np.stack([self.tokens[s : s + T + 1] for s in starts.tolist()])  # (B, T+1), uint16/32
        windows = torch.from_numpy(windows.astype(np.int64))  # embeddings and cross_entropy want int64
        x, y = windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # (B, T), (B, T)
        if self.device.type == "cuda":
            # Page-locked memory lets the copy run asynchronously while the GPU is still busy.
            return x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        return x.to(self.device), y.to(self.device)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}  # a uint8 tensor: loads with weights_only=True

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"].cpu())  # cpu(): in case it was loaded with map_location
