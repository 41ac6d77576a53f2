"""CartanFM on a problem whose latent symmetric space is known: the sphere S² = SO(3)/SO(2).

Every arm (the full method, its ablations, FM-only and a VAE) is trained on the observed corner of the
factor grid (``litlab.datamodules.symmetric_space``) with early stopping on in-distribution validation,
then scored on: the structure of the learnt bases (projection residuals, how far from commuting, overlap
of span(k) and span(p), k-share of ‖X‖²), the held-out reconstruction error, and the geodesic mirror:
decoding −X of observed latents whose mirror factors −θ are held out, against the true observation of
−θ, with the factors read back by nearest neighbour on a fine grid of true observations.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from litlab.datamodules.base import TensorBatchDataset, batch_loader
from litlab.datamodules.symmetric_space import SymmetricSpaceData
from litlab.fitting import Fitter
from litlab.methods.symspace.lie import cartan_residuals, commutator_ratio, span_overlap
from litlab.methods.symspace.module import VAE, CartanFM, ReconstructionModule, reconstruction_errors

NO_STRUCTURE = {"cartan_weight": 0.0, "geodesic_weight": 0.0, "nontrivial_weight": 0.0, "gsc_weight": 0.0}
# Arm name -> CartanFM overrides (or "vae"); the full method's own ablations switch one term off each.
ARMS: dict[str, dict[str, Any] | str] = {
    "cartanfm": {},
    "cartanfm_code_sign": {"gsc_sign": "code"},
    "cartanfm_orthogonality": {"cartan_form": "orthogonality"},
    "no_cartan": {"cartan_weight": 0.0, "nontrivial_weight": 0.0},
    "no_gsc": {"gsc_weight": 0.0},
    "fm_only": NO_STRUCTURE,
    "vae": "vae",
}


def make_arm(arm: str, dim: int, lr: float, hidden: int, algebra: tuple[int, int, int], **extra: Any):
    """A fresh model of one arm for vector data of size ``dim``; ``algebra`` = (n_k, n_p, m)."""
    adam = partial(torch.optim.Adam, lr=lr)
    spec = ARMS[arm]
    if spec == "vae":
        return VAE(adam, image_shape=(dim,), latent_dim=algebra[1], hidden=hidden)
    n_k, n_p, m = algebra
    kwargs = {"n_k": n_k, "n_p": n_p, "algebra_dim": m, "z_dim": 0, "unet_width": hidden, **spec, **extra}
    return CartanFM(adam, image_shape=(dim,), **kwargs)


def train_arm(
    fitter: Fitter,
    module: ReconstructionModule,
    data: SymmetricSpaceData,
    steps: int,
    seed: int,
    batch_size: int = 128,
) -> ReconstructionModule:
    """Adam for ``steps`` steps, validated every steps/10 on in-distribution data; the best weights kept."""
    train = batch_loader(TensorBatchDataset(*data.train), batch_size, shuffle=True, seed=seed, num_workers=0)
    val = batch_loader(TensorBatchDataset(*data.val), len(data.val[0]), shuffle=False, seed=0, num_workers=0)
    fitter.fit(
        module,
        train,
        val,
        max_steps=steps,
        val_every_n_steps=max(1, steps // 10),
        monitor="val/id_mse",
        restore_best=True,
        seed=seed,
    )
    return module.eval()


@torch.no_grad()
def latent(module: ReconstructionModule, y: torch.Tensor) -> torch.Tensor:
    """The decoder's input for observations y (n, D): X (n, m, m) for CartanFM, the mean z for the VAE."""
    if isinstance(module, CartanFM):
        return module.lie_element(y)
    return module.encoder(y).chunk(2, dim=1)[0]


@torch.no_grad()
def decode(module: ReconstructionModule, z: torch.Tensor, dim: int) -> torch.Tensor:
    """Observations (n, D) decoded from latents z (what :func:`latent` returns)."""
    if isinstance(module, CartanFM):
        return module.decode(z, (dim,))
    return torch.sigmoid(module.decoder(z))


@torch.no_grad()
def read_factors(data: SymmetricSpaceData, y: torch.Tensor, n_grid: int = 121) -> torch.Tensor:
    """θ̂ (n, 2): the factors of the nearest true observation on a fine grid beyond the data's extent."""
    axis = torch.linspace(-1.25 * data.extent, 1.25 * data.extent, n_grid)
    theta = torch.cartesian_prod(axis, axis)
    return theta[torch.cdist(y, data.observe(theta)).argmin(dim=1)]


@torch.no_grad()
def evaluate(module: ReconstructionModule, data: SymmetricSpaceData) -> dict[str, float]:
    """Held-out / ID errors, mirror errors and (CartanFM) the structure of the learnt bases."""
    dim = data.train[0].shape[1]
    out: dict[str, float] = {}
    for name, (y, _) in (("heldout", data.heldout), ("id", data.val)):
        for metric, values in reconstruction_errors(decode(module, latent(module, y), dim), y).items():
            out[f"{name}_{metric}"] = float(values.mean())
    source, theta = data.mirror_sources()
    mirror = decode(module, -latent(module, source), dim)
    out["mirror_mse"] = float((mirror - data.observe(-theta)).square().sum(1).mean())
    read = read_factors(data, mirror)
    out["mirror_factor_error"] = float((read + theta).norm(dim=1).mean())
    out["mirror_in_heldout"] = float((read >= data.margin).all(dim=1).float().mean())
    if isinstance(module, CartanFM):
        k, p = module.bases.k.detach(), module.bases.p.detach()
        residuals = cartan_residuals(k, p)
        out["cartan_residual_max"] = float(max(residuals.values()))
        out.update({f"cartan_residual_{name}": float(v) for name, v in residuals.items()})
        out.update({f"commutator_ratio_{name}": float(v) for name, v in commutator_ratio(k, p).items()})
        out["span_overlap"] = float(span_overlap(k, p))
        c_k, c_p, _, _ = module.encode(data.heldout[0])
        x_k, x_p = module.bases.components(c_k, c_p)
        out["heldout_k_share"] = float((x_k.square().sum((1, 2)) / (x_k + x_p).square().sum((1, 2))).mean())
    return out


def run_arm(
    arm: str,
    data: SymmetricSpaceData,
    *,
    seed: int,
    steps: int = 2000,
    lr: float = 3e-3,
    hidden: int = 128,
    algebra: tuple[int, int, int] = (1, 2, 3),
    fitter: Fitter | None = None,
    **extra: Any,
) -> dict[str, float]:
    """Train one arm with one seed (model init and batches) and return :func:`evaluate`'s metrics."""
    torch.manual_seed(seed)
    module = make_arm(arm, data.train[0].shape[1], lr, hidden, algebra, **extra)
    return evaluate(train_arm(fitter or Fitter(), module, data, steps, seed), data)
