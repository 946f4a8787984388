"""common/course/exercises.py: an exercise runs the chapter's own train.py as a program, reads its summary."""

import pytest

from common.course.exercises import train_in_new_process
from common.errors import CourseError

FAKE_TRAIN = """
import sys
from common.training.metrics import save_summary
out_dir = next(a.removeprefix("--OUT_DIR=") for a in sys.argv if a.startswith("--OUT_DIR="))
if "--FAIL=true" in sys.argv:
    raise SystemExit("error: unknown setting FAIL")
if "--STOP=true" in sys.argv:  # as after a Ctrl-C: saved, exit 0, no summary
    raise SystemExit(0)
save_summary(out_dir, {"val_loss": 1.5, "argv": sys.argv[1:]})
"""


def test_train_in_new_process_runs_the_script_as_a_program_and_returns_its_summary(tmp_path, monkeypatch):
    (tmp_path / "fake_train.py").write_text(FAKE_TRAIN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    summary = train_in_new_process("fake_train", ["--LR=0.1"], tmp_path / "run")
    assert summary == {"val_loss": 1.5, "argv": ["--LR=0.1", f"--OUT_DIR={tmp_path / 'run'}"]}
    with pytest.raises(CourseError, match="fake_train stopped .*--FAIL=true") as exit_info:
        train_in_new_process("fake_train", ["--FAIL=true"], tmp_path / "run")
    assert "\n" not in str(exit_info.value)
    with pytest.raises(CourseError, match="fake_train stopped before its end and wrote no .*summary.json"):
        train_in_new_process("fake_train", ["--STOP=true"], tmp_path / "stopped")
