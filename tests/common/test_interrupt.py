"""The first Ctrl-C is a request the loop honours between steps; the second stops at once."""

import os
import signal

import pytest

from common.training.interrupt import STOPPED_AT_ONCE, GracefulInterrupt


@pytest.fixture(autouse=True)
def sigint_handler_restored():
    """A program that leaves after a Ctrl-C ignores the next one; the test session must not."""
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


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


def test_second_ctrl_c_ends_in_one_line_naming_the_newest_checkpoint(tmp_path, capsys):
    """Pressed again while the first one's save runs (here: while 'saving'), the program stops at once, with
    the exit status of a Ctrl-C and one line, not a traceback."""
    newest = tmp_path / "gpt_iter10_loss1.0000.pt"
    with pytest.raises(SystemExit) as stop:
        with GracefulInterrupt(newest=lambda: newest):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # raises here, in the middle of whatever runs
            pytest.fail("the second Ctrl-C did not stop the block")
    assert stop.value.code == STOPPED_AT_ONCE == 130
    assert capsys.readouterr().err.strip() == f"stopped at once; the newest checkpoint is {newest}"


def test_second_ctrl_c_before_any_checkpoint_says_so(capsys):
    with pytest.raises(SystemExit):
        with GracefulInterrupt(newest=lambda: None):
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
    assert capsys.readouterr().err.strip() == "stopped at once; no checkpoint was saved yet"
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a third press cannot interrupt the exit
