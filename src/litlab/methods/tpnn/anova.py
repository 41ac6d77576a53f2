"""ANOVA-TPNN (Park et al., ICML 2025): a fixed-order functional ANOVA model with TPNN components.

f(x) = mu + sum_{S : |S| <= order} f_S(x_S),  f_S = sum_{k=1..K} beta_Sk phi(x_S | b_Sk, gamma_Sk),

with every subset of at most ``order`` inputs present (order 2: p + p(p-1)/2 components; the paper's
ANOVA-T^2PNN) and phi the TPNN basis of ``basis.py``. All nodes are evaluated in one gathered pass. As in
the official code, the sum-to-zero constants are computed from each training batch and frozen for
evaluation (the buffer ``c``); the official code uses a piecewise-linear sigmoid (sparsemoid), we use
the logistic sigmoid of Bayesian-TPNN so the two models share one basis.
"""

from __future__ import annotations

from itertools import combinations

import torch
from torch import nn

from litlab.methods.tpnn.basis import basis, by_variable, sum_to_zero_constants


def subsets_up_to(p: int, order: int) -> list[tuple[int, ...]]:
    """Every subset of 1..order of the p inputs, by order then lexicographically."""
    return [s for d in range(1, order + 1) for s in combinations(range(p), d)]


class ANOVATPNN(nn.Module):
    """All components of order <= ``order``, ``n_basis`` TPNNs each. ``forward(x: (B, p)) -> (B,)``.

    Args:
        n_features: p; order: the largest component order; n_basis: K, TPNNs per component.
        init_seed: seeds the initial locations b ~ U(0, 1) (inputs are scaled to [0, 1]).
    """

    def __init__(self, n_features: int, order: int = 2, n_basis: int = 10, init_seed: int = 0) -> None:
        super().__init__()
        self.n_features, self.order, self.n_basis = n_features, order, n_basis
        self.components = subsets_up_to(n_features, order)
        vars = torch.full((len(self.components), order), n_features, dtype=torch.long)
        for row, subset in enumerate(self.components):
            vars[row, : len(subset)] = torch.tensor(subset)
        self.register_buffer("vars", vars.repeat_interleave(n_basis, 0), persistent=False)
        generator = torch.Generator().manual_seed(init_seed)
        b = torch.rand(len(self.vars), order, generator=generator)
        # The official data-aware init sets the temperature to the largest |x - b| (cutoff 1.0): on [0, 1]
        # inputs that is max(b, 1 - b), a smooth sigmoid to start from.
        self.b = nn.Parameter(b)
        self.log_gamma = nn.Parameter(torch.maximum(b, 1 - b).log())
        self.beta = nn.Parameter(0.01 * torch.randn(len(self.vars), generator=generator))
        self.intercept = nn.Parameter(torch.zeros(()))
        self.register_buffer("c", -torch.ones(len(self.vars), order))

    @property
    def n_components(self) -> int:
        return len(self.components)

    def node_basis(self, x: torch.Tensor) -> torch.Tensor:
        """phi of every node ``(B, N)``; in training mode the constants come from (and are saved from) x."""
        xt = by_variable(x)
        if self.training:
            c = sum_to_zero_constants(xt, self.vars, self.b, self.log_gamma)
            self.c.copy_(c.detach())
        else:
            c = self.c
        return basis(xt, self.vars, self.b, self.log_gamma, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intercept + self.node_basis(x) @ self.beta

    @torch.no_grad()
    def component_norms(self, x: torch.Tensor) -> torch.Tensor:
        """||f_S||_{2,n} of every component on ``x`` (frozen constants): (n_components,)."""
        xt = by_variable(x)
        phi = basis(xt, self.vars, self.b, self.log_gamma, self.c) * self.beta
        per_component = phi.reshape(len(x), self.n_components, self.n_basis).sum(-1)
        return per_component.square().mean(0).sqrt()
