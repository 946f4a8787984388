"""The first Ctrl-C is a request the loop honours between steps; the second stops at once."""

import os
import signal

import pytest

from common.interrupt import GracefulInterrupt


def test_first_ctrl_c_sets_the_flag_second_raises():
    with GracefulInterrupt() as interrupt:
        assert not interrupt.requested
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


def test_previous_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    with GracefulInterrupt():
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before
