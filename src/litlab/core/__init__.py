"""Foundations every layer may use: errors, data paths, caches, the results schema, figures, SLURM facts."""
