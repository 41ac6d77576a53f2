"""Webscale-RL (Cen et al., ICLR 2026, arXiv 2510.06499): pre-training documents to verifiable QA, then RL."""
