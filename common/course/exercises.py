"""What the exercise scripts share: where a run goes, how it trains, and the answer printed after it."""

import json
import signal
import subprocess
import sys
from pathlib import Path

from common.errors import CourseError
from common.files import REPO_ROOT


def exercise_args(argv: list[str] | None, chapter: str, name: str) -> tuple[Path, list[str]]:
    """An exercise's output folder (--OUT_DIR, else checkpoints/<chapter>/exercises/<name>) and the rest of
    argv: the settings it passes on to the chapter's scripts."""
    argv = sys.argv[1:] if argv is None else argv
    out_dir = REPO_ROOT / "checkpoints" / chapter / "exercises" / name
    for arg in argv:
        if arg.startswith("--OUT_DIR="):
            out_dir = Path(arg.removeprefix("--OUT_DIR="))
    return out_dir, [arg for arg in argv if not arg.startswith("--OUT_DIR=")]


def print_measured(text: str) -> None:
    """Print, after a run's own numbers, what the course measured when it ran the exercise, and why: the
    learner predicts first, runs, and only then reads the answer."""
    print(f"\nWhat the course measured (compare with your numbers above):\n{text.strip()}")


def train_in_new_process(module: str, settings: list[str], out_dir: Path) -> dict:
    """Run a chapter's training script (e.g. "phase1_foundation.project1_gpt.train") as a program of its own,
    exactly as from the shell, into out_dir, and return the summary.json it leaves there.

    An exercise compares runs this way: what it measures is the chapter's own command, not a copy of it.
    """
    command = [sys.executable, "-m", module, *settings, f"--OUT_DIR={out_dir}"]
    with subprocess.Popen(command) as process:
        try:
            process.wait()
        except KeyboardInterrupt:  # Ctrl-C reached the run too: it finishes its step and saves; let it
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one is the run's to handle, not ours
            process.wait()
            print(f"interrupted: the run in {out_dir} is saved, and the exercise stops here")
            sys.exit(0)
    if process.returncode:
        raise CourseError(f"error: {module} stopped (its message is above); the command: {' '.join(command)}")
    summary = Path(out_dir) / "summary.json"
    if not summary.is_file():  # stopped early (by a Ctrl-C sent to it alone): saved, but no summary
        raise CourseError(f"error: {module} stopped before its end and wrote no {summary}")
    return json.loads(summary.read_text(encoding="utf-8"))
