import os
import stat

import pytest
import torch

from common import files
from common.files import write_atomic


def test_write_atomic_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "notes.txt"
    write_atomic(path, "first")
    write_atomic(path, b"second")
    write_atomic(path, lambda tmp: torch.save({"x": torch.ones(2)}, tmp), durable=True)
    assert torch.load(path, weights_only=True)["x"].tolist() == [1.0, 1.0]
    assert [p.name for p in path.parent.iterdir()] == ["notes.txt"]


def test_write_atomic_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "notes.txt"
    write_atomic(path, "old")

    def fails(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, fails)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_write_atomic_keeps_a_file_s_mode(tmp_path):
    path = tmp_path / "script.py"
    path.write_text("old")
    os.chmod(path, 0o755)
    write_atomic(path, "new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    write_atomic(tmp_path / "fresh.txt", "new")
    assert stat.S_IMODE((tmp_path / "fresh.txt").stat().st_mode) == 0o644


def test_paths_are_recorded_relative_to_the_repository(monkeypatch, tmp_path):
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path / "clone")
    inside, outside = tmp_path / "clone" / "data" / "project1" / "x", tmp_path / "elsewhere" / "notes.txt"
    assert files.portable(inside) == "data/project1/x" and files.in_repo("data/project1/x") == inside
    assert files.portable(outside) == str(outside) and files.in_repo(str(outside)) == outside
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path / "moved")  # the clone moved: the record follows it
    assert files.in_repo("data/project1/x") == tmp_path / "moved" / "data" / "project1" / "x"


def test_portable_settings_relativises_paths_only(monkeypatch, tmp_path):
    monkeypatch.setattr(files, "REPO_ROOT", tmp_path)
    values = {"DATA_DIR": str(tmp_path / "data"), "TEXT_FILE": "/srv/notes.txt", "PROMPT": "The",
              "N_LAYER": 2}
    assert files.portable_settings(values) == {"DATA_DIR": "data", "TEXT_FILE": "/srv/notes.txt",
                                                "PROMPT": "The", "N_LAYER": 2}
