import io

from common import progress as progress_module
from common.progress import progress, progress_bar, say_how_long


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_resumes_at_initial():
    with progress(total=100, initial=40) as bar:
        bar.update(10)
        assert (bar.n, bar.total, bar.desc) == (50, 100, "train")


def test_a_terminal_gets_one_line_redrawn_in_place():
    terminal = Terminal()
    with progress_bar(total=200, file=terminal, mininterval=0) as bar:
        for _ in range(200):
            bar.update()
    assert terminal.getvalue().count("\r") > 100 and terminal.getvalue().count("\n") <= 1


def test_a_log_file_gets_a_few_whole_lines():
    """2,000 steps in well under LOG_INTERVAL: the first state and the last, each on a line of its own."""
    log = io.StringIO()
    with progress_bar(total=2000, file=log, desc="train", unit="step") as bar:
        for step in range(2000):
            bar.set_postfix(loss=f"{step:.3f}", refresh=False)
            bar.update()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and log.getvalue().endswith("\n")
    assert 2 <= len(lines) <= 3 and "2000/2000" in lines[-1] and "loss=1999.000" in lines[-1]


def test_a_log_file_gets_a_line_every_interval(monkeypatch):
    monkeypatch.setattr(progress_module, "LOG_INTERVAL", 0.0)
    log = io.StringIO()
    with progress_bar(total=5, file=log) as bar:
        for _ in range(5):
            bar.update()
    shown = [line.split("|")[0].strip() for line in log.getvalue().splitlines()]
    assert list(dict.fromkeys(shown)) == ["0%", "20%", "40%", "60%", "80%", "100%"]  # close shows 100% again


def test_a_long_step_is_announced_with_its_time_and_a_short_one_is_not(capsys):
    say_how_long("encoding", 540_000_000, 10e6)  # 54 s
    assert capsys.readouterr().out == ("encoding 540,000,000 characters: about 1 min on two CPU cores "
                                       "(measured: 10.0M characters a second)\n")
    say_how_long("encoding", 2_700_000, 10e6)
    assert capsys.readouterr().out == ""
