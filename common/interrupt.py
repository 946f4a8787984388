"""Ctrl-C during training: finish the current step, save, exit cleanly.

Stopping in the middle of a step would save a half-updated state (gradients accumulated, batches drawn,
weights not yet stepped) that cannot resume exactly. So the first Ctrl-C only raises a flag that the training
loop reads between steps; a second Ctrl-C stops at once, for a learner who really means it.
"""

import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn


class GracefulInterrupt:
    """`with GracefulInterrupt() as interrupt:`, then between steps `if interrupt.requested:` save and call
    `interrupt.exit_saved(...)`."""

    def __init__(self, message: str = "Ctrl-C: finishing this step and saving a checkpoint"):
        self.message = message
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:  # second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested = True
        print(f"\n{self.message} (press again to stop at once)", flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # signals can only be caught there
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False

    @staticmethod
    def exit_saved(checkpoint: Path, script: str) -> NoReturn:
        """Leave the program after the interrupted run was saved, saying how to continue it."""
        print(f"saved {checkpoint}\nresume with: uv run python {script} --RESUME=latest "
              "(plus the same settings you used)")
        sys.exit(0)
