"""Flow matching, the CartanFM loss terms (GSC sign, geodesic, ablation switches) and the VAE baseline."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from torch.nn import functional as F

from litlab.methods.symspace.classifier import factor_accuracy
from litlab.methods.symspace.flow import cfm_loss, ot_path, sample
from litlab.methods.symspace.lie import cartan_orthogonality, cartan_projection
from litlab.methods.symspace.module import VAE, CartanFM, reconstruction_errors

ADAM = partial(torch.optim.Adam, lr=1e-3)
SHAPE = (1, 16, 16)


def images(n: int = 4) -> torch.Tensor:
    return (torch.rand(n, *SHAPE, generator=torch.Generator().manual_seed(0)) > 0.8).float()


def test_ot_path_ends_and_velocity() -> None:
    x0, x1 = torch.randn(3, 1, 4, 4), torch.randn(3, 1, 4, 4)
    sigma = 1e-2
    start, _ = ot_path(x0, x1, torch.zeros(3), sigma)
    end, velocity = ot_path(x0, x1, torch.ones(3), sigma)
    torch.testing.assert_close(start, x0)
    torch.testing.assert_close(end, x1 + sigma * x0)
    t, h = torch.full((3,), 0.3), 1e-3
    finite = (ot_path(x0, x1, t + h, sigma)[0] - ot_path(x0, x1, t - h, sigma)[0]) / (2 * h)
    torch.testing.assert_close(finite, velocity, atol=1e-3, rtol=1e-3)


def test_cfm_loss_is_zero_for_the_true_conditional_velocity() -> None:
    # With a single data point x1 the OT-path velocity at (t, x) is (x1 − (1−σ)x)/(1 − (1−σ)t).
    x1, sigma = torch.randn(1, 1, 4, 4).expand(6, -1, -1, -1), 1e-6

    def exact(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        tt = t.view(-1, 1, 1, 1)
        return (x1 - (1 - sigma) * x) / (1 - (1 - sigma) * tt)

    assert float(cfm_loss(exact, x1, sigma)) < 1e-6
    assert float(cfm_loss(lambda t, x: torch.zeros_like(x), x1, sigma)) > 1.0


def test_samplers_integrate_known_fields() -> None:
    x0 = torch.randn(2, 1, 3, 3)
    shift = torch.randn(2, 1, 3, 3)
    torch.testing.assert_close(sample(lambda t, x: shift, x0, steps=7), x0 + shift)
    decay = sample(lambda t, x: -x, x0, method="dopri5")
    torch.testing.assert_close(decay, x0 * math.exp(-1), atol=1e-4, rtol=1e-4)
    euler = sample(lambda t, x: -x, x0, steps=20)
    torch.testing.assert_close(euler, x0 * (1 - 1 / 20) ** 20)
    with pytest.raises(ValueError, match="euler"):
        sample(lambda t, x: x, x0, method="rk4")


def test_reconstruction_errors_against_direct_formulas() -> None:
    target = images(3)
    recon = torch.rand_like(target)
    errors = reconstruction_errors(recon, target)
    bce = -(
        target * recon.clamp(1e-4, 1 - 1e-4).log() + (1 - target) * (1 - recon.clamp(1e-4, 1 - 1e-4)).log()
    )
    torch.testing.assert_close(errors["bce"], bce.flatten(1).sum(1))
    torch.testing.assert_close(errors["mse"], (recon - target).square().flatten(1).sum(1))
    clamped = recon.clamp(1e-3, 1 - 1e-3)
    code = -(target * clamped.log() + (1 - target) * (1 - clamped).log())
    torch.testing.assert_close(errors["bce_code"], code.flatten(1).sum(1))
    perfect = reconstruction_errors(target, target)
    assert float(perfect["mse"].max()) == 0.0 and float(perfect["bce"].max()) < 256 * 2e-4
    # the official evaluation's clamp puts a floor under every score: 256 pixels × −ln(1 − 1e-3)
    torch.testing.assert_close(perfect["bce_code"], torch.full((3,), -256 * math.log1p(-1e-3)))


@pytest.mark.parametrize("sign", ["paper", "code"])
def test_gsc_term_matches_its_definition(sign: str) -> None:
    torch.manual_seed(0)
    model = CartanFM(ADAM, image_shape=SHAPE, unet_width=8, gsc_sign=sign)
    x = images()
    torch.manual_seed(1)
    terms = model.losses(x)
    # Replay: the same encoder output, the same random draws (CFM noise and time, then the GSC noise).
    torch.manual_seed(1)
    torch.randn_like(x), torch.rand(len(x))
    noise = torch.randn_like(x)
    c_k, c_p, mu, logvar = model.encode(x)
    c = torch.cat([c_k, c_p], 1)
    minus_x = -model.bases(c_k, c_p)
    candidate = noise + model.unet(torch.zeros(len(x)), noise, minus_x.flatten(1))
    c_hat = torch.cat(model.encode(candidate)[:2], 1)
    expected = ((c_hat + c) if sign == "paper" else (c_hat - c)).square().sum(1).mean()
    torch.testing.assert_close(terms["gsc"], expected)
    x_k = torch.einsum("bi,imn->bmn", c_k, model.bases.k)
    torch.testing.assert_close(terms["geodesic"], x_k.square().sum((1, 2)).mean())
    kl = -0.5 * (1 + logvar - mu**2 - logvar.exp()).sum(1).mean()
    torch.testing.assert_close(terms["kl"], kl)
    assert set(terms) == {"cfm", "cartan", "geodesic", "nontrivial", "gsc", "kl"}


def test_every_term_trains_the_parts_it_should() -> None:
    torch.manual_seed(0)
    model = CartanFM(ADAM, image_shape=SHAPE, unet_width=8)
    terms = model.losses(images())
    gsc_grads = torch.autograd.grad(terms["gsc"], [model.unet.out[-1].weight, model.encoder.head[-1].weight])
    assert all(float(g.abs().sum()) > 0 for g in gsc_grads)
    cartan_grads = torch.autograd.grad(terms["cartan"], [model.bases.k, model.bases.p])
    assert all(float(g.abs().sum()) > 0 for g in cartan_grads)


def test_flow_matching_only_ablation_drops_the_structure_terms() -> None:
    model = CartanFM(
        ADAM,
        image_shape=SHAPE,
        unet_width=8,
        cartan_weight=0,
        geodesic_weight=0,
        nontrivial_weight=0,
        gsc_weight=0,
    )
    assert set(model.losses(images())) == {"cfm", "kl"}
    loss = model.training_step([images(), None], 0)
    assert torch.isfinite(loss)


def test_exp_condition_and_deterministic_reconstruction() -> None:
    torch.manual_seed(0)
    model = CartanFM(ADAM, image_shape=SHAPE, unet_width=8, condition="exp", sample_steps=3).eval()
    x = 0.1 * torch.randn(2, 10, 10)
    torch.testing.assert_close(model.condition_of(x), torch.linalg.matrix_exp(x).flatten(1))
    a, b = model.reconstruct(images()), model.reconstruct(images())
    assert a.shape == (4, *SHAPE) and torch.equal(a, b) and float(a.min()) >= 0 and float(a.max()) <= 1
    with pytest.raises(ValueError, match="gsc_sign"):
        CartanFM(ADAM, image_shape=SHAPE, gsc_sign="poster")


def test_vae_loss_and_reconstruction() -> None:
    torch.manual_seed(0)
    model = VAE(ADAM, image_shape=SHAPE, beta=4.0)
    x = images()
    terms = model.losses(x)
    assert float(terms["rec"].detach()) > 0 and float(terms["kl"].detach()) >= 0
    loss = model.training_step([x, None], 0)
    torch.testing.assert_close(
        loss.detach(), (terms["rec"] + 4.0 * terms["kl"]).detach(), rtol=0.3, atol=50.0
    )
    assert model.eval().reconstruct(x).shape == x.shape


def test_factor_accuracy_counts_all_but_orientation() -> None:
    truth = torch.tensor([[0, 1, 2, 3, 0], [1, 0, 0, 1, 2]])
    guess = torch.tensor([[0, 1, 0, 3, 0], [1, 1, 0, 1, 2]])  # sample 0 wrong in orientation only
    sizes = (3, 2, 4, 4, 4)

    def classifier(_: torch.Tensor) -> list[torch.Tensor]:
        return [F.one_hot(guess[:, j], n).float() for j, n in enumerate(sizes)]

    acc = factor_accuracy(
        classifier, torch.zeros(2, 1, 4, 4), truth, ("shape", "scale", "orientation", "x", "y")
    )
    assert acc["orientation"] == 0.5 and acc["scale"] == 0.5 and acc["shape"] == 1.0 and acc["all"] == 0.5


@pytest.mark.parametrize("form", ["projection", "orthogonality"])
def test_cartan_form_picks_the_loss(form: str) -> None:
    torch.manual_seed(0)
    model = CartanFM(ADAM, image_shape=(16,), unet_width=16, cartan_form=form, z_dim=0)
    loss_of = cartan_projection if form == "projection" else cartan_orthogonality
    expected = sum(loss_of(model.bases.k, model.bases.p).values())
    torch.testing.assert_close(model.losses(torch.rand(8, 16))["cartan"], expected)
    with pytest.raises(ValueError, match="cartan_form"):
        CartanFM(ADAM, image_shape=(16,), cartan_form="killing")


def test_vector_data_models_train_and_reconstruct() -> None:
    torch.manual_seed(0)
    x = torch.rand(6, 16)
    fm = CartanFM(ADAM, image_shape=(16,), unet_width=16, n_k=1, n_p=2, algebra_dim=3, sample_steps=2)
    assert torch.isfinite(fm.training_step([x, None], 0))
    assert fm.eval().reconstruct(x).shape == x.shape
    vae = VAE(ADAM, image_shape=(16,), latent_dim=2, hidden=16)
    assert torch.isfinite(vae.training_step([x, None], 0))
    assert vae.eval().reconstruct(x).shape == x.shape
    with pytest.raises(ValueError, match="image_shape"):
        VAE(ADAM, image_shape=(4, 4))
