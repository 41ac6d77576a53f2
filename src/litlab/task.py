"""The task contract: ``litlab-run task=<paper>/<name>`` calls ``task(ctx)`` and writes what it returns.

A task is any callable configured with ``_partial_: true`` whose first argument is a :class:`TaskContext`
and which returns a :class:`~litlab.core.results.TaskOutput` dict (``metrics``, ``tables``, ``figures``).
It trains through ``ctx.fitter`` (so ``trainer=`` and ``resources`` reach it), writes any extra files
into ``ctx.output_dir``, and leaves ``results.json``, the tables and the plots to the entry point.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from litlab.core.results import TaskOutput
    from litlab.fitting import Fitter


@dataclass
class TaskContext:
    """What a task gets from the entry point: its run folder, a Fitter for the run's devices, the seed,
    and the run's ``extras.torch_threads`` (None when the user left torch's default)."""

    output_dir: Path
    fitter: Fitter
    seed: int = 0
    torch_threads: int | None = None

    def pin_threads(self, default: int) -> int:
        """Set torch's CPU threads to ``extras.torch_threads`` when the run named it, else to ``default``.

        For tasks whose published numbers should not depend on the machine's core count (one thread makes
        the float sums the same everywhere): the task picks the default, the user's ``extras`` still wins.
        """
        import torch

        threads = self.torch_threads or default
        torch.set_num_threads(threads)
        return threads

    @classmethod
    def local(cls, output_dir: str | Path, seed: int = 0) -> TaskContext:
        """A context for one CPU process (tests, notebooks, benchmarks)."""
        from litlab.fitting import Fitter

        folder = Path(output_dir)
        folder.mkdir(parents=True, exist_ok=True)
        return cls(output_dir=folder, fitter=Fitter(), seed=seed)


class Task(Protocol):
    """A task callable, as the entry point sees it after Hydra bound the config's parameters."""

    def __call__(self, ctx: TaskContext) -> TaskOutput | None: ...
