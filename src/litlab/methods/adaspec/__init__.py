"""AdaSpec: Adaptive Spectrum for Enhanced Node Distinguishability (Liu & Wang, ICLR 2026)."""
