"""The Bayesian-TPNN posterior over node sets, and the probability of every reversible-jump proposal.

State: up to K_max nodes (subset S_k, per-edge (b, log gamma)); beta integrated out (``gaussian.py``).
Unnormalised log target, for fixed sigma^2:

    log pi = log p(y | nodes, sigma^2) + log pi(K) + sum_k [log pi(S_k) + sum_{j in S_k} log pi(b_kj, l_kj)].

Moves (one of birth / death / edge, with probabilities ``move_probs(K)``):

- Birth: with probability M / (M + K) a *Random* node (size d ~ w_d, S ~ p_input among subsets of size d,
  every edge's (b, l) from the edge proposal q0); otherwise *Stepwise*: a parent k uniform among the K
  nodes is copied (its (b, l) jittered by the copy kernel kappa) and one edge j ~ p_input(. | S_k^c) with
  (b, l) ~ q0 is added (a parent already at the largest order proposes nothing). Density of a new node v:
      q_birth(v) = P_birth(K) / (K + 1) [rho q_rand(v)
                                        + (1 - rho) (1/K) sum_{parents k of v} p(j*|S_k^c) q0(j*) prod kappa].
- Death: a node uniform among the K; q_death = P_death(K) / K.
- Edge (on a node uniform among the K): add j ~ p_input(. | S^c) with q0 parameters, delete a uniform edge,
  or change a uniform edge's variable to j' ~ p_input(. | S^c) with fresh q0 parameters; the three are
  equally likely among those possible at the node's size.

The target lives on ordered node lists (the K! orderings of a set carry equal mass, as nodes are i.i.d.
under the prior): a birth inserts v at a uniform one of the K + 1 positions, a death removes a uniform
one of the K. The slots store the list in any order, which the symmetric target cannot tell apart.
Each acceptance is min(1, pi(new) q(new -> old) / (pi(old) q(old -> new))), with both q's from the functions
below (``birth_log_q``, ``death_log_q``, ``edge_log_q``); the position factors 1/(K + 1) cancel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from litlab.methods.tpnn.basis import by_variable, train_basis
from litlab.methods.tpnn.priors import (
    CopyKernel,
    ParameterLaw,
    VariableLaw,
    log_subset_prior,
    size_weights,
)

MOVES = ("birth", "death", "edge")
EDGE_TYPES = ("add", "delete", "change")


@dataclass(frozen=True)
class Node:
    """One node: ``vars: (D,)`` sorted and padded with p, ``b, log_gamma: (D,)`` (0 at padding)."""

    vars: torch.Tensor
    b: torch.Tensor
    log_gamma: torch.Tensor

    @classmethod
    def make(
        cls, variables: list[int], b: list[float], log_gamma: list[float], max_order: int, p: int
    ) -> Node:
        """A node from unsorted lists, sorted by variable and padded to ``max_order``."""
        order = sorted(range(len(variables)), key=lambda i: variables[i])
        pad = max_order - len(variables)
        return cls(
            torch.tensor([variables[i] for i in order] + [p] * pad, dtype=torch.long),
            torch.tensor([float(b[i]) for i in order] + [0.0] * pad, dtype=torch.float64),
            torch.tensor([float(log_gamma[i]) for i in order] + [0.0] * pad, dtype=torch.float64),
        )

    def edges(self, p: int) -> list[tuple[int, float, float]]:
        """(variable, b, log gamma) of every edge."""
        size = int((self.vars < p).sum())
        return list(zip(self.vars[:size].tolist(), self.b[:size].tolist(), self.log_gamma[:size].tolist()))

    def key(self, p: int) -> tuple:
        """A hashable identity (subset and parameters)."""
        return tuple(self.edges(p))


def dense(vars: torch.Tensor, values: torch.Tensor, p: int) -> torch.Tensor:
    """Scatter ``values: (..., D)`` at ``vars`` into ``(..., p)`` (padding dropped)."""
    out = torch.zeros((*vars.shape[:-1], p + 1), dtype=values.dtype)
    out.scatter_(-1, vars, values)
    return out[..., :p]


def subset_mask(vars: torch.Tensor, p: int) -> torch.Tensor:
    """Boolean membership ``(..., p)`` of the subsets in ``vars: (..., D)``."""
    return dense(vars, torch.ones_like(vars, dtype=torch.bool), p)


class TPNNPosterior:
    """Data, priors and proposal laws of one Bayesian-TPNN fit, and the log densities of its moves.

    Args:
        x: ``(n, p)`` inputs scaled to [0, 1]; y: ``(n,)`` standardised responses (both float64).
        input_weights: p_input, ``(p,)`` positive; normalised here.
        edge_prior, edge_proposal: laws of one edge's (b, log gamma) (``EdgePrior``, ``EdgeProposal``).
        copy_kernel: the Stepwise birth's jitter of a parent's parameters (``priors.GaussianCopy``).
        max_nodes, max_order: K_max and the largest subset size D.
        c0: the node-count prior's exp(-C0 K log n); p_add_alpha, p_add_gamma: the subset-size prior.
        beta_var: prior variance s of every beta_k; random_birth_mass: M of the Random/Stepwise mixture.
        birth_death, stepwise: ablation switches (False: no dimension change / Random births only).
    """

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        input_weights: torch.Tensor,
        edge_prior: ParameterLaw,
        edge_proposal: ParameterLaw,
        copy_kernel: CopyKernel,
        max_nodes: int = 50,
        max_order: int = 4,
        c0: float = 1.0,
        p_add_alpha: float = 0.95,
        p_add_gamma: float = 1.0,
        beta_var: float = 1.0,
        random_birth_mass: float = 10.0,
        birth_death: bool = True,
        stepwise: bool = True,
    ) -> None:
        self.x, self.y = x.to(torch.float64), y.to(torch.float64)
        self.xt = by_variable(self.x)
        self.n, self.p = x.shape
        self.yty = float(self.y @ self.y)
        self.max_nodes, self.max_order = max_nodes, max_order
        self.top_order = min(max_order, self.p)
        self.c0, self.beta_var = c0, beta_var
        self.log_size_weights = size_weights(max_order, self.p, p_add_alpha, p_add_gamma).log()
        weights = input_weights.to(torch.float64)
        self.variables = VariableLaw(weights / weights.sum(), self.top_order)
        self.edge_prior, self.edge_proposal, self.copy_kernel = edge_prior, edge_proposal, copy_kernel
        self.random_birth_mass = random_birth_mass
        self.birth_death, self.stepwise = birth_death, stepwise

    # ---- the target ------------------------------------------------------------------------------
    def log_count_prior(self, k: int) -> float:
        """log pi(K = k) up to a constant."""
        return -self.c0 * k * math.log(self.n)

    def node_log_prior(self, vars: torch.Tensor, b: torch.Tensor, log_gamma: torch.Tensor) -> torch.Tensor:
        """log pi(S) + sum_j log pi(b_j, l_j) for nodes ``(..., D)``: (...)."""
        valid = vars < self.p
        edge = torch.where(valid, self.edge_prior.log_prob(b, log_gamma), 0.0).sum(-1)
        return log_subset_prior(valid.sum(-1), self.log_size_weights, self.p) + edge

    def column(self, node: Node) -> torch.Tensor:
        """phi_node on the training inputs with its sum-to-zero constants: (n,)."""
        return train_basis(self.xt, node.vars[None], node.b[None], node.log_gamma[None])[:, 0]

    # ---- move probabilities ------------------------------------------------------------------------
    def move_probs(self, k: int) -> tuple[float, float, float]:
        """(P_birth, P_death, P_edge) with k nodes: 1/4, 1/4, 1/2 among the moves possible at k."""
        birth = 0.25 * (self.birth_death and k < self.max_nodes)
        death = 0.25 * (self.birth_death and k > 0)
        edge = 0.5 * (k > 0)
        total = birth + death + edge
        return (birth / total, death / total, edge / total) if total else (0.0, 0.0, 0.0)

    def edge_type_probs(self, size: int) -> tuple[float, float, float]:
        """(P_add, P_delete, P_change) for a node of ``size`` edges: uniform over the possible types."""
        possible = (size < self.top_order, size > 1, size < self.p)
        count = sum(possible)
        return tuple(float(ok) / count for ok in possible)  # type: ignore[return-value]

    def random_birth_prob(self, k: int) -> float:
        """rho = M / (M + K): the Random part of the birth mixture (1 without Stepwise or nodes)."""
        return 1.0 if not self.stepwise or k == 0 else self.random_birth_mass / (self.random_birth_mass + k)

    # ---- proposal densities ------------------------------------------------------------------------
    def random_log_q(self, node: Node) -> torch.Tensor:
        """log q_rand(v) = log w_|S| + log P(S | |S|; p_input) + sum_j log q0(b_j, l_j)."""
        mask = subset_mask(node.vars, self.p)
        valid = node.vars < self.p
        size = int(valid.sum())
        edge = torch.where(valid, self.edge_proposal.log_prob(node.b, node.log_gamma), 0.0).sum()
        return self.log_size_weights[size - 1] + self.variables.log_prob_subset(mask) + edge

    def stepwise_log_q(
        self, vars: torch.Tensor, b: torch.Tensor, lg: torch.Tensor, active: torch.Tensor, node: Node
    ):
        """log of (1/K) sum over the parents k of v of p(j* | S_k^c) q0(b_j*, l_j*) prod_{S_k} kappa."""
        k = int(active.sum())
        mask = subset_mask(node.vars, self.p)
        parents = subset_mask(vars, self.p)  # (K_max, p)
        size = int(mask.sum())
        is_parent = active & ~(parents & ~mask).any(-1) & (parents.sum(-1) == size - 1)
        if k == 0 or not bool(is_parent.any()):
            return torch.tensor(-math.inf, dtype=torch.float64)
        extra = (mask & ~parents).to(torch.float64).argmax(-1)  # j* for each parent
        node_b, node_lg = dense(node.vars, node.b, self.p), dense(node.vars, node.log_gamma, self.p)
        pick = self.variables.log_prob_one(extra, parents)
        fresh = self.edge_proposal.log_prob(node_b[extra], node_lg[extra])
        copied = self.copy_kernel.log_prob(node_b, node_lg, dense(vars, b, self.p), dense(vars, lg, self.p))
        copied = torch.where(parents, copied, 0.0).sum(-1)
        terms = torch.where(is_parent, pick + fresh + copied, -math.inf)
        return torch.logsumexp(terms, 0) - math.log(k)

    def birth_log_q(self, vars, b, lg, active, node: Node) -> torch.Tensor:
        """log q(nodes -> nodes + v): birth of ``v`` at one of the K + 1 positions (move choice included)."""
        k = int(active.sum())
        p_birth = self.move_probs(k)[0]
        rho = self.random_birth_prob(k)
        log_q = math.log(rho) + self.random_log_q(node)
        if rho < 1:
            log_q = torch.logaddexp(log_q, math.log(1 - rho) + self.stepwise_log_q(vars, b, lg, active, node))
        if p_birth == 0:
            return torch.tensor(-math.inf, dtype=torch.float64)
        return math.log(p_birth) - math.log(k + 1) + log_q

    def death_log_q(self, k: int) -> float:
        """log q(nodes -> nodes - v) for the death of one given node among ``k`` (move choice included)."""
        p_death = self.move_probs(k)[1]
        return math.log(p_death / k) if p_death > 0 else -math.inf

    def edge_log_q(self, k: int, old: Node, new: Node) -> torch.Tensor:
        """log q(old -> new) of the edge move that turns node ``old`` into ``new`` (one of ``k`` nodes)."""
        old_edges, new_edges = dict(_edge_map(old, self.p)), dict(_edge_map(new, self.p))
        added = [j for j in new_edges if j not in old_edges]
        removed = [j for j in old_edges if j not in new_edges]
        size = len(old_edges)
        p_add, p_delete, p_change = self.edge_type_probs(size)
        log_pick_node = math.log(self.move_probs(k)[2] / k)
        old_mask = subset_mask(old.vars, self.p)
        if len(added) == 1 and not removed:
            j = added[0]
            b, lg = new_edges[j]
            return log_pick_node + math.log(p_add) + self._one(j, old_mask) + self._q0(b, lg)
        if len(removed) == 1 and not added:
            return log_pick_node + math.log(p_delete) - math.log(size)
        if len(added) == 1 and len(removed) == 1:
            j = added[0]
            b, lg = new_edges[j]
            return (
                log_pick_node + math.log(p_change) - math.log(size) + self._one(j, old_mask) + self._q0(b, lg)
            )
        raise ValueError("edge_log_q: the two nodes differ by more than one edge")

    def _one(self, j: int, excluded: torch.Tensor) -> torch.Tensor:
        return self.variables.log_prob_one(torch.tensor(j), excluded)

    def _q0(self, b: float, lg: float) -> torch.Tensor:
        return self.edge_proposal.log_prob(
            torch.tensor(b, dtype=torch.float64), torch.tensor(lg, dtype=torch.float64)
        )


def _edge_map(node: Node, p: int) -> list[tuple[int, tuple[float, float]]]:
    return [(j, (b, lg)) for j, b, lg in node.edges(p)]
