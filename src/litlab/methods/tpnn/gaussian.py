"""The Gaussian likelihood with the coefficients integrated out, and the conjugate draws of beta and sigma^2.

Model: y = Phi beta + e, e ~ N(0, sigma^2 I), beta_k ~ N(0, s) for the K active nodes. With beta
integrated out, y ~ N(0, sigma^2 I + s Phi Phi^T), and with A = Phi^T Phi + (sigma^2 / s) I, u = Phi^T y
(Woodbury and the matrix determinant lemma):

    log p(y | Phi, sigma^2) = -1/2 [n log(2 pi sigma^2) + log|A| + K log(s / sigma^2)
                                    + (y^T y - u^T A^-1 u) / sigma^2].

Node slots are padded to a fixed K_max: an inactive slot has a zero column, and its row and column of A
are the identity, which adds nothing to log|A| or to u^T A^-1 u.
"""

from __future__ import annotations

import math

import torch


def regularised_gram(
    gram: torch.Tensor, active: torch.Tensor, sigma2: float, beta_var: float
) -> torch.Tensor:
    """A = G + diag(sigma^2 / s on active slots, 1 on inactive ones): (K_max, K_max); G is zero off-active."""
    return gram + torch.diag(torch.where(active, sigma2 / beta_var, 1.0).to(gram.dtype))


def log_marginal_likelihood(
    gram: torch.Tensor,
    phi_y: torch.Tensor,
    active: torch.Tensor,
    yty: float,
    n: int,
    sigma2: float,
    beta_var: float,
) -> torch.Tensor:
    """log p(y | nodes, sigma^2) with beta integrated out (module docstring); ``gram = Phi^T Phi``."""
    chol = torch.linalg.cholesky(regularised_gram(gram, active, sigma2, beta_var))
    logdet = 2 * chol.diagonal().log().sum()
    alpha = torch.linalg.solve_triangular(chol, phi_y[:, None], upper=False)[:, 0]
    k = active.sum()
    return -0.5 * (
        n * math.log(2 * math.pi * sigma2)
        + logdet
        + k * math.log(beta_var / sigma2)
        + (yty - alpha.square().sum()) / sigma2
    )


def sample_beta(
    gram: torch.Tensor,
    phi_y: torch.Tensor,
    active: torch.Tensor,
    sigma2: float,
    beta_var: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """beta | y, nodes, sigma^2 ~ N(A^-1 u, sigma^2 A^-1), zero on inactive slots: (K_max,)."""
    chol = torch.linalg.cholesky(regularised_gram(gram, active, sigma2, beta_var))
    mean = torch.cholesky_solve(phi_y[:, None], chol)[:, 0]
    z = torch.randn(len(phi_y), generator=generator, dtype=gram.dtype)
    # A = L L^T, so L^-T z has covariance A^-1.
    noise = torch.linalg.solve_triangular(chol.T, z[:, None], upper=True)[:, 0]
    return torch.where(active, mean + math.sqrt(sigma2) * noise, torch.zeros_like(mean))


def sample_noise_variance(
    residual: torch.Tensor, shape: float, scale: float, generator: torch.Generator
) -> float:
    """sigma^2 | beta, y ~ InvGamma(a + n/2, b + |r|^2 / 2) under the prior InvGamma(a, b)."""
    a = shape + 0.5 * len(residual)
    rate = scale + 0.5 * float(residual.square().sum())
    g = torch._standard_gamma(torch.tensor([a], dtype=torch.float64), generator=generator)
    return rate / float(g)
