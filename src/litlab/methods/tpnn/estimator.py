"""Bayesian-TPNN as an estimator: scale the data, run the chain, predict with posterior draws, read out
the functional ANOVA components.

Inputs are min-max scaled to [0, 1] with the training ranges (the prior b ~ U(0, 1) lives there) and the
response is standardised; predictions and component norms are returned on the original scale.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from litlab.core.errors import ConfigError
from litlab.methods.tpnn.basis import basis, by_variable
from litlab.methods.tpnn.posterior import TPNNPosterior
from litlab.methods.tpnn.priors import EdgePrior, EdgeProposal, GaussianCopy
from litlab.methods.tpnn.sampler import Draws, Sampler, snapshot, stack_draws


@dataclass
class TPNNConfig:
    """Hyperparameters of Bayesian-TPNN (priors, proposals, sampler); defaults are the CPU-sized ones."""

    n_iter: int = 1500
    burn_in: int = 750
    thin: int = 5
    max_nodes: int = 50
    max_order: int = 4
    initial_nodes: int = 10
    c0: float = 1.0
    p_add_alpha: float = 0.95
    p_add_gamma: float = 1.0
    beta_var: float = 1.0
    gamma_shape: float = 1.0
    gamma_rate: float = 0.01
    sigma_shape: float = 1.0
    sigma_scale: float = 0.1
    proposal_log_gamma_mean: float = math.log(0.1)
    proposal_log_gamma_std: float = 1.5
    copy_b_std: float = 0.05
    copy_log_gamma_std: float = 0.2
    random_birth_mass: float = 10.0
    moves_per_iter: int = 5
    langevin_step: float = 1e-3
    log_gamma_ratio: float = 25.0
    adapt_step: bool = True
    birth_death: bool = True
    stepwise: bool = True
    langevin: bool = True

    def check(self) -> None:
        """One ConfigError naming every impossible value."""
        problems = []
        if self.burn_in >= self.n_iter:
            problems.append(f"burn_in={self.burn_in} must be below n_iter={self.n_iter}")
        for name in ("thin", "max_nodes", "max_order", "moves_per_iter"):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)} must be at least 1")
        if not 0 <= self.initial_nodes <= self.max_nodes:
            problems.append(f"initial_nodes={self.initial_nodes} must be in [0, max_nodes={self.max_nodes}]")
        for name in ("beta_var", "gamma_shape", "gamma_rate", "sigma_shape", "sigma_scale", "langevin_step"):
            if getattr(self, name) <= 0:
                problems.append(f"{name}={getattr(self, name)} must be positive")
        if not 0 < self.p_add_alpha < 1:
            problems.append(f"p_add_alpha={self.p_add_alpha} must be in (0, 1)")
        if not self.birth_death and self.initial_nodes == 0:
            problems.append("birth_death=false needs initial_nodes > 0 (the node count never changes)")
        if problems:
            raise ConfigError("tpnn: " + "; ".join(problems))


@dataclass
class Component:
    """One functional ANOVA component of the posterior: its variables, mean L2 norm and inclusion rate."""

    variables: tuple[int, ...]
    norm: float
    inclusion: float


@dataclass
class FitTrace:
    """Per-iteration node count, noise variance and collapsed log-likelihood; acceptance rates; seconds."""

    n_nodes: list[int] = field(default_factory=list)
    sigma2: list[float] = field(default_factory=list)
    log_ml: list[float] = field(default_factory=list)
    acceptance: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class BayesianTPNN:
    """Bayesian tensor-product networks for the functional ANOVA model (Gaussian likelihood)."""

    def __init__(self, config: TPNNConfig | None = None, seed: int = 0) -> None:
        self.config = config or TPNNConfig()
        self.config.check()
        self.seed = seed
        self.draws: Draws | None = None

    def fit(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        input_weights: torch.Tensor | None = None,
        callback: Callable[[int], None] | None = None,
    ) -> BayesianTPNN:
        """Run the chain on ``x: (n, p)``, ``y: (n,)``; ``input_weights`` is p_input (None: uniform)."""
        cfg = self.config
        x, y = x.to(torch.float64), y.to(torch.float64).reshape(-1)
        if x.ndim != 2 or len(x) != len(y) or len(y) < 2:
            raise ConfigError(
                f"tpnn.fit needs x (n, p) and y (n,) with n >= 2; got {tuple(x.shape)}, {tuple(y.shape)}"
            )
        self.x_low, self.x_range = x.min(0).values, (x.max(0).values - x.min(0).values).clamp_min(1e-12)
        self.y_mean, self.y_std = float(y.mean()), float(y.std()) or 1.0
        self.x_train = self.scale(x)
        self.p = x.shape[1]
        weights = torch.ones(self.p) if input_weights is None else input_weights
        if weights.shape != (self.p,) or bool((weights <= 0).any()):
            raise ConfigError(f"input_weights must be {self.p} positive numbers")
        self.posterior = TPNNPosterior(
            self.x_train,
            (y - self.y_mean) / self.y_std,
            weights,
            EdgePrior(cfg.gamma_shape, cfg.gamma_rate),
            EdgeProposal(cfg.proposal_log_gamma_mean, cfg.proposal_log_gamma_std),
            GaussianCopy(cfg.copy_b_std, cfg.copy_log_gamma_std),
            max_nodes=cfg.max_nodes,
            max_order=cfg.max_order,
            c0=cfg.c0,
            p_add_alpha=cfg.p_add_alpha,
            p_add_gamma=cfg.p_add_gamma,
            beta_var=cfg.beta_var,
            random_birth_mass=cfg.random_birth_mass,
            birth_death=cfg.birth_death,
            stepwise=cfg.stepwise,
        )
        sampler = Sampler(
            self.posterior,
            self.seed,
            sigma_shape=cfg.sigma_shape,
            sigma_scale=cfg.sigma_scale,
            moves_per_iter=cfg.moves_per_iter,
            langevin=cfg.langevin,
            langevin_step=cfg.langevin_step,
            log_gamma_ratio=cfg.log_gamma_ratio,
            adapt_step=cfg.adapt_step,
        )
        state = sampler.initial_state(cfg.initial_nodes)
        trace, kept = FitTrace(), []
        start = time.perf_counter()
        for t in range(cfg.n_iter):
            sampler.iterate(state, t, cfg.burn_in)
            trace.n_nodes.append(state.k)
            trace.sigma2.append(state.sigma2 * self.y_std**2)
            trace.log_ml.append(state.log_ml)
            if t >= cfg.burn_in and (t - cfg.burn_in) % cfg.thin == 0:
                kept.append(snapshot(state, self.posterior.xt))
            if callback is not None:
                callback(t)
        trace.seconds = time.perf_counter() - start
        trace.acceptance = sampler.stats.rates()
        self.trace, self.draws, self.stats = trace, stack_draws(kept), sampler.stats
        return self

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        """Inputs on the training [0, 1] scale."""
        return (x.to(torch.float64) - self.x_low) / self.x_range

    def _require_fit(self) -> Draws:
        if self.draws is None:
            raise ConfigError("BayesianTPNN: call fit before predicting")
        return self.draws

    def node_basis(self, x_scaled: torch.Tensor, chunk: int = 64) -> torch.Tensor:
        """phi of every node of every draw at scaled inputs: (S, n, K_max), zero on inactive slots."""
        d = self._require_fit()
        xt, out = by_variable(x_scaled), []
        for s in range(0, len(d.beta), chunk):
            sl = slice(s, s + chunk)
            vars, b, lg, c = d.vars[sl], d.b[sl], d.log_gamma[sl], d.c[sl]
            size, k_max, depth = vars.shape
            flat = basis(
                xt, vars.reshape(-1, depth), b.reshape(-1, depth), lg.reshape(-1, depth), c.reshape(-1, depth)
            )
            out.append(flat.reshape(-1, size, k_max).permute(1, 0, 2) * d.active[sl][:, None, :])
        return torch.cat(out)

    def predict_draws(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior draws of f(x) ``(S, n)`` and of the noise sd ``(S,)``, on the original scale."""
        d = self._require_fit()
        phi = self.node_basis(self.scale(x))
        f = torch.einsum("snk,sk->sn", phi, d.beta)
        return self.y_mean + self.y_std * f, self.y_std * d.sigma2.sqrt()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """The posterior predictive mean: (n,)."""
        return self.predict_draws(x)[0].mean(0)

    def components(self) -> list[Component]:
        """Posterior mean of ||f_S||_{2,n} on the training inputs (0 in draws without S) and the share of
        draws that contain S, for every subset S met in the draws; largest norm first."""
        d = self._require_fit()
        phi = self.node_basis(self.x_train)
        contributions = phi * d.beta[:, None, :]  # (S, n, K_max)
        totals: dict[tuple[int, ...], list[float]] = {}
        for s in range(len(d.beta)):
            keys: dict[tuple[int, ...], list[int]] = {}
            for slot in d.active[s].nonzero()[:, 0].tolist():
                key = tuple(v for v in d.vars[s, slot].tolist() if v < self.p)
                keys.setdefault(key, []).append(slot)
            for key, slots in keys.items():
                norm = float(contributions[s][:, slots].sum(-1).square().mean().sqrt()) * self.y_std
                entry = totals.setdefault(key, [0.0, 0.0])
                entry[0] += norm
                entry[1] += 1
        size = len(d.beta)
        found = [Component(key, total / size, count / size) for key, (total, count) in totals.items()]
        return sorted(found, key=lambda c: -c.norm)
