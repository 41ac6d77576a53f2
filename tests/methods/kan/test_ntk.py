"""The empirical NTK against a brute-force Jacobian, and the spectral summaries on known spectra."""

from __future__ import annotations

import pytest
import torch

from litlab.methods.kan.layers import KAN
from litlab.methods.kan.ntk import empirical_ntk, parameter_jacobian, spectrum_summary


def _brute_force_jacobian(net: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    rows = []
    for sample in x:
        for output in net(sample.unsqueeze(0)).reshape(-1):
            grads = torch.autograd.grad(output, list(net.parameters()), retain_graph=True)
            rows.append(torch.cat([g.reshape(-1) for g in grads]))
    return torch.stack(rows)


def test_jacobian_matches_per_sample_autograd() -> None:
    torch.manual_seed(0)
    net = KAN([2, 3, 2], grid_size=4, init="glorot").double()
    x = torch.rand(5, 2, dtype=torch.float64) * 2 - 1
    torch.testing.assert_close(parameter_jacobian(net, x), _brute_force_jacobian(net, x))


def test_ntk_is_symmetric_psd_gram_of_jacobian() -> None:
    torch.manual_seed(1)
    net = KAN([2, 4, 1], grid_size=5)
    x = torch.rand(16, 2) * 2 - 1
    kernel = empirical_ntk(net, x)
    torch.testing.assert_close(kernel, kernel.T)
    assert torch.linalg.eigvalsh(kernel).min() > -1e-8 * kernel.diagonal().max()


def test_spectrum_summary_on_known_spectrum() -> None:
    basis = torch.linalg.qr(
        torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    )[0]
    eigenvalues = torch.tensor([8.0, 4.0, 2.0, 1.0], dtype=torch.float64)
    summary = spectrum_summary(basis @ torch.diag(eigenvalues) @ basis.T)
    torch.testing.assert_close(summary.eigenvalues, eigenvalues)
    assert summary.condition_number == pytest.approx(8.0)
    assert summary.effective_rank == pytest.approx(15.0**2 / 85.0)
    assert summary.trace == pytest.approx(15.0)
