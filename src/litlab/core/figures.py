"""The one figure saver: a matplotlib figure becomes ``<folder>/plots/<name>.png`` (the Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def save_figure(figure: Figure, output_dir: str | Path, name: str, close: bool = True) -> Path:
    """Write ``figure`` to ``<output_dir>/plots/<name>.png``; close it unless ``close=False``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(output_dir) / "plots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    if close:
        plt.close(figure)
    return path
