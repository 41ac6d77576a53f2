"""CartanFM: Symmetric Space Learning for Combinatorial Generalization (Jeong, Jung & Kim, ICLR 2026)."""
