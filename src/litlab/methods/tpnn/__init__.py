"""Bayesian-TPNN (Park et al., ICLR 2026): Bayesian tensor-product networks for the functional ANOVA model."""
