"""litlab: a Lightning + Hydra trainer in which each ICLR 2026 paper is a tested, runnable method."""

__version__ = "0.1.0"
