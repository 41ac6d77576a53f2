"""The Bayesian-TPNN MCMC sampler: reversible-jump birth/death/edge moves, Langevin moves, Gibbs draws.

One iteration (the loop over iterations is the paper's algorithm, so it is a Python loop; everything
inside an iteration is vectorised over nodes, edges and data points):

1. ``moves_per_iter`` structural proposals (birth, death or edge; ``posterior.py``), each accepted by
   its reversible-jump ratio under the beta-collapsed target.
2. A Langevin (MALA) move on the locations b and log-temperatures log gamma of every edge jointly,
   with an exact Metropolis-Hastings correction; its step is adapted during burn-in only.
3. beta | rest ~ N(A^-1 u, sigma^2 A^-1) and sigma^2 | beta ~ InvGamma (``gaussian.py``).

The paper takes Langevin steps on beta as well; with a Gaussian likelihood the exact conditional draw
of step 3 is what such steps approximate (README: reconstruction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from litlab.methods.tpnn.basis import sum_to_zero_constants, train_basis
from litlab.methods.tpnn.gaussian import log_marginal_likelihood, sample_beta, sample_noise_variance
from litlab.methods.tpnn.posterior import Node, TPNNPosterior, subset_mask

TARGET_ACCEPT = 0.574  # the optimal MALA acceptance rate (Roberts & Rosenthal 1998)


@dataclass
class ChainState:
    """Nodes in K_max slots (``vars, b, log_gamma: (K_max, D)``, ``active: (K_max,)``), sigma^2, beta,
    and the caches of the collapsed likelihood (``phi: (n, K_max)`` zero off-active, Gram, Phi^T y)."""

    vars: torch.Tensor
    b: torch.Tensor
    log_gamma: torch.Tensor
    active: torch.Tensor
    sigma2: float
    beta: torch.Tensor
    phi: torch.Tensor
    gram: torch.Tensor
    phi_y: torch.Tensor
    log_ml: float = 0.0

    @property
    def k(self) -> int:
        return int(self.active.sum())

    def node(self, slot: int) -> Node:
        return Node(self.vars[slot].clone(), self.b[slot].clone(), self.log_gamma[slot].clone())


@dataclass
class Candidate:
    """The likelihood caches of a state in which one slot holds a new node (or none)."""

    slot: int
    node: Node | None
    column: torch.Tensor
    gram: torch.Tensor
    phi_y: torch.Tensor
    active: torch.Tensor
    log_ml: float


@dataclass
class Stats:
    """Proposal and acceptance counts per move, and the adapted Langevin steps."""

    proposed: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, int] = field(default_factory=dict)
    step: float = 1e-3

    def count(self, move: str, accepted: bool) -> None:
        self.proposed[move] = self.proposed.get(move, 0) + 1
        self.accepted[move] = self.accepted.get(move, 0) + int(accepted)

    def rates(self) -> dict[str, float]:
        return {m: self.accepted[m] / self.proposed[m] for m in self.proposed}


class Sampler:
    """Runs the chain of a ``TPNNPosterior``; every random draw comes from one seeded generator."""

    def __init__(
        self,
        posterior: TPNNPosterior,
        seed: int,
        sigma_shape: float = 1.0,
        sigma_scale: float = 0.1,
        moves_per_iter: int = 5,
        langevin: bool = True,
        langevin_step: float = 1e-3,
        log_gamma_ratio: float = 25.0,
        adapt_step: bool = True,
    ) -> None:
        self.post = posterior
        self.generator = torch.Generator().manual_seed(seed)
        self.sigma_shape, self.sigma_scale = sigma_shape, sigma_scale
        self.moves_per_iter = moves_per_iter
        self.langevin, self.adapt_step = langevin, adapt_step
        self.log_gamma_ratio = log_gamma_ratio
        self.stats = Stats(step=langevin_step)

    # ---- state -------------------------------------------------------------------------------------
    def initial_state(self, n_nodes: int, sigma2: float = 1.0) -> ChainState:
        """``n_nodes`` nodes drawn from the Random birth proposal, beta = 0."""
        post = self.post
        k_max, d = post.max_nodes, post.max_order
        state = ChainState(
            vars=torch.full((k_max, d), post.p, dtype=torch.long),
            b=torch.zeros(k_max, d, dtype=torch.float64),
            log_gamma=torch.zeros(k_max, d, dtype=torch.float64),
            active=torch.zeros(k_max, dtype=torch.bool),
            sigma2=sigma2,
            beta=torch.zeros(k_max, dtype=torch.float64),
            phi=torch.zeros(post.n, k_max, dtype=torch.float64),
            gram=torch.zeros(k_max, k_max, dtype=torch.float64),
            phi_y=torch.zeros(k_max, dtype=torch.float64),
        )
        for slot in range(min(n_nodes, k_max)):
            self._commit(state, self.candidate(state, slot, self.random_node()))
        state.log_ml = self._log_ml(state.gram, state.phi_y, state.active, state.sigma2)
        return state

    def _log_ml(self, gram, phi_y, active, sigma2) -> float:
        post = self.post
        return float(log_marginal_likelihood(gram, phi_y, active, post.yty, post.n, sigma2, post.beta_var))

    def candidate(self, state: ChainState, slot: int, node: Node | None) -> Candidate:
        """The caches with ``slot`` holding ``node`` (None: emptied); O(n K_max + K_max^3)."""
        gram, phi_y, active = state.gram.clone(), state.phi_y.clone(), state.active.clone()
        if node is None:
            column = torch.zeros(self.post.n, dtype=torch.float64)
            gram[slot], gram[:, slot], phi_y[slot], active[slot] = 0.0, 0.0, 0.0, False
        else:
            column = self.post.column(node)
            cross = column @ state.phi
            cross[slot] = column @ column
            gram[slot], gram[:, slot] = cross, cross
            phi_y[slot], active[slot] = column @ self.post.y, True
        log_ml = self._log_ml(gram, phi_y, active, state.sigma2)
        return Candidate(slot, node, column, gram, phi_y, active, log_ml)

    def _commit(self, state: ChainState, cand: Candidate) -> None:
        slot, node = cand.slot, cand.node
        state.phi[:, slot] = cand.column
        state.gram, state.phi_y, state.active, state.log_ml = cand.gram, cand.phi_y, cand.active, cand.log_ml
        if node is None:
            state.vars[slot], state.b[slot], state.log_gamma[slot] = self.post.p, 0.0, 0.0
        else:
            state.vars[slot], state.b[slot], state.log_gamma[slot] = node.vars, node.b, node.log_gamma

    def _accept(self, log_ratio: float) -> bool:
        if math.isnan(log_ratio) or log_ratio == -math.inf:
            return False
        return (
            log_ratio >= 0
            or math.log(float(torch.rand(1, generator=self.generator, dtype=torch.float64))) < log_ratio
        )

    # ---- proposals -----------------------------------------------------------------------------------
    def random_node(self) -> Node:
        """A node from the Random proposal: d ~ w_d, S ~ p_input | d, (b, l) ~ q0 per edge."""
        post = self.post
        d = int(torch.multinomial(post.log_size_weights.exp(), 1, generator=self.generator)) + 1
        variables = post.variables.sample_subset(d, self.generator)
        b, lg = post.edge_proposal.sample((d,), self.generator)
        return Node.make(variables.tolist(), b.tolist(), lg.tolist(), post.max_order, post.p)

    def stepwise_node(self, state: ChainState) -> Node | None:
        """Copy a uniform parent (jittered) and add one edge j ~ p_input(. | S^c); None at the top order."""
        post = self.post
        parent = self._uniform_active_slot(state)
        edges = state.node(parent).edges(post.p)
        if len(edges) >= post.top_order:
            return None
        mask = subset_mask(state.vars[parent], post.p)
        j = post.variables.sample_one(mask, self.generator)
        b, lg = post.copy_kernel.sample(
            torch.tensor([e[1] for e in edges]), torch.tensor([e[2] for e in edges]), self.generator
        )
        b_new, lg_new = post.edge_proposal.sample((1,), self.generator)
        variables = [e[0] for e in edges] + [j]
        return Node.make(
            variables, b.tolist() + b_new.tolist(), lg.tolist() + lg_new.tolist(), post.max_order, post.p
        )

    def edge_node(self, node: Node) -> Node:
        """The node after one add / delete / change of an edge (types uniform among the possible)."""
        post = self.post
        edges = node.edges(post.p)
        probs = torch.tensor(post.edge_type_probs(len(edges)), dtype=torch.float64)
        kind = int(torch.multinomial(probs, 1, generator=self.generator))
        mask = subset_mask(node.vars, post.p)
        if kind == 1:  # delete
            del edges[int(torch.randint(len(edges), (1,), generator=self.generator))]
        else:
            if kind == 2:  # change: drop one edge, then add a variable from outside the old subset
                del edges[int(torch.randint(len(edges), (1,), generator=self.generator))]
            j = post.variables.sample_one(mask, self.generator)
            b, lg = post.edge_proposal.sample((1,), self.generator)
            edges.append((j, float(b), float(lg)))
        variables, bs, lgs = (list(col) for col in zip(*edges))
        return Node.make(variables, bs, lgs, post.max_order, post.p)

    # ---- moves ---------------------------------------------------------------------------------------
    def structural_move(self, state: ChainState) -> None:
        """One birth, death or edge proposal, accepted by its reversible-jump ratio."""
        probs = torch.tensor(self.post.move_probs(state.k))
        move = int(torch.multinomial(probs, 1, generator=self.generator))
        if move == 0:
            self.birth(state)
        elif move == 1:
            self.death(state)
        else:
            self.edge(state)

    def birth_log_ratio(self, state: ChainState, node: Node) -> tuple[float, Candidate]:
        """log [pi(s + v) q_death(s + v -> s)] - log [pi(s) q_birth(s -> s + v)] and the new caches."""
        post, k = self.post, state.k
        slot = int((~state.active).nonzero()[0, 0])
        cand = self.candidate(state, slot, node)
        log_ratio = (
            cand.log_ml
            - state.log_ml
            + post.log_count_prior(k + 1)
            - post.log_count_prior(k)
            + float(post.node_log_prior(node.vars, node.b, node.log_gamma))
            + post.death_log_q(k + 1)
            - float(post.birth_log_q(state.vars, state.b, state.log_gamma, state.active, node))
        )
        return log_ratio, cand

    def death_log_ratio(self, state: ChainState, slot: int) -> tuple[float, Candidate]:
        """log [pi(s - v) q_birth(s - v -> s)] - log [pi(s) q_death(s -> s - v)] for the node in ``slot``."""
        post, k = self.post, state.k
        node = state.node(slot)
        cand = self.candidate(state, slot, None)
        vars = state.vars.clone()
        vars[slot] = post.p
        log_ratio = (
            cand.log_ml
            - state.log_ml
            + post.log_count_prior(k - 1)
            - post.log_count_prior(k)
            - float(post.node_log_prior(node.vars, node.b, node.log_gamma))
            + float(post.birth_log_q(vars, state.b, state.log_gamma, cand.active, node))
            - post.death_log_q(k)
        )
        return log_ratio, cand

    def edge_log_ratio(self, state: ChainState, slot: int, new: Node) -> tuple[float, Candidate]:
        """log [pi(s') q(s' -> s)] - log [pi(s) q(s -> s')] for the node in ``slot`` becoming ``new``."""
        post, k = self.post, state.k
        old = state.node(slot)
        cand = self.candidate(state, slot, new)
        log_ratio = (
            cand.log_ml
            - state.log_ml
            + float(post.node_log_prior(new.vars, new.b, new.log_gamma))
            - float(post.node_log_prior(old.vars, old.b, old.log_gamma))
            + float(post.edge_log_q(k, new, old))
            - float(post.edge_log_q(k, old, new))
        )
        return log_ratio, cand

    def _finish(self, state: ChainState, move: str, log_ratio: float, cand: Candidate) -> None:
        accepted = self._accept(log_ratio)
        if accepted:
            self._commit(state, cand)
        self.stats.count(move, accepted)

    def _uniform_active_slot(self, state: ChainState) -> int:
        slots = state.active.nonzero()[:, 0]
        return int(slots[torch.randint(len(slots), (1,), generator=self.generator)])

    def birth(self, state: ChainState) -> None:
        rho = self.post.random_birth_prob(state.k)
        random = rho >= 1 or float(torch.rand(1, generator=self.generator)) < rho
        node = self.random_node() if random else self.stepwise_node(state)
        if node is None:  # a Stepwise parent already at the top order: a null proposal
            self.stats.count("birth", False)
            return
        self._finish(state, "birth", *self.birth_log_ratio(state, node))

    def death(self, state: ChainState) -> None:
        self._finish(state, "death", *self.death_log_ratio(state, self._uniform_active_slot(state)))

    def edge(self, state: ChainState) -> None:
        slot = self._uniform_active_slot(state)
        self._finish(state, "edge", *self.edge_log_ratio(state, slot, self.edge_node(state.node(slot))))

    # ---- Langevin ------------------------------------------------------------------------------------
    def collapsed_log_target(
        self, vars: torch.Tensor, b: torch.Tensor, log_gamma: torch.Tensor, sigma2: float
    ) -> torch.Tensor:
        """log p(y | nodes, sigma^2) + sum of edge priors for the active nodes ``(K, D)`` only,
        differentiable in (b, log gamma)."""
        post = self.post
        phi = train_basis(post.xt, vars, b, log_gamma)
        active = torch.ones(len(vars), dtype=torch.bool)
        log_ml = log_marginal_likelihood(
            phi.T @ phi, phi.T @ post.y, active, post.yty, post.n, sigma2, post.beta_var
        )
        prior = torch.where(vars < post.p, post.edge_prior.log_prob(b, log_gamma), 0.0).sum()
        return log_ml + prior

    def _value_and_grad(self, vars, b, lg, sigma2) -> tuple[float, torch.Tensor, torch.Tensor]:
        b, lg = b.detach().requires_grad_(True), lg.detach().requires_grad_(True)
        value = self.collapsed_log_target(vars, b, lg, sigma2)
        if not torch.isfinite(value):
            return float(value.detach()), torch.zeros_like(b), torch.zeros_like(lg)
        grad_b, grad_lg = torch.autograd.grad(value, (b, lg))
        return float(value.detach()), grad_b, grad_lg

    def langevin_move(self, state: ChainState, adapt: bool, iteration: int) -> None:
        """One preconditioned MALA step on (b, log gamma) of every active edge, with an exact MH correction.

        Proposal theta' = theta + eps M g(theta) + sqrt(2 eps M) xi, M = diag(1 on b, ``log_gamma_ratio`` on
        log gamma); eps is adapted towards acceptance 0.574 during burn-in (``adapt``) and fixed after.
        """
        if state.k == 0:
            return
        slots = state.active.nonzero()[:, 0]
        vars, b, lg = state.vars[slots], state.b[slots], state.log_gamma[slots]
        valid = (vars < self.post.p).to(torch.float64)
        step_b, step_lg = self.stats.step, self.stats.step * self.log_gamma_ratio
        value, grad_b, grad_lg = self._value_and_grad(vars, b, lg, state.sigma2)
        noise = torch.randn((2, *b.shape), generator=self.generator, dtype=torch.float64)
        b_new = b + valid * (step_b * grad_b + math.sqrt(2 * step_b) * noise[0])
        lg_new = lg + valid * (step_lg * grad_lg + math.sqrt(2 * step_lg) * noise[1])
        value_new, grad_b_new, grad_lg_new = self._value_and_grad(vars, b_new, lg_new, state.sigma2)

        def log_q(to_b, to_lg, from_b, from_lg, g_b, g_lg) -> float:
            rb = (to_b - from_b - step_b * g_b) * valid
            rl = (to_lg - from_lg - step_lg * g_lg) * valid
            return float(-(rb.square().sum() / (4 * step_b) + rl.square().sum() / (4 * step_lg)))

        log_ratio = (
            value_new
            - value
            + log_q(b, lg, b_new, lg_new, grad_b_new, grad_lg_new)
            - log_q(b_new, lg_new, b, lg, grad_b, grad_lg)
        )
        accepted = self._accept(log_ratio)
        if accepted:
            state.b[slots], state.log_gamma[slots] = b_new, lg_new
            self._refresh(state)
        self.stats.count("langevin", accepted)
        if adapt:
            rate = math.exp(min(0.0, log_ratio)) if not math.isnan(log_ratio) else 0.0
            self.stats.step *= math.exp((rate - TARGET_ACCEPT) / (iteration + 10) ** 0.6)

    def _refresh(self, state: ChainState) -> None:
        """Recompute the likelihood caches from the nodes (after a Langevin move)."""
        post = self.post
        slots = state.active.nonzero()[:, 0]
        state.phi = torch.zeros_like(state.phi)
        state.phi[:, slots] = train_basis(post.xt, state.vars[slots], state.b[slots], state.log_gamma[slots])
        state.gram, state.phi_y = state.phi.T @ state.phi, state.phi.T @ post.y
        state.log_ml = self._log_ml(state.gram, state.phi_y, state.active, state.sigma2)

    # ---- Gibbs ---------------------------------------------------------------------------------------
    def gibbs(self, state: ChainState) -> None:
        """beta | nodes, sigma^2, then sigma^2 | beta; the collapsed likelihood is refreshed for sigma^2."""
        post = self.post
        state.beta = sample_beta(
            state.gram, state.phi_y, state.active, state.sigma2, post.beta_var, self.generator
        )
        residual = post.y - state.phi @ state.beta
        state.sigma2 = sample_noise_variance(residual, self.sigma_shape, self.sigma_scale, self.generator)
        state.log_ml = self._log_ml(state.gram, state.phi_y, state.active, state.sigma2)

    def iterate(self, state: ChainState, iteration: int, burn_in: int) -> None:
        """One full MCMC iteration (module docstring)."""
        for _ in range(self.moves_per_iter):
            self.structural_move(state)
        if self.langevin:
            self.langevin_move(state, adapt=self.adapt_step and iteration < burn_in, iteration=iteration)
        self.gibbs(state)


@dataclass
class Draws:
    """Saved posterior draws: nodes ``(S, K_max, D)``, constants ``c``, ``active (S, K_max)``, ``beta``,
    ``sigma2 (S,)``, on the standardised scale of the sampler's data."""

    vars: torch.Tensor
    b: torch.Tensor
    log_gamma: torch.Tensor
    c: torch.Tensor
    active: torch.Tensor
    beta: torch.Tensor
    sigma2: torch.Tensor


def snapshot(state: ChainState, xt: torch.Tensor) -> dict[str, torch.Tensor]:
    """The parts of a state a draw keeps (with its frozen sum-to-zero constants)."""
    return {
        "vars": state.vars.clone(),
        "b": state.b.clone(),
        "log_gamma": state.log_gamma.clone(),
        "c": sum_to_zero_constants(xt, state.vars, state.b, state.log_gamma),
        "active": state.active.clone(),
        "beta": state.beta.clone(),
        "sigma2": torch.tensor(state.sigma2, dtype=torch.float64),
    }


def stack_draws(snapshots: list[dict[str, torch.Tensor]]) -> Draws:
    return Draws(**{key: torch.stack([s[key] for s in snapshots]) for key in snapshots[0]})
