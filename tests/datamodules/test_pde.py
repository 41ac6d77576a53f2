"""PDE residuals against hand-derived ones, reference solutions (Cole-Hopf, convergence), cache, data, RBA."""

from __future__ import annotations

import math
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from torch import nn

import litlab.datamodules.pde as pde
from litlab.datamodules.pde import (
    AllenCahn,
    Burgers,
    Helmholtz,
    PDEDataModule,
    ResidualAttention,
    burgers_cole_hopf,
    make_problem,
    rba_update,
)


def _points(n: int = 50, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.stack(
        [torch.rand(n, generator=g, dtype=torch.float64), 2 * torch.rand(n, generator=g) - 1], 1
    )


def test_helmholtz_residual_of_exact_solution_vanishes() -> None:
    problem = Helmholtz()
    points = 2 * torch.rand(200, 2, dtype=torch.float64) - 1
    residual = problem.residual(problem.exact, points)
    assert residual.shape == (200, 1)
    assert residual.abs().max() < 1e-10 * math.pi**2 * 17
    ref = problem.reference_solution((9, 7))
    torch.testing.assert_close(ref.values().double(), problem.exact(ref.points().double()), atol=1e-6, rtol=0)


def test_residuals_of_known_functions() -> None:
    p = _points()
    t, x = p[:, :1], p[:, 1:]
    u_fn = lambda q: q[:, :1] * torch.sin(q[:, 1:])  # noqa: E731  u = t sin(x)
    u, u_t, u_x, u_xx = t * torch.sin(x), torch.sin(x), t * torch.cos(x), -t * torch.sin(x)
    ac = AllenCahn()
    torch.testing.assert_close(ac.residual(u_fn, p), u_t - 1e-4 * u_xx - 5.0 * (u - u**3))
    burgers = Burgers()
    torch.testing.assert_close(burgers.residual(u_fn, p), u_t + u * u_x - 0.01 / math.pi * u_xx)
    helmholtz = Helmholtz(a1=1.0, a2=4.0, k=2.0)
    x, y = p[:, :1], p[:, 1:]
    source = (4.0 - 17 * math.pi**2) * torch.sin(math.pi * x) * torch.sin(4 * math.pi * y)
    expected = 2 * y + 4.0 * x**2 * y - source  # u = x^2 y: u_xx + u_yy = 2y
    torch.testing.assert_close(helmholtz.residual(lambda q: q[:, :1] ** 2 * q[:, 1:], p), expected)


def test_residual_is_trainable_and_works_under_no_grad() -> None:
    net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    points = _points(32).float()
    residual = Burgers().residual(net, points)
    residual.pow(2).mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.parameters())
    assert not points.requires_grad
    with torch.no_grad():
        torch.testing.assert_close(Burgers().residual(net, points), residual.detach())


def test_burgers_reference_agrees_with_cole_hopf(tmp_path: Path) -> None:
    problem = Burgers()
    ref = problem.reference_solution((21, 257), cache_dir=str(tmp_path))
    exact = burgers_cole_hopf(ref.axes[0], ref.axes[1], problem.diffusion)
    # stated tolerance: relative L2 below 1e-6 and pointwise below 1e-5 (measured: 6e-9 and 2e-7)
    assert np.linalg.norm(ref.u - exact) / np.linalg.norm(exact) < 1e-6
    assert np.abs(ref.u - exact).max() < 1e-5
    assert np.abs(exact).max() > 0.99  # the steep front at x = 0 is in the comparison
    finer = burgers_cole_hopf(ref.axes[0][-3:], ref.axes[1], problem.diffusion, step=0.0125, half_width=30)
    np.testing.assert_allclose(finer, exact[-3:], atol=1e-12)


def test_allen_cahn_reference_converges(tmp_path: Path) -> None:
    shape = (11, 129)
    coarse = AllenCahn().reference_solution(shape, cache_dir=str(tmp_path))
    fine = AllenCahn(n_modes=2047, dt=5e-4).reference_solution(shape, cache_dir=str(tmp_path))
    # halving dx and dt changes the default solution by < 1e-5 (measured: 2e-10; 8e-7 from 511 modes, dt 2e-3)
    assert np.abs(fine.u - coarse.u).max() < 1e-5
    t, x = coarse.axes
    np.testing.assert_allclose(coarse.u[0], x**2 * np.cos(np.pi * x), atol=1e-8)
    np.testing.assert_allclose(coarse.u[:, [0, -1]], -1.0, atol=1e-10)
    assert coarse.u.min() >= -1 - 1e-6 and coarse.u.max() <= 1 + 1e-6
    assert (coarse.u[-1] > 0.9).any() and (coarse.u[-1] < -0.9).any()  # the two metastable phases formed


def test_reference_cache_is_keyed_reused_and_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path))
    first = Burgers(dt=5e-3).reference_solution((6, 33))
    files = sorted((tmp_path / "pde").glob("burgers-*.npz"))
    assert len(files) == 1

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the solver ran although the reference is cached")

    monkeypatch.setattr(pde, "solve_dirichlet_1d", fail)
    np.testing.assert_array_equal(Burgers(dt=5e-3).reference_solution((6, 33)).u, first.u)
    monkeypatch.undo()
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path))
    Burgers(nu=0.02, dt=5e-3).reference_solution((6, 33))
    assert len(list((tmp_path / "pde").glob("burgers-*.npz"))) == 2
    files[0].write_bytes(b"not a zip file")
    np.testing.assert_array_equal(Burgers(dt=5e-3).reference_solution((6, 33)).u, first.u)


def test_collocation_and_condition_points_follow_the_official_layout() -> None:
    problem = make_problem("allen-cahn")
    grid = problem.collocation_points(64)
    assert grid.shape == (64**2, 2)
    assert torch.equal(grid[:64, 0], torch.zeros(64)) and grid[:64, 1].tolist() == pytest.approx(
        np.linspace(-1, 1, 64).tolist()
    )  # t slowest, boundary lines included
    x, u = problem.boundary_data(64)
    assert x.shape == (192, 2) and u.shape == (192, 1)
    torch.testing.assert_close(u[:64, 0], x[:64, 1] ** 2 * torch.cos(math.pi * x[:64, 1]))
    assert torch.equal(x[64:128, 1], torch.full((64,), -1.0)) and torch.equal(
        u[64:, 0], torch.full((128,), -1.0)
    )
    bx, bu = Burgers().boundary_data(8)
    torch.testing.assert_close(bu[:8, 0], -torch.sin(math.pi * bx[:8, 1]))
    hx, hu = Helmholtz().boundary_data(8)
    assert hx.shape == (32, 2) and torch.equal(hu, torch.zeros(32, 1))
    assert (hx.abs() == 1).any(dim=1).all()
    r1, r2 = (Helmholtz().collocation_points(10, "random", seed=5) for _ in range(2))
    assert torch.equal(r1, r2) and r1.shape == (100, 2) and r1.abs().max() <= 1
    with pytest.raises(ValueError, match="unknown PDE problem"):
        make_problem("heat")


def test_rba_update_and_holder() -> None:
    residual = torch.tensor([[1.0], [-2.0], [0.5], [4.0]], requires_grad=True)
    new = rba_update(torch.ones(4, 1), residual)
    torch.testing.assert_close(new.detach(), 0.999 + 0.01 * torch.tensor([[0.25], [0.5], [0.125], [1.0]]))
    new.sum().backward()
    assert residual.grad is not None  # as in the official loss, the weights are not detached
    assert torch.isfinite(rba_update(torch.ones(3, 1), torch.zeros(3, 1))).all()

    holder = ResidualAttention(6)
    index = torch.tensor([1, 4])
    holder(torch.tensor([[2.0], [1.0]]), index)
    torch.testing.assert_close(holder.weights[:, 0], torch.tensor([1.0, 1.009, 1.0, 1.0, 0.999 + 0.005, 1.0]))
    assert "weights" in holder.state_dict()
    holder.eval()
    holder(torch.ones(6, 1))
    assert holder.weights[0, 0] == 1.0  # evaluation does not update


def test_datamodule_batches(tmp_path: Path) -> None:
    dm = PDEDataModule("burgers", n_collocation=16, reference_shape=(11, 65), cache_dir=str(tmp_path))
    dm.prepare_data()
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert len(batches) == 1
    batch = batches[0]
    assert batch["collocation"].shape == (256, 2) and batch["collocation"].dtype == torch.float32
    assert torch.equal(batch["collocation_index"], torch.arange(256))
    assert batch["boundary_x"].shape == (48, 2) and batch["boundary_u"].shape == (48, 1)
    assert dm.n_collocation_points == 256 and dm.n_boundary_points == 48
    points, values = next(iter(dm.val_dataloader()))
    assert points.shape == (11 * 65, 2) and values.shape == (11 * 65, 1)

    mini = PDEDataModule(
        "helmholtz", n_collocation=16, batch_size=64, sampling="random", seed=1, reference_shape=(8, 8)
    )
    mini.setup()
    index = torch.cat([b["collocation_index"] for b in mini.train_dataloader()])
    assert len(list(mini.train_dataloader())) == 4 and sorted(index.tolist()) == list(range(256))
    again = PDEDataModule(
        "helmholtz", n_collocation=16, batch_size=64, sampling="random", seed=1, reference_shape=(8, 8)
    )
    again.setup()
    assert torch.equal(
        next(iter(again.train_dataloader()))["collocation"],
        next(iter(mini.train_dataloader()))["collocation"],
    )


class _PINN(L.LightningModule):
    def __init__(self, dm: PDEDataModule) -> None:
        super().__init__()
        self.problem = dm.problem
        self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
        self.rba_pde = ResidualAttention(dm.n_collocation_points)
        self.rba_bc = ResidualAttention(dm.n_boundary_points)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        r = self.problem.residual(self.net, batch["collocation"])
        r_bc = self.net(batch["boundary_x"]) - batch["boundary_u"]
        w = self.rba_pde(r, batch["collocation_index"])
        w_bc = self.rba_bc(r_bc, batch["boundary_index"])
        return (w * r).pow(2).mean() + (w_bc * r_bc).pow(2).mean()

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, u = batch
        self.log("val/l2", torch.linalg.norm(self.net(x) - u) / torch.linalg.norm(u))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.net.parameters(), 1e-3)


def test_lightning_pinn_step_with_rba(tmp_path: Path) -> None:
    dm = PDEDataModule("allen_cahn", n_collocation=8, reference_shape=(5, 17), cache_dir=str(tmp_path))
    model = _PINN(dm)
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=dm)
    assert (model.rba_pde.weights != 1).all() and (model.rba_bc.weights != 1).any()


def test_data_spec_carries_the_problem_point_counts_and_the_reference(tmp_path: Path) -> None:
    dm = PDEDataModule("burgers", n_collocation=6, reference_shape=(5, 9), cache_dir=str(tmp_path))
    spec = dm.data_spec()
    assert (spec["n_in"], spec["n_out"]) == (2, 1) and spec["problem"] is dm.problem
    assert (spec["n_collocation_points"], spec["n_boundary_points"]) == (36, 18)
    assert spec["reference"].u.shape == (5, 9)
    dm.setup("fit")
    assert dm.reference is spec["reference"], "setup reuses the reference data_spec loaded"


def test_steps_per_epoch_repeats_the_full_batch_with_its_rba_indices(tmp_path: Path) -> None:
    dm = PDEDataModule(
        "burgers", n_collocation=6, reference_shape=(5, 9), cache_dir=str(tmp_path), steps_per_epoch=3
    )
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert len(batches) == 3
    for batch in batches:
        assert torch.equal(batch["collocation_index"], torch.arange(36))
        assert torch.equal(batch["collocation"], dm.train_set.collocation)
