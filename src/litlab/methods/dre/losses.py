"""The pseudo-self-concordant Bregman losses of density-ratio estimation posed as classification.

P samples carry label +1, Q samples −1; a model f is fitted by the class-balanced risk
R(f) = mean_P ℓ(+1, f) + mean_Q ℓ(−1, f), whose pointwise minimiser is f* = g⁻¹(β) for the link g below.
With φ(β, f) = ℓ(−1, f) + β ℓ(+1, f), the excess risk is R(f) − R(f*) = E_Q[φ(β, f) − φ(β, f*)] =
E_Q[B_F(β, g(f))], the Bregman divergence of F(β) = −φ(β, f*(β)); the paper's error is twice it
(for KuLSIF, E_Q(β − β̂)²).

=======  ℓ(+1, f)        ℓ(−1, f)      β = g(f)
kulsif   −f              f²/2          f (clipped at 0)
lr       log(1 + e^−f)   log(1 + e^f)  e^f
exp      e^−f            e^f           e^{2f}
sq       (1 − f)²        (1 + f)²      (1 + f)/(1 − f) (f clipped to [−1, 1))
=======
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch.nn import functional as F

from litlab.core.errors import ConfigError


class BregmanLoss(ABC):
    """ℓ(±1, f) with first and second derivatives in f, the link and its inverse; tensors of any shape."""

    name = ""

    @abstractmethod
    def pos(self, f: torch.Tensor) -> torch.Tensor:
        """ℓ(+1, f)."""

    @abstractmethod
    def neg(self, f: torch.Tensor) -> torch.Tensor:
        """ℓ(−1, f)."""

    @abstractmethod
    def d_pos(self, f: torch.Tensor) -> torch.Tensor:
        """∂ℓ(+1, f)/∂f."""

    @abstractmethod
    def d_neg(self, f: torch.Tensor) -> torch.Tensor:
        """∂ℓ(−1, f)/∂f."""

    @abstractmethod
    def dd_pos(self, f: torch.Tensor) -> torch.Tensor:
        """∂²ℓ(+1, f)/∂f²."""

    @abstractmethod
    def dd_neg(self, f: torch.Tensor) -> torch.Tensor:
        """∂²ℓ(−1, f)/∂f²."""

    @abstractmethod
    def link(self, f: torch.Tensor) -> torch.Tensor:
        """β̂ = g(f), clipped into the ratio's range [0, ∞)."""

    @abstractmethod
    def inverse_link(self, beta: torch.Tensor) -> torch.Tensor:
        """f* = g⁻¹(β), the minimiser of φ(β, ·)."""

    def clip(self, f: torch.Tensor) -> torch.Tensor:
        """f projected onto the link's domain (lowers φ(β, f) for every β ≥ 0)."""
        return f

    def risk(self, f_p: torch.Tensor, f_q: torch.Tensor) -> torch.Tensor:
        """mean_P ℓ(+1, f) + mean_Q ℓ(−1, f) over the last dimension, ``f_p: (..., M)``, ``f_q: (..., N)``."""
        return self.pos(f_p).mean(-1) + self.neg(f_q).mean(-1)

    def pointwise(self, beta: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """φ(β, f) = ℓ(−1, f) + β ℓ(+1, f): the risk's integrand w.r.t. Q at a point with ratio β."""
        return self.neg(f) + beta * self.pos(f)

    def excess(self, beta: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """B_F(β, g(f)) = φ(β, clip(f)) − φ(β, f*), elementwise (β > 0)."""
        return self.pointwise(beta, self.clip(f)) - self.pointwise(beta, self.inverse_link(beta))

    def error(self, beta: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """The paper's error 2·E_Q B_F(β, β̂), a mean over Q points in the last dimension."""
        return 2 * self.excess(beta, f).mean(-1)

    def bayes_risk(self, beta_q: torch.Tensor) -> torch.Tensor:
        """R(f*) = E_Q φ(β, f*(β)) from the true ratio at Q points (a mean over the last dimension)."""
        return self.pointwise(beta_q, self.inverse_link(beta_q)).mean(-1)

    def risk_error(self, f_p: torch.Tensor, f_q: torch.Tensor, bayes_risk: float) -> torch.Tensor:
        """The same error as 2(R(f̂) − R(f*)), R(f̂) from fresh P and Q points: f̂ is bounded where β is not,
        so this estimate has far less Monte Carlo noise than averaging B_F(β, β̂) over Q."""
        return 2 * (self.risk(self.clip(f_p), self.clip(f_q)) - bayes_risk)


class KuLSIF(BregmanLoss):
    """Least squares on β itself: ½ E_Q β̂² − E_P β̂ (KuLSIF/uLSIF/LSIF); the Hessian is 1 on Q, 0 on P."""

    name = "kulsif"

    def pos(self, f: torch.Tensor) -> torch.Tensor:
        return -f

    def neg(self, f: torch.Tensor) -> torch.Tensor:
        return f.square() / 2

    def d_pos(self, f: torch.Tensor) -> torch.Tensor:
        return -torch.ones_like(f)

    def d_neg(self, f: torch.Tensor) -> torch.Tensor:
        return f

    def dd_pos(self, f: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(f)

    def dd_neg(self, f: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(f)

    def link(self, f: torch.Tensor) -> torch.Tensor:
        return f.clamp_min(0)

    def inverse_link(self, beta: torch.Tensor) -> torch.Tensor:
        return beta

    def clip(self, f: torch.Tensor) -> torch.Tensor:
        return f.clamp_min(0)


class Logistic(BregmanLoss):
    """Logistic regression: log(1 + e^{−yf}); β = e^f under the class-balanced risk."""

    name = "lr"

    def pos(self, f: torch.Tensor) -> torch.Tensor:
        return F.softplus(-f)

    def neg(self, f: torch.Tensor) -> torch.Tensor:
        return F.softplus(f)

    def d_pos(self, f: torch.Tensor) -> torch.Tensor:
        return -torch.sigmoid(-f)

    def d_neg(self, f: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(f)

    def dd_pos(self, f: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(f) * torch.sigmoid(-f)

    def dd_neg(self, f: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(f) * torch.sigmoid(-f)

    def link(self, f: torch.Tensor) -> torch.Tensor:
        return f.exp()

    def inverse_link(self, beta: torch.Tensor) -> torch.Tensor:
        return beta.log()


class Exponential(BregmanLoss):
    """The boosting loss e^{−yf}; β = e^{2f}."""

    name = "exp"

    def pos(self, f: torch.Tensor) -> torch.Tensor:
        return (-f).exp()

    def neg(self, f: torch.Tensor) -> torch.Tensor:
        return f.exp()

    def d_pos(self, f: torch.Tensor) -> torch.Tensor:
        return -(-f).exp()

    def d_neg(self, f: torch.Tensor) -> torch.Tensor:
        return f.exp()

    def dd_pos(self, f: torch.Tensor) -> torch.Tensor:
        return (-f).exp()

    def dd_neg(self, f: torch.Tensor) -> torch.Tensor:
        return f.exp()

    def link(self, f: torch.Tensor) -> torch.Tensor:
        return (2 * f).exp()

    def inverse_link(self, beta: torch.Tensor) -> torch.Tensor:
        return beta.log() / 2


class Square(BregmanLoss):
    """The square loss (1 − yf)²; f* = (β − 1)/(β + 1), so β = (1 + f)/(1 − f)."""

    name = "sq"

    def pos(self, f: torch.Tensor) -> torch.Tensor:
        return (1 - f).square()

    def neg(self, f: torch.Tensor) -> torch.Tensor:
        return (1 + f).square()

    def d_pos(self, f: torch.Tensor) -> torch.Tensor:
        return -2 * (1 - f)

    def d_neg(self, f: torch.Tensor) -> torch.Tensor:
        return 2 * (1 + f)

    def dd_pos(self, f: torch.Tensor) -> torch.Tensor:
        return torch.full_like(f, 2.0)

    def dd_neg(self, f: torch.Tensor) -> torch.Tensor:
        return torch.full_like(f, 2.0)

    def link(self, f: torch.Tensor) -> torch.Tensor:
        f = self.clip(f).clamp_max(1 - 1e-9)
        return (1 + f) / (1 - f)

    def inverse_link(self, beta: torch.Tensor) -> torch.Tensor:
        return (beta - 1) / (beta + 1)

    def clip(self, f: torch.Tensor) -> torch.Tensor:
        return f.clamp(-1, 1)


LOSSES: dict[str, BregmanLoss] = {loss.name: loss for loss in (KuLSIF(), Logistic(), Exponential(), Square())}


def get_loss(name: str) -> BregmanLoss:
    """The loss called ``name`` (kulsif, lr, exp, sq)."""
    if name not in LOSSES:
        raise ConfigError(f"unknown Bregman loss {name!r}; choose one of {', '.join(LOSSES)}")
    return LOSSES[name]
