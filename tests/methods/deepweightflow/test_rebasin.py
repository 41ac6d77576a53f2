"""Git Re-Basin weight matching: permutations preserve the function, planted ones are recovered, the
objective never decreases, and a one-group problem reaches the brute-force optimum."""

from __future__ import annotations

import itertools

import torch

from litlab.methods.deepweightflow.architectures import build_network, network_state
from litlab.methods.deepweightflow.rebasin import (
    apply_permutation,
    matching_objective,
    spec_for,
    weight_matching,
)


def _net(arch: dict, seed: int) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    net = build_network(arch).double().eval()
    for name, buffer in net.named_buffers():
        if name.endswith("running_mean"):
            buffer.normal_()
        elif name.endswith("running_var"):
            buffer.uniform_(0.5, 2.0)
    return net, network_state(net)


def _random_perms(arch: dict, params: dict[str, torch.Tensor], seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {g: torch.randperm(n, generator=generator) for g, n in spec_for(arch).sizes(params).items()}


def _outputs(net: torch.nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return torch.func.functional_call(net, params, (x,))


def test_permuted_networks_compute_the_same_outputs() -> None:
    x = torch.rand(32, 64, dtype=torch.float64)
    for arch in ({"name": "mlp", "sizes": [64, 32, 16, 10]}, {"name": "cnn", "channels": 6}):
        net, params = _net(arch, 0)
        permuted = apply_permutation(spec_for(arch), _random_perms(arch, params, 1), params)
        assert any(not torch.equal(params[k], permuted[k]) for k in params)
        torch.testing.assert_close(_outputs(net, permuted, x), _outputs(net, params, x), atol=1e-6, rtol=0)


def test_planted_permutation_is_recovered() -> None:
    for arch in ({"name": "mlp", "sizes": [64, 32, 32, 10]}, {"name": "cnn", "channels": 8}):
        _, params = _net(arch, 2)
        spec = spec_for(arch)
        planted = apply_permutation(spec, _random_perms(arch, params, 3), params)
        perms, _ = weight_matching(spec, params, planted)
        recovered = apply_permutation(spec, perms, planted)
        for k in params:
            torch.testing.assert_close(recovered[k], params[k], atol=0, rtol=0)


def test_objective_never_decreases_and_beats_identity() -> None:
    arch = {"name": "mlp", "sizes": [64, 32, 32, 32, 10]}
    _, a = _net(arch, 4)
    _, b = _net(arch, 5)
    spec = spec_for(arch)
    perms, history = weight_matching(spec, a, b, seed=7)
    assert len(history) > len(spec.groups())  # at least one full sweep plus the start
    assert all(later >= earlier - 1e-9 for earlier, later in zip(history, history[1:]))
    assert history[-1] > history[0] + 1.0
    assert abs(matching_objective(spec, a, apply_permutation(spec, perms, b)) - history[-1]) < 1e-9


def test_single_group_matches_brute_force_optimum() -> None:
    arch = {"name": "mlp", "sizes": [3, 5, 2]}
    _, a = _net(arch, 8)
    _, b = _net(arch, 9)
    spec = spec_for(arch)
    _, history = weight_matching(spec, a, b)
    best = max(
        matching_objective(spec, a, apply_permutation(spec, {"P0": torch.tensor(p)}, b))
        for p in itertools.permutations(range(5))
    )
    assert abs(history[-1] - best) < 1e-9
