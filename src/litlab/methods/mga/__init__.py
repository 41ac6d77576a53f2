"""MGA (Hao et al., ICLR 2026, arXiv 2502.04235): massive genre–audience reformulation of pre-training
data."""
