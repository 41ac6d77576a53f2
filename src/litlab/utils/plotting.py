"""Saving figures from tasks (which have no Trainer) into the run folder."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def save_figure(figure: Figure, output_dir: Path, name: str) -> Path:
    """Write ``figure`` to ``<output_dir>/plots/<name>.png`` and close it."""
    path = Path(output_dir) / "plots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path
