"""DeepWeightFlow (ICLR 2026): flow matching over canonicalised network weights."""
