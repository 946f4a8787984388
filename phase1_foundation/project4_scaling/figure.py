"""A blank figure, and saving it: the two helpers behind every figure of this chapter (sweep_figures.py's
and emergence.py's)."""

from pathlib import Path


def new_figure(width: float = 6.4, height: float = 4.8):
    # Imported here: matplotlib takes seconds to load and only the plots need it. A bare Figure renders with
    # the Agg backend and needs no display.
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def save_figure(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path
