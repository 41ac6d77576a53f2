"""Reversible-jump moves satisfy detailed balance on a tiny discrete case (exact enumeration), their
proposal probabilities are proper and are what the sampler draws, and the chain visits states with
the exact posterior frequencies."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest
import torch

from litlab.methods.tpnn.sampler import Sampler
from tests.methods.tpnn.discrete import all_nodes, all_states, log_target, make_state, tiny_posterior

SIGMA2 = 0.2


def node_key(node) -> tuple:
    return tuple((j, round(b, 6), round(g, 6)) for j, b, g in node.edges(3))


def one_edge_apart(old, new) -> bool:
    a, b = dict((j, (x, g)) for j, x, g in node_key(old)), dict((j, (x, g)) for j, x, g in node_key(new))
    shared = set(a) & set(b)
    if any(a[j] != b[j] for j in shared):
        return False
    return (len(a) - len(shared), len(b) - len(shared)) in {(0, 1), (1, 0), (1, 1)}


def transitions(sampler: Sampler, nodes, state_index: dict, multiset) -> dict[str, dict[tuple, float]]:
    """P(s -> s') for every move type and s' != s, from the sampler's proposal and acceptance functions.

    Also returns, under key ``proposal_mass``, the total proposal probability of each move type.
    """
    post = sampler.post
    state = make_state(sampler, nodes, multiset, SIGMA2)
    k = len(multiset)
    out: dict[str, dict] = {
        "birth": defaultdict(float),
        "death": defaultdict(float),
        "edge": defaultdict(float),
    }
    mass = {"birth": 0.0, "death": 0.0, "edge": 0.0}
    if post.move_probs(k)[0] > 0:
        for index, node in enumerate(nodes):
            # every one of the k + 1 insertion positions gives the same multiset
            q = (k + 1) * math.exp(
                float(post.birth_log_q(state.vars, state.b, state.log_gamma, state.active, node))
            )
            log_ratio, _ = sampler.birth_log_ratio(state, node)
            out["birth"][tuple(sorted((*multiset, index)))] += q * min(1.0, math.exp(log_ratio))
            mass["birth"] += q
    for slot in range(k):
        rest = tuple(sorted(multiset[:slot] + multiset[slot + 1 :]))
        if post.move_probs(k)[1] > 0:
            q = math.exp(post.death_log_q(k))
            log_ratio, _ = sampler.death_log_ratio(state, slot)
            out["death"][rest] += q * min(1.0, math.exp(log_ratio))
            mass["death"] += q
        old = nodes[multiset[slot]]
        for index, new in enumerate(nodes):
            if one_edge_apart(old, new):
                q = math.exp(float(post.edge_log_q(k, old, new)))
                log_ratio, _ = sampler.edge_log_ratio(state, slot, new)
                out["edge"][tuple(sorted((*rest, index)))] += q * min(1.0, math.exp(log_ratio))
                mass["edge"] += q
    out["proposal_mass"] = mass
    return out


@pytest.fixture(scope="module")
def enumerated():
    sampler = Sampler(tiny_posterior(), seed=0)
    nodes = all_nodes()
    states = all_states(nodes)
    index = {s: i for i, s in enumerate(states)}
    log_pi = torch.tensor([log_target(sampler, nodes, s, SIGMA2) for s in states], dtype=torch.float64)
    moves = [transitions(sampler, nodes, index, s) for s in states]
    return sampler, nodes, states, index, log_pi, moves


def test_the_discrete_space_is_what_the_docstring_says(enumerated) -> None:
    _, nodes, states, *_ = enumerated
    assert len(nodes) == 18 and len(states) == 1 + 18 + 18 * 19 // 2


@pytest.mark.parametrize("move", ["birth", "death", "edge"])
def test_proposal_probabilities_are_proper(enumerated, move: str) -> None:
    """Each move type's proposals sum to its selection probability (less Stepwise's null proposals)."""
    sampler, nodes, states, _, _, moves = enumerated
    post = sampler.post
    for multiset, out in zip(states, moves, strict=True):
        k = len(multiset)
        expected = post.move_probs(k)[("birth", "death", "edge").index(move)]
        if move == "birth" and k > 0:
            top = sum(len(nodes[i].edges(3)) >= post.top_order for i in multiset)
            expected *= 1 - (1 - post.random_birth_prob(k)) * top / k
        assert out["proposal_mass"][move] == pytest.approx(expected, abs=1e-12), (move, multiset)


@pytest.mark.parametrize("move", ["birth", "edge"])
def test_each_move_satisfies_detailed_balance(enumerated, move: str) -> None:
    """pi(s) P(s -> s') = pi(s') P(s' -> s) for every pair (births are checked with their deaths)."""
    _, _, states, index, log_pi, moves = enumerated
    reverse = "death" if move == "birth" else "edge"
    checked = 0
    for i, s in enumerate(states):
        for target, forward in moves[i][move].items():
            j = index[target]
            backward = moves[j][reverse].get(s, 0.0)
            lhs, rhs = math.exp(log_pi[i]) * forward, math.exp(log_pi[j]) * backward
            assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-300), (s, target)
            checked += forward > 0
    assert checked > 100


def test_the_exact_posterior_is_stationary(enumerated) -> None:
    """The full structural kernel (one move of a random type) leaves pi invariant: pi P = pi."""
    _, _, states, index, log_pi, moves = enumerated
    n = len(states)
    kernel = torch.zeros(n, n, dtype=torch.float64)
    for i, out in enumerate(moves):
        for move in ("birth", "death", "edge"):
            for target, prob in out[move].items():
                kernel[i, index[target]] += prob
        kernel[i, i] = 1 - kernel[i].sum()
    pi = torch.softmax(log_pi, 0)
    assert torch.allclose(pi @ kernel, pi, atol=1e-14)
    assert bool((kernel.diagonal() > -1e-12).all())


def test_sampled_proposals_follow_the_proposal_probabilities(enumerated) -> None:
    """Births drawn by the sampler from a one-node state (Random or Stepwise) have the frequencies
    exp(birth_log_q) / P_birth says."""
    sampler, nodes, _, _, _, _ = enumerated
    post = sampler.post
    fresh = Sampler(post, seed=1)
    state = make_state(fresh, nodes, (4,), SIGMA2)
    keys = [node_key(v) for v in nodes]
    log_q = [float(post.birth_log_q(state.vars, state.b, state.log_gamma, state.active, v)) for v in nodes]
    expected = 2 * torch.tensor(log_q, dtype=torch.float64).exp() / post.move_probs(1)[0]
    rho, draws, counts = post.random_birth_prob(1), 6000, Counter()
    for _ in range(draws):
        random = float(torch.rand(1, generator=fresh.generator)) < rho
        counts[keys.index(node_key(fresh.random_node() if random else fresh.stepwise_node(state)))] += 1
    frequency = torch.tensor([counts[i] for i in range(len(nodes))], dtype=torch.float64) / draws
    # the binomial sd of a frequency is at most 0.5 / sqrt(6000) = 0.0065
    assert float(expected.sum()) == pytest.approx(1.0)
    assert torch.allclose(frequency, expected, atol=0.02), (frequency, expected)


def test_sampled_edge_proposals_follow_the_proposal_probabilities(enumerated) -> None:
    sampler, nodes, _, _, _, _ = enumerated
    post = sampler.post
    fresh = Sampler(post, seed=2)
    keys = [node_key(v) for v in nodes]
    old = nodes[9]  # a two-variable node: delete and change are possible, add is not (D = 2)
    k = 1
    expected = (
        torch.tensor(
            [math.exp(float(post.edge_log_q(k, old, v))) if one_edge_apart(old, v) else 0.0 for v in nodes],
            dtype=torch.float64,
        )
        / post.move_probs(k)[2]
    )
    counts = Counter(keys.index(node_key(fresh.edge_node(old))) for _ in range(5000))
    frequency = torch.tensor([counts[i] for i in range(len(nodes))], dtype=torch.float64) / 5000
    assert float(expected.sum()) == pytest.approx(1.0)
    assert torch.allclose(frequency, expected, atol=0.02)


@pytest.mark.slow
def test_the_chain_visits_states_with_their_posterior_frequencies(enumerated) -> None:
    """Run the sampler's structural moves on the discrete case; compare visit frequencies with pi."""
    sampler, nodes, states, index, log_pi, _ = enumerated
    chain = Sampler(sampler.post, seed=5)
    state = make_state(chain, nodes, (), SIGMA2)
    keys = [node_key(v) for v in nodes]
    visits = torch.zeros(len(states), dtype=torch.float64)
    for _ in range(25000):
        chain.structural_move(state)
        multiset = tuple(
            sorted(keys.index(node_key(state.node(s))) for s in state.active.nonzero()[:, 0].tolist())
        )
        visits[index[multiset]] += 1
    pi = torch.softmax(log_pi, 0)
    frequency = visits / visits.sum()
    total_variation = 0.5 * float((frequency - pi).abs().sum())
    by_count = [
        (frequency[[len(s) == k for s in states]].sum(), pi[[len(s) == k for s in states]].sum())
        for k in range(3)
    ]
    assert total_variation < 0.08, total_variation
    for seen, exact in by_count:
        assert float(seen) == pytest.approx(float(exact), abs=0.03)
