"""Our uLSIF and KLIEP against the ``densratio`` package (0.4.0) on the same data, centres and bandwidths.

densratio draws its kernel centres from P with numpy's global generator; we read them back from its result
and fit ours on them, so the two solutions must agree to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from litlab.methods.dre.estimators import fit_grid
from tests.methods.dre.helpers import grid_axes, samples

densratio = pytest.importorskip("densratio")


def test_ulsif_matches_densratio_for_every_grid_point() -> None:
    x_p, x_q = samples(300, 400)
    sigmas, lams = grid_axes([0.4, 0.8], [1e-3, 1e-1])
    for sigma in sigmas.tolist():
        for lam in lams.tolist():
            np.random.seed(1)  # noqa: NPY002 - densratio draws its centres from the legacy global generator
            theirs = densratio.densratio(
                x_p.numpy(),
                x_q.numpy(),
                method="uLSIF",
                sigma=sigma,
                lambda_=lam,
                kernel_num=50,
                verbose=False,
            )
            centres = torch.from_numpy(theirs.kernel_info.centers)
            ours = fit_grid("ulsif", x_p, x_q, centres, sigmas, lams)
            index = sigmas.tolist().index(sigma) * len(lams) + lams.tolist().index(lam)
            np.testing.assert_allclose(
                ours.coefficients.flatten(0, 1)[index].numpy(), theirs.theta, atol=1e-10
            )
            points = x_q[:50]
            np.testing.assert_allclose(
                ours.predict(points)[index].numpy(), theirs.compute_density_ratio(points.numpy()), atol=1e-10
            )


def test_kliep_matches_densratio_per_bandwidth() -> None:
    x_p, x_q = samples(250, 300, seed=3)
    sigmas, lams = grid_axes([0.5, 1.0, 2.0], [0.0])
    np.random.seed(2)  # noqa: NPY002 - as above
    theirs = densratio.densratio(
        x_p.numpy(), x_q.numpy(), method="KLIEP", sigma=1.0, kernel_num=60, verbose=False
    )
    centres = torch.from_numpy(theirs.kernel_info.centers)
    ours = fit_grid("kliep", x_p, x_q, centres, sigmas, lams)
    np.testing.assert_allclose(ours.coefficients[1, 0].numpy(), theirs.theta, atol=1e-9)
    for index, sigma in enumerate(sigmas.tolist()):
        np.random.seed(2)  # noqa: NPY002 - as above
        single = densratio.densratio(
            x_p.numpy(), x_q.numpy(), method="KLIEP", sigma=sigma, kernel_num=60, verbose=False
        )
        np.testing.assert_allclose(ours.coefficients[index, 0].numpy(), single.theta, atol=1e-9)
