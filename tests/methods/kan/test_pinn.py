"""PINN loss vs. a hand computation, the RBA rule, a short Helmholtz fit, checkpoints, experiment configs."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from litlab.core.errors import ConfigError
from litlab.core.paths import CACHE_ENV
from litlab.datamodules.pde import Helmholtz, PDEDataModule
from litlab.methods.kan.layers import build_kan
from litlab.methods.kan.pinn import PINNModule
from litlab.train import train

GAMMA, ETA = 0.999, 0.01
POWER = {"name": "power", "alpha": 0.25, "beta": 1.75}


@pytest.fixture(autouse=True, scope="module")
def reference_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep the reference solutions these tests compute out of the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("pde_cache")))
        yield


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    """One intra-op thread: these tiny ops run many times faster on a shared, loaded CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _module(seed: int = 0, rba: bool = True, lr: float = 1e-3) -> PINNModule:
    torch.manual_seed(seed)
    net = build_kan(2, 1, width=4, depth=1, grid_size=5, init=POWER)
    return PINNModule(net, functools.partial(torch.optim.Adam, lr=lr), rba=rba, rba_gamma=GAMMA, rba_eta=ETA)


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "collocation": 2 * torch.rand(5, 2, generator=g) - 1,
        "collocation_index": torch.tensor([7, 2, 9, 0, 4]),
        "boundary_x": 2 * torch.rand(4, 2, generator=g) - 1,
        "boundary_u": torch.randn(4, 1, generator=g),
        "boundary_index": torch.arange(4),
    }


def _hand_residual(module: PINNModule, problem: Helmholtz, points: torch.Tensor) -> torch.Tensor:
    """u_xx + u_yy + k² u - q point by point, the Laplacian as the trace of autograd's Hessian."""

    def u(p: torch.Tensor) -> torch.Tensor:
        return module.net(p[None])[0, 0]

    rows = []
    for p in points:
        laplacian = torch.autograd.functional.hessian(u, p, create_graph=True).diagonal().sum()
        q = (problem.k**2 - math.pi**2 * (problem.a1**2 + problem.a2**2)) * problem.exact(p[None])[0, 0]
        rows.append(laplacian + problem.k**2 * u(p) - q)
    return torch.stack(rows)[:, None]


def test_loss_and_gradient_match_hand_computation() -> None:
    module, batch, problem = _module(), _batch(), Helmholtz()
    module.bind(problem, n_collocation_points=10, n_boundary_points=4)
    terms = module.loss_terms(batch)

    r = _hand_residual(module, problem, batch["collocation"])
    r_b = module.net(batch["boundary_x"]) - batch["boundary_u"]
    w = GAMMA + ETA * r.abs() / r.abs().max()  # from weights 1, not detached (official)
    w_b = GAMMA + ETA * r_b.abs() / r_b.abs().max()
    hand = (w * r).square().mean() + (w_b * r_b).square().mean()

    torch.testing.assert_close(terms["loss"], hand, rtol=1e-4, atol=0)
    torch.testing.assert_close(terms["residual"], r.detach().square().mean(), rtol=1e-4, atol=0)
    torch.testing.assert_close(terms["boundary"], r_b.detach().square().mean(), rtol=1e-5, atol=0)
    params = list(module.net.parameters())
    grads = torch.autograd.grad(terms["loss"], params)
    hand_grads = torch.autograd.grad(hand, params)
    for got, want in zip(grads, hand_grads):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-6)

    stored = module.collocation_attention.weights
    torch.testing.assert_close(stored[batch["collocation_index"]], w.detach(), rtol=1e-5, atol=0)
    untouched = torch.ones(10, dtype=torch.bool)
    untouched[batch["collocation_index"]] = False
    assert torch.equal(stored[untouched], torch.ones(5, 1))
    torch.testing.assert_close(module.boundary_attention.weights, w_b.detach(), rtol=1e-5, atol=0)


def test_rba_weights_follow_the_update_rule_and_freeze_in_eval() -> None:
    module, batch = _module(), _batch()
    module.bind(Helmholtz(), n_collocation_points=10, n_boundary_points=4)
    index = batch["collocation_index"]
    magnitude = module.problem.residual(module.net, batch["collocation"]).detach().abs()
    share = magnitude / magnitude.max()
    module.loss_terms(batch)
    module.loss_terms(batch)  # same parameters, so the same |r| / max|r| twice
    expected = GAMMA * (GAMMA + ETA * share) + ETA * share
    torch.testing.assert_close(module.collocation_attention.weights[index], expected, rtol=1e-5, atol=0)

    before = module.collocation_attention.weights.clone()
    module.eval()
    module.loss_terms(batch)
    assert torch.equal(module.collocation_attention.weights, before)


def test_without_rba_the_loss_is_the_plain_mse_sum() -> None:
    module, batch = _module(rba=False), _batch()
    module.bind(Helmholtz(), n_collocation_points=10, n_boundary_points=4)
    terms = module.loss_terms(batch)
    torch.testing.assert_close(terms["loss"], terms["residual"] + terms["boundary"])
    assert module.collocation_attention is None and not any("attention" in k for k in module.state_dict())


def _trainer(root: Path, max_epochs: int, **kwargs: object) -> L.Trainer:
    return L.Trainer(
        default_root_dir=root,
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        check_val_every_n_epoch=max_epochs,
        **kwargs,
    )


def _data(n_collocation: int = 8) -> PDEDataModule:
    return PDEDataModule("helmholtz", n_collocation=n_collocation, reference_shape=(24, 24))


def _bound(module: PINNModule, data: PDEDataModule) -> PINNModule:
    """The module bound to the data as the runner binds it (litlab.contract.bind)."""
    module.bind_data(data.data_spec())
    return module


def test_short_helmholtz_fit_lowers_the_residual_loss(tmp_path: Path) -> None:
    data = _data()
    module = _bound(_module(lr=1e-2), data)
    data.setup("fit")
    points = data.train_set.collocation
    start = data.problem.residual(module.net, points).square().mean().item()
    _trainer(tmp_path, max_epochs=100, enable_checkpointing=False).fit(module, datamodule=data)
    end = data.problem.residual(module.net, points).square().mean().item()
    # measured: mean r^2 5.3e3 -> 80 (x0.015); the source term has amplitude 17 pi^2 - 1 = 167
    assert end < 0.1 * start
    weights = module.collocation_attention.weights
    assert weights.shape == (64, 1) and weights.max() > 1.5 and weights.min() < weights.max() - 0.5


def test_checkpoint_restores_predictions_and_rba_state(tmp_path: Path) -> None:
    data = _data()
    module = _bound(_module(), data)
    checkpoint = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    _trainer(tmp_path, max_epochs=3, callbacks=[checkpoint]).fit(module, datamodule=data)
    restored = PINNModule.load_from_checkpoint(
        checkpoint.last_model_path,
        net=build_kan(2, 1, width=4, depth=1, grid_size=5, init="glorot"),
        optimizer=functools.partial(torch.optim.Adam, lr=1e-3),
        weights_only=True,
    )
    points = data.reference.points()
    torch.testing.assert_close(restored.net(points), module.net(points), rtol=0, atol=0)
    assert restored.hparams.rba_gamma == GAMMA
    for name in ("collocation_attention", "boundary_attention"):
        saved, loaded = getattr(module, name).weights, getattr(restored, name).weights
        assert not torch.equal(saved, torch.ones_like(saved))
        assert torch.equal(loaded, saved)


def test_resume_continues_as_an_uninterrupted_run(tmp_path: Path) -> None:
    data = _data()
    straight = _bound(_module(), data)
    _trainer(tmp_path / "a", max_epochs=4, enable_checkpointing=False).fit(straight, datamodule=_data())

    first = _bound(_module(), data)
    # Saved at train-epoch end: a checkpoint written at validation end makes Lightning 2.6 rerun that epoch.
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "b", save_last=True, save_on_train_epoch_end=True)
    _trainer(tmp_path / "b", max_epochs=2, callbacks=[checkpoint]).fit(first, datamodule=_data())
    resumed = _bound(_module(seed=1), data)  # different init: everything must come from the checkpoint
    _trainer(tmp_path / "c", max_epochs=4, enable_checkpointing=False).fit(
        resumed, datamodule=_data(), ckpt_path=checkpoint.last_model_path, weights_only=True
    )
    for (name, want), got in zip(straight.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=name)

    wrong_size = _bound(_module(), _data(n_collocation=10))
    with pytest.raises(Exception, match="RBA weights for 100 points but the checkpoint has 64"):
        _trainer(tmp_path / "d", max_epochs=4, enable_checkpointing=False).fit(
            wrong_size, datamodule=_data(n_collocation=10), ckpt_path=checkpoint.last_model_path
        )


def test_bind_data_builds_the_net_and_attaches_the_problem() -> None:
    data = _data()
    module = PINNModule(
        functools.partial(build_kan, width=3, depth=1, grid_size=5), functools.partial(torch.optim.Adam)
    )
    assert module.net is None
    module.bind_data(data.data_spec())
    assert module.net.widths == [2, 3, 1] and module.problem is data.problem
    assert module.reference is data.reference and len(module.collocation_attention.weights) == 64
    assert {"train/residual", "train/boundary", "test/rel_l2"} <= module.logged_metrics()
    with pytest.raises(ConfigError, match="needs a PDE data module"):
        PINNModule(build_kan(2, 1, 3, 1, 5), functools.partial(torch.optim.Adam)).bind_data(
            {"n_in": 2, "n_out": 1}
        )


@pytest.mark.parametrize("name", ["pde_allen_cahn", "pde_burgers", "pde_helmholtz"])
def test_experiment_runs_one_batch(compose_config, name: str) -> None:
    # A small reference grid keeps this fast; the shared experiment test runs the full one.
    cfg = compose_config("train", [f"experiment=kan/{name}", "debug=fdr", "data.reference_shape=[21,32]"])
    assert cfg.model._target_ == "litlab.methods.kan.pinn.PINNModule"
    assert cfg.data.problem == name.removeprefix("pde_") and cfg.optimized_metric == "test/rel_l2"
    value = train(cfg)
    assert value is not None and math.isfinite(value) and 0 < value < 10
