"""Progress bars: tqdm's on a terminal, and readable lines in a log file.

A terminal redraws one line in place with carriage returns, many times a second. Redirected to a file
(`train.py > run.log 2>&1`) the same bar would leave thousands of redraws on one line; there a bar prints a
line of its own every LOG_INTERVAL seconds instead.
"""

import sys

from tqdm import tqdm

LOG_INTERVAL = 10.0  # seconds between progress lines when the output goes to a file or a pipe, not a terminal


class _Lines:
    """Where a progress bar writes when its stream is not a terminal: each update becomes a line of its own
    (a terminal redraws one line with carriage returns; a log file would keep every redraw on one line)."""

    def __init__(self, stream):
        self.stream, self.last = stream, None

    def write(self, text: str) -> None:
        text = text.replace("\r", "").rstrip()
        if text and text != self.last:  # dropped: redraws that only clear the line, and repeats (at close)
            self.stream.write(text + "\n")
            self.last = text

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(iterable=None, **options) -> tqdm:
    """tqdm's bar on a terminal; in a log file, a line every LOG_INTERVAL seconds instead of hundreds of
    redraws a second."""
    stream = options.pop("file", sys.stderr)
    if not stream.isatty():
        stream, options["mininterval"] = _Lines(stream), LOG_INTERVAL
    return tqdm(iterable, file=stream, dynamic_ncols=True, **options)


def progress(total: int, initial: int = 0, desc: str = "train") -> tqdm:
    """A progress bar over optimizer steps; `initial` makes a resumed run start where it stopped."""
    return progress_bar(total=total, initial=initial, desc=desc, unit="step")


def close_bars() -> None:
    """Close every open bar now. A bar left open redraws itself as the program exits, below the program's last
    words (tqdm keeps its open bars in `tqdm._instances`)."""
    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


def say_how_long(doing: str, characters: int, characters_per_second: float) -> None:
    """Before a step that takes a while, one line: what it does and about how long it takes, from the rate the
    course measured on two CPU cores (the chapter's README says how). Steps under half a minute go unsaid."""
    seconds = characters / characters_per_second
    if seconds >= 30:
        print(f"{doing} {characters:,} characters: about {max(1, round(seconds / 60))} min on two CPU cores "
              f"(measured: {characters_per_second / 1e6:.1f}M characters a second)")
