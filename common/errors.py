"""The course's one error type, and the entry point that turns it into one line.

Library code raises `CourseError` for anything the user can fix (a bad setting, a missing file, a run that
cannot go on); its message is one line that names the fix. A script's entry point, `run_main(main)`, prints
that line and exits with status 1, without a traceback. (`uv run learn` prints it the same way and exits with
2, since 1 is its failed check. The clean exits a user asks for are not errors: --help, and leaving after a
Ctrl-C has saved the run.)
"""

import sys
from collections.abc import Callable


class CourseError(Exception):
    """Bad input or a state the user can fix; the message is the one line to print."""


def run_main(main: Callable[[], object]) -> None:
    """`if __name__ == "__main__": run_main(main)`: main's CourseError becomes one line and exit status 1;
    an int that main returns is the exit status."""
    try:
        result = main()
    except CourseError as error:
        sys.exit(str(error))  # printed to stderr, exit status 1
    sys.exit(result if isinstance(result, int) else 0)
