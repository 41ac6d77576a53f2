"""Initialization Schemes for Kolmogorov-Arnold Networks (Rigas et al., ICLR 2026)."""
