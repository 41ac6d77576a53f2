"""Fused or sparse compute kernels, each with a pure-torch reference beside it."""
