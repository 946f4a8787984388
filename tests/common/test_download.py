"""download() and extract_member() against a local HTTP server: success, every failure, resume, zip slip."""

import hashlib
import json
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from common.data import download as download_module
from common.data.download import RECORD_NAME, download, extract_member
from common.errors import CourseError

BODY = bytes(range(256)) * 400  # 102,400 bytes
SHA = hashlib.sha256(BODY).hexdigest()
HALF = len(BODY) // 2


class Handler(BaseHTTPRequestHandler):
    """Each path is one server behaviour; every request is logged as (path, Range header)."""

    def do_GET(self):
        self.server.requests.append((self.path, self.headers.get("Range")))
        first_time = sum(path == self.path for path, _ in self.server.requests) == 1
        if self.path == "/good":
            self.send_body(BODY)
        elif self.path == "/changing":  # a host that regenerates its file: other bytes on every request
            self.send_body(b"version %d" % len(self.server.requests))
        elif self.path == "/truncated":  # announces every byte, sends half, hangs up: every time
            self.send_body(BODY, cut=HALF)
        elif self.path == "/flaky":  # hangs up once, then honours Range requests
            self.send_body(BODY, cut=HALF) if first_time else self.send_range(BODY)
        elif self.path == "/flaky-no-range":  # hangs up once, then ignores Range and sends everything
            self.send_body(BODY, cut=HALF) if first_time else self.send_body(BODY)
        elif self.path == "/slow":
            time.sleep(1.0)
            self.send_body(BODY)
        else:
            self.send_error(404, "Not Found")

    def send_body(self, body: bytes, cut: int | None = None):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:cut])  # HTTP/1.0: the connection closes after this, cut short or not

    def send_range(self, body: bytes):
        start = int(self.headers["Range"].removeprefix("bytes=").rstrip("-"))
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])

    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False  # the /slow handler may still be asleep when a test ends
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(httpd, path: str) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}{path}"


@pytest.fixture(autouse=True)
def no_retry_pause(monkeypatch):
    monkeypatch.setattr(download_module, "RETRY_PAUSE_S", 0.0)


def test_download_writes_checked_file_and_reuses_it(server, tmp_path):
    dest = tmp_path / "dl" / "file.bin"
    assert download(url(server, "/good"), dest, size=len(BODY), sha256=SHA) == dest
    assert dest.read_bytes() == BODY
    assert sorted(p.name for p in dest.parent.iterdir()) == ["file.bin"]  # no temporary file, no record
    download(url(server, "/good"), dest, size=len(BODY), sha256=SHA)
    assert len(server.requests) == 1  # the intact file was not fetched again


@pytest.mark.parametrize(
    ("path", "size", "sha", "message"),
    [
        ("/good", len(BODY), "0" * 64, "sha256 .* is not the expected 0000"),
        ("/good", len(BODY) + 1, SHA, "got 102,400 bytes, expected 102,401"),
        ("/truncated", len(BODY), SHA, r"connection closed after 51,200 of 102,400 bytes \(gave up after 3"),
        ("/missing", len(BODY), SHA, "HTTP 404 Not Found"),
    ],
    ids=["wrong-sha256", "wrong-size", "truncated", "404"],
)
def test_failures_leave_nothing_behind(server, tmp_path, path, size, sha, message):
    dest = tmp_path / "dl" / "file.bin"
    with pytest.raises(CourseError, match=message) as failure:
        download(url(server, path), dest, size=size, sha256=sha)
    assert "the embedded default needs no download: leave out --CORPUS" in str(failure.value)
    assert "\n" not in str(failure.value)
    assert list(dest.parent.iterdir()) == []


def test_client_errors_are_not_retried_but_broken_transfers_are(server, tmp_path):
    for path in ("/missing", "/truncated"):
        with pytest.raises(CourseError):
            download(url(server, path), tmp_path / "file.bin", size=len(BODY), sha256=SHA, retries=3)
    assert [p for p, _ in server.requests] == ["/missing"] + ["/truncated"] * 3
    # each retry asks only for the bytes it does not have yet
    assert [r for p, r in server.requests if p == "/truncated"] == [None, f"bytes={HALF}-", f"bytes={HALF}-"]


def test_timeout_is_retried_then_reported(server, tmp_path):
    dest = tmp_path / "file.bin"
    with pytest.raises(CourseError, match=r"no answer within 0.2 s \(gave up after 2 attempts\)"):
        download(url(server, "/slow"), dest, size=len(BODY), sha256=SHA, timeout=0.2, retries=2)
    assert list(tmp_path.iterdir()) == []


def test_broken_transfer_resumes_with_range_request(server, tmp_path):
    dest = tmp_path / "file.bin"
    download(url(server, "/flaky"), dest, size=len(BODY), sha256=SHA)
    assert dest.read_bytes() == BODY
    assert server.requests == [("/flaky", None), ("/flaky", f"bytes={HALF}-")]


def test_server_ignoring_range_means_starting_over(server, tmp_path):
    dest = tmp_path / "file.bin"
    download(url(server, "/flaky-no-range"), dest, size=len(BODY), sha256=SHA)
    assert dest.read_bytes() == BODY  # not the first half twice


def test_a_killed_runs_temporary_file_and_a_corrupt_file_are_replaced(server, tmp_path):
    dest = tmp_path / "file.bin"
    dest.with_name(".file.bin.k1ll3d.tmp").write_bytes(b"left over by a killed run")
    dest.write_bytes(b"not the right file")
    download(url(server, "/good"), dest, size=len(BODY), sha256=SHA)
    assert dest.read_bytes() == BODY
    assert [p.name for p in tmp_path.iterdir()] == ["file.bin"]


def test_unpinned_sha256_is_recorded_then_enforced(server, tmp_path):
    dest = tmp_path / "file.bin"
    download(url(server, "/changing"), dest, size=None, sha256=None)
    record = json.loads((tmp_path / RECORD_NAME).read_text())
    assert record["file.bin"]["sha256"] == hashlib.sha256(dest.read_bytes()).hexdigest()

    download(url(server, "/changing"), dest, size=None, sha256=None)  # intact: no request
    assert len(server.requests) == 1
    dest.unlink()
    with pytest.raises(CourseError, match=f"delete its entry in .*{RECORD_NAME} to accept the new one"):
        download(url(server, "/changing"), dest, size=None, sha256=None)
    assert [p.name for p in tmp_path.iterdir()] == [RECORD_NAME]


def make_zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_extract_member(tmp_path):
    archive = make_zip(tmp_path / "a.zip", {"corpus/train.txt": b"hello", "corpus/test.txt": b"bye"})
    target = extract_member(archive, "corpus/train.txt", tmp_path / "out")
    assert target == tmp_path / "out" / "corpus" / "train.txt"
    assert target.read_bytes() == b"hello"
    assert sorted(p.name for p in target.parent.iterdir()) == ["train.txt"]


@pytest.mark.parametrize("member", ["../evil.txt", "corpus/../../evil.txt", "/tmp/evil.txt", "C:/evil.txt"])
def test_extract_member_refuses_paths_leaving_the_folder(tmp_path, member):
    archive = make_zip(tmp_path / "a.zip", {member: b"gotcha"})
    with pytest.raises(CourseError, match="refusing to extract"):
        extract_member(archive, member, tmp_path / "deep" / "out")
    assert not (tmp_path / "deep").exists()
    assert not (tmp_path / "evil.txt").exists()


def test_extract_member_reports_missing_member_and_broken_zip(tmp_path):
    archive = make_zip(tmp_path / "a.zip", {"x.txt": b"x"})
    with pytest.raises(CourseError, match="has no file y.txt; delete"):
        extract_member(archive, "y.txt", tmp_path / "out")
    (tmp_path / "broken.zip").write_bytes(b"PK not really")
    with pytest.raises(CourseError, match="not a readable zip archive"):
        extract_member(tmp_path / "broken.zip", "x.txt", tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
