"""The course's one error type, and the entry point that turns it into one line.

Library code raises `CourseError` for anything the user can fix (a bad setting, a missing file, a run that
cannot go on); its message is one line that names the fix. Only a script's entry point ends the program:
`run_main(main)` prints that line and exits with status 1, without a traceback.
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
