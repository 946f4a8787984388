"""Ctrl-C during training: finish the current step, save, exit cleanly.

Stopping in the middle of a step would save a half-updated state (gradients accumulated, batches drawn,
weights not yet stepped) that cannot resume exactly. So the first Ctrl-C only raises a flag that the training
loop reads between steps. A second Ctrl-C stops at once, for a learner who really means it: a checkpoint being
written is abandoned (save_checkpoint writes to a temporary file, removed on the way out, so the newest
complete checkpoint stays as it was) and the program ends with one line naming that checkpoint.
"""

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from common.progress import close_bars

STOPPED_AT_ONCE = 130  # the exit status of a program stopped by Ctrl-C (128 + SIGINT), as shells report it


class GracefulInterrupt:
    """`with GracefulInterrupt(newest=run.newest) as interrupt:`, then between steps `if interrupt.requested:`
    save and call `interrupt.exit_saved(...)`. `newest` names the newest checkpoint on disk, for the line a
    second Ctrl-C ends the program with."""

    def __init__(self, message: str = "Ctrl-C: finishing this step and saving a checkpoint",
                 newest: Callable[[], Path | None] | None = None):
        self.message, self.newest = message, newest
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:  # second Ctrl-C: stop now; __exit__ turns this into one line
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{self.message} (press again to stop at once)", flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # signals can only be caught there
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, exc_type, exc, traceback):
        leaving = exc_type is KeyboardInterrupt or (exc_type is SystemExit and self.requested)
        if self._previous is not None:
            # A program leaving after a Ctrl-C ignores the next one: it has nothing left to stop, and a
            # KeyboardInterrupt in the middle of its exit would print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN if leaving else self._previous)
        if exc_type is KeyboardInterrupt:
            close_bars()  # first, so that the line below is the last one printed
            kept = ""
            if self.newest is not None:
                newest = self.newest()
                kept = f"; the newest checkpoint is {newest}" if newest else "; no checkpoint was saved yet"
            print(f"\nstopped at once{kept}", file=sys.stderr, flush=True)
            sys.exit(STOPPED_AT_ONCE)  # the user asked to stop; not an error to report
        return False

    @staticmethod
    def exit_saved(checkpoint: Path, script: str) -> NoReturn:
        """Leave the program after the interrupted run was saved, saying how to continue it."""
        print(f"saved {checkpoint}\nresume with: uv run python {script} --RESUME=latest "
              "(plus the same settings you used)")
        sys.exit(0)
