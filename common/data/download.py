"""Fetch a file once, prove it is the right file, and never leave half a file behind.

Downloads feed the corpus, the first step of corpus → tokenizer → token files → batches → model → checkpoint:
corpora.py names the files and their pins; this module fetches them.

    path = download(URL, data_dir / "downloads" / "input.txt", size=1_115_394, sha256="86c4...")

Four promises:

* The bytes go to a temporary file beside `dest` first (files.write_atomic) and are renamed to `dest` only
  after the size and the sha256 match, so a file at `dest` is always a complete, checked download.
* A connection that breaks off is retried a few times, and each retry asks the server for the missing
  bytes only (an HTTP Range request), so a flaky line does not restart a large download from zero.
* Any failure (a 404, a broken transfer, a timeout, a wrong checksum) deletes the temporary file and ends
  in one line that says what went wrong and how to go on without the network.
* Where we cannot pin a sha256 in advance (files that the host regenerates now and then), the first
  download records it in `sha256-recorded.json` beside the file, and later downloads must match it.

Only the standard library (urllib) is used, so downloading needs no extra dependency.
"""

import hashlib
import http.client
import json
import os
import shutil
import time
import zipfile
from pathlib import Path, PurePosixPath
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from common.errors import CourseError
from common.files import write_atomic
from common.progress import progress_bar

OFFLINE_HINT = "the embedded default needs no download: leave out --CORPUS"
RECORD_NAME = "sha256-recorded.json"
RETRY_PAUSE_S = 2.0  # wait this long times the attempt number before retrying; tests set it to 0
CHUNK_BYTES = 1 << 20
USER_AGENT = "llm-from-scratch-course (urllib)"  # some hosts refuse requests without one


class DownloadFailed(Exception):
    """A download went wrong in a way the user should hear about (download raises it as a CourseError)."""


class _BrokenOff(Exception):
    """The server closed the connection before sending every byte it announced; a retry can resume."""


def download(url: str, dest: Path, *, size: int | None, sha256: str | None,
             timeout: float = 30, retries: int = 3, hint: str = OFFLINE_HINT) -> Path:
    """Return `dest` holding the file at `url`, downloading it only if it is not already there and intact.

    `size` (bytes) and `sha256` pin the file; either may be None when it cannot be known in advance.
    With sha256=None the hash of the first successful download is recorded and required afterwards. A failed
    download ends in one line: what went wrong, where to put the file by hand, and `hint`, the way on
    without it.
    """
    dest = Path(dest)
    expected_sha = sha256 or _recorded_sha256(dest)
    if dest.exists():
        if _matches(dest, size, expected_sha):
            if expected_sha is None:  # a file placed here by hand: trust it once, then hold it to that
                _record_sha256(dest, url, _sha256_of(dest))
            return dest
        print(f"{dest} does not match its expected size or sha256; downloading it again")
        dest.unlink()

    for orphan in dest.parent.glob(f".{dest.name}.*.tmp"):  # left by a killed earlier run: start clean
        orphan.unlink()
    print(f"downloading {url}" + (f", {size / 1e6:,.1f} MB" if size else "") + f", to {dest}")

    def fetch_and_check(part: Path) -> None:
        _fetch(url, part, size, timeout, retries, desc=dest.name)
        actual_sha = _check(part, size, expected_sha, recorded=sha256 is None)
        if expected_sha is None:
            _record_sha256(dest, url, actual_sha)

    try:
        write_atomic(dest, fetch_and_check)  # dest appears only once its size and sha256 are checked
    except DownloadFailed as e:
        raise CourseError(
            f"error: could not download {url}: {e}; try again later, or save the file by hand as {dest}; "
            f"{hint}"
        ) from None
    return dest


def extract_member(zip_path: Path, member: str, dest: Path) -> Path:
    """Extract one file of a zip archive to dest/member and return its path.

    A member name like "../../.bashrc" or "/etc/passwd" would write outside `dest` ("zip slip"), so such
    names are refused. The file appears under its final name only once it is complete.
    """
    dest = Path(dest)
    target = dest / _safe_relative_path(member, zip_path)

    def copy_member(tmp: Path) -> None:
        with zipfile.ZipFile(zip_path) as archive, archive.open(member) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, CHUNK_BYTES)

    try:
        write_atomic(target, copy_member)
    except KeyError:
        raise CourseError(
            f"error: {zip_path} has no file {member}; delete {zip_path} and run again to download it afresh"
        ) from None
    except zipfile.BadZipFile:
        raise CourseError(
            f"error: {zip_path} is not a readable zip archive; delete it and run again to download it afresh"
        ) from None
    return target


def _safe_relative_path(member: str, zip_path: Path) -> PurePosixPath:
    """The member's path if it stays inside the destination folder; CourseError otherwise."""
    path = PurePosixPath(member.replace("\\", "/"))  # zips made on Windows may use backslashes
    escapes = path.is_absolute() or ".." in path.parts or ":" in (path.parts[0] if path.parts else "")
    if escapes or not path.parts:
        raise CourseError(
            f"error: refusing to extract {member!r} from {zip_path}: its path leads outside the target "
            "folder; delete the archive, it is not the file the course expects"
        )
    return path


# --- transferring --------------------------------------------------------------------------------------

def _fetch(url: str, part: Path, size: int | None, timeout: float, retries: int, desc: str) -> None:
    """Stream `url` into `part`, retrying broken connections and resuming from the bytes already there."""
    for attempt in range(1, retries + 1):
        try:
            _transfer(url, part, size, timeout, desc)
            return
        except HTTPError as e:
            if e.code < 500:  # 404, 403 ...: asking again will not help
                raise DownloadFailed(f"HTTP {e.code} {e.reason}") from None
            problem = f"HTTP {e.code} {e.reason}"
        except (_BrokenOff, OSError, http.client.HTTPException) as e:
            problem = _describe(e, timeout)
        if attempt < retries:
            print(f"{problem}; retrying ({attempt}/{retries - 1})")
            time.sleep(RETRY_PAUSE_S * attempt)
    raise DownloadFailed(f"{problem} (gave up after {retries} attempts)")


def _transfer(url: str, part: Path, size: int | None, timeout: float, desc: str) -> None:
    """One HTTP request: append the bytes we do not have yet to `part`, with a progress bar."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if have:
        headers["Range"] = f"bytes={have}-"
    with urlopen(Request(url, headers=headers), timeout=timeout) as response:
        if have and response.status != 206:  # the server ignored our Range request: start over
            have = 0
        announced = response.headers.get("Content-Length")
        announced = int(announced) if announced is not None else None
        total = size or (have + announced if announced is not None else None)
        received = 0
        bar = progress_bar(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                           desc=desc)
        with open(part, "ab" if have else "wb") as out, bar:
            while chunk := response.read(CHUNK_BYTES):
                out.write(chunk)
                received += len(chunk)
                bar.update(len(chunk))
    if announced is not None and received < announced:
        raise _BrokenOff(f"connection closed after {have + received:,} of {have + announced:,} bytes")


def _describe(error: Exception, timeout: float) -> str:
    """One short phrase for a network error (URLError hides the interesting part in .reason)."""
    reason = error.reason if isinstance(error, URLError) else error
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout:g} s"
    return str(reason) or type(reason).__name__


# --- checking ------------------------------------------------------------------------------------------

def _check(path: Path, size: int | None, sha256: str | None, *, recorded: bool) -> str:
    """Raise DownloadFailed unless `path` has the expected size and sha256; return its sha256.

    `recorded` says the sha256 came from our first download rather than from the course's pins: then
    a mismatch may mean the host updated the file, and the message says how to accept the new one.
    """
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise DownloadFailed(f"got {actual_size:,} bytes, expected {size:,}")
    actual_sha = _sha256_of(path)
    if sha256 is not None and actual_sha != sha256:
        accept = ""
        if recorded:
            record = path.parent / RECORD_NAME
            accept = f" (if the host updated the file, delete its entry in {record} to accept the new one)"
        raise DownloadFailed(f"sha256 {actual_sha} is not the expected {sha256}{accept}")
    return actual_sha


def _matches(path: Path, size: int | None, sha256: str | None) -> bool:
    try:
        _check(path, size, sha256, recorded=False)
    except DownloadFailed:
        return False
    return True


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _recorded_sha256(dest: Path) -> str | None:
    return _read_records(dest.parent).get(dest.name, {}).get("sha256")


def _record_sha256(dest: Path, url: str, sha256: str) -> None:
    """Remember the sha256 of a file we could not pin in advance, so later downloads must match it."""
    records = _read_records(dest.parent)
    records[dest.name] = {"url": url, "sha256": sha256}
    record_path = dest.parent / RECORD_NAME
    write_atomic(record_path, json.dumps(records, indent=2, sort_keys=True) + "\n")


def _read_records(folder: Path) -> dict:
    path = folder / RECORD_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
