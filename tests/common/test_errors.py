"""common/errors.py: a library raises CourseError; the entry point prints its one line and exits with 1."""

import subprocess
import sys

import pytest

from common.errors import CourseError, run_main


def test_run_main_turns_a_course_error_into_its_line_and_exit_status_1():
    def main():
        raise CourseError("error: no checkpoint at x.pt; train first")

    with pytest.raises(SystemExit) as stop:
        run_main(main)
    assert stop.value.code == "error: no checkpoint at x.pt; train first"  # printed to stderr, status 1


@pytest.mark.parametrize("returned, status", [(None, 0), ({"val_loss": 1.0}, 0), (3, 3)])
def test_run_main_exits_with_the_int_main_returns_and_0_otherwise(returned, status):
    with pytest.raises(SystemExit) as stop:
        run_main(lambda: returned)
    assert stop.value.code == status


def test_a_script_s_course_error_is_one_line_on_stderr_without_a_traceback(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("from common.errors import CourseError, run_main\n"
                      "def main():\n    raise CourseError('error: --N_LAYER=abc is not an int')\n"
                      "run_main(main)\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert (run.returncode, run.stdout, run.stderr) == (1, "", "error: --N_LAYER=abc is not an int\n")


def test_other_exceptions_keep_their_traceback():
    """A bug is not bad input: it must not be hidden behind one line."""
    with pytest.raises(ZeroDivisionError):
        run_main(lambda: 1 / 0)
