"""Minimax-optimal aggregation for density-ratio estimation (Gruber et al., ICLR 2026)."""
