"""LightningModules: CartanFM (and its flow-matching-only ablation) and the VAE / β-VAE baselines.

Both score reconstructions the same way: validation on in-distribution images, test on the held-out
combinations (dataloader 0) and the in-distribution images (dataloader 1), per-image BCE and squared
error summed over pixels, averaged over images.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import lightning as L
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn
from torch.nn import functional as F

from litlab.methods.symspace.flow import cfm_loss, sample
from litlab.methods.symspace.lie import (
    LieBases,
    cartan_orthogonality,
    cartan_projection,
    cartan_residuals,
    commutator_ratio,
    span_overlap,
)
from litlab.methods.symspace.networks import (
    ConditionalMLP,
    ConditionalUNet,
    Encoder,
    VAEDecoder,
    VectorEncoder,
    mlp,
)
from litlab.optim import OptimizerFactory

TEST_SETS = ("heldout", "id")
GSC_SIGNS = ("paper", "code")
CONDITIONS = ("vec", "exp")
CARTAN_FORMS = {"projection": cartan_projection, "orthogonality": cartan_orthogonality}


CODE_BCE_EPS = 1e-3  # the official evaluation clamps the decoded image to [1e-3, 1 − 1e-3] before its BCE


def reconstruction_errors(
    recon: torch.Tensor, target: torch.Tensor, eps: float = 1e-4
) -> dict[str, torch.Tensor]:
    """Per-image errors summed over pixels, recon and target (B, C, H, W) in [0, 1] -> (B,) each.

    ``bce`` clamps ``recon`` to [eps, 1 − eps] (a sampled, not probabilistic, decoder gets a finite BCE);
    ``bce_code`` clamps it as the official evaluation does, to [1e-3, 1 − 1e-3], which gives even a perfect
    reconstruction H·W·(−ln(1 − 1e-3)) nats (4.10 at 64×64); ``mse`` is the squared error.
    """
    return {
        "bce": _clamped_bce(recon, target, eps),
        "bce_code": _clamped_bce(recon, target, CODE_BCE_EPS),
        "mse": (recon.clamp(0, 1) - target).square().flatten(1).sum(1),
    }


def _clamped_bce(recon: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """BCE of ``recon`` clamped to [eps, 1 − eps] against ``target``, summed per image: (B, ...) -> (B,)."""
    return F.binary_cross_entropy(recon.clamp(eps, 1 - eps), target, reduction="none").flatten(1).sum(1)


def plain_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """(C, H, W) for images or (D,) for vectors, as Python ints, from any sequence a config passes."""
    out = tuple(int(v) for v in shape)
    if len(out) not in (1, 3):
        raise ValueError(f"image_shape must be (C, H, W) or (D,), got {out}")
    return out


def gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mu, diag exp(logvar)) ‖ N(0, I)) summed over latents, averaged over the batch (B, d) -> ()."""
    return -0.5 * (1 + logvar - mu.square() - logvar.exp()).sum(1).mean()


class ReconstructionModule(L.LightningModule, abc.ABC):
    """Shared evaluation: reconstruction errors on val/test and a grid of held-out reconstructions."""

    def __init__(self, optimizer: OptimizerFactory) -> None:
        super().__init__()
        self.optimizer_factory = optimizer
        self._examples: tuple[torch.Tensor, torch.Tensor] | None = None

    @abc.abstractmethod
    def reconstruct(self, images: torch.Tensor) -> torch.Tensor:
        """Reconstructions in [0, 1] of images (B, C, H, W), deterministic for a fixed module and input."""

    def _score(self, batch: list[torch.Tensor], prefix: str) -> torch.Tensor:
        images = batch[0]
        recon = self.reconstruct(images)
        for name, value in reconstruction_errors(recon, images).items():
            self.log(
                f"{prefix}_{name}",
                value.mean(),
                batch_size=len(images),
                sync_dist=True,
                add_dataloader_idx=False,
            )
        return recon

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self._score(batch, "val/id")

    def test_step(self, batch: list[torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        recon = self._score(batch, f"test/{TEST_SETS[dataloader_idx]}")
        if dataloader_idx == 0 and batch_idx == 0:
            self._examples = (batch[0][:8].detach().cpu(), recon[:8].detach().cpu())

    def configure_optimizers(self) -> Any:
        return self.optimizer_factory(params=self.parameters())

    def figures(self, stage: str) -> dict[str, Figure]:
        """Held-out images (top row) and their reconstructions (bottom row)."""
        if stage != "test" or self._examples is None or self._examples[0].dim() != 4:
            return {}
        images, recon = self._examples
        fig, axes = plt.subplots(2, len(images), figsize=(1.2 * len(images), 2.6), squeeze=False)
        for col in range(len(images)):
            for row, source in enumerate((images, recon)):
                axes[row, col].imshow(source[col].permute(1, 2, 0).squeeze(-1), cmap="gray", vmin=0, vmax=1)
                axes[row, col].axis("off")
        axes[0, 0].set_title("held-out", fontsize=8, loc="left")
        axes[1, 0].set_title("reconstruction", fontsize=8, loc="left")
        return {"heldout_reconstructions": fig}


class CartanFM(ReconstructionModule):
    """Encoder φ -> (c_k, c_p) -> X = Σ c_k K + Σ c_p P -> flow-matching U-Net decoder conditioned on X.

    Loss = CFM + w_cartan · L_Cartan + w_geo · ‖X_k‖² + w_nontrivial · Σ 1/‖B‖ + w_gsc · L_GSC + w_kl · KL(z).
    L_GSC decodes the geodesic mirror image (condition −X) with one Euler step from noise, re-encodes it
    to ĉ and asks ĉ ≈ −c (``gsc_sign="paper"``, the poster) or ĉ ≈ +c (``"code"``, the official code).
    All structure weights at 0 give the paper's flow-matching-only ablation. The auxiliary VAE latent z
    (``z_dim``) gets only a KL term and never feeds the decoder, as in the official code.
    ``cartan_form`` picks L_Cartan: ``projection`` (scale-free bracket residuals + k ⊥ p, see
    :func:`cartan_projection`) or ``orthogonality`` (the official code's). Vector data (``image_shape``
    = (D,)) uses MLPs for φ and v with hidden width ``unet_width``.
    """

    def __init__(
        self,
        optimizer: OptimizerFactory,
        image_shape: tuple[int, int, int] = (1, 32, 32),
        n_k: int = 5,
        n_p: int = 10,
        algebra_dim: int = 10,
        z_dim: int = 10,
        unet_width: int = 32,
        condition: str = "vec",
        normalize_condition: bool = True,
        condition_channels: int = 8,
        cartan_weight: float = 1.0,
        cartan_form: str = "projection",
        geodesic_weight: float = 0.1,
        nontrivial_weight: float = 1e-3,
        gsc_weight: float = 1.0,
        gsc_sign: str = "paper",
        kl_weight: float = 0.01,
        sigma_min: float = 1e-6,
        sample_steps: int = 20,
        sampler: str = "euler",
        eval_seed: int = 0,
    ) -> None:
        super().__init__(optimizer)
        if gsc_sign not in GSC_SIGNS or condition not in CONDITIONS or cartan_form not in CARTAN_FORMS:
            raise ValueError(
                f"gsc_sign must be in {GSC_SIGNS}, condition in {CONDITIONS}, cartan_form in "
                f"{tuple(CARTAN_FORMS)}; got {gsc_sign!r}, {condition!r}, {cartan_form!r}"
            )
        image_shape = plain_shape(image_shape)
        self.save_hyperparameters(logger=False, ignore=["optimizer"])
        self.n_k, self.n_p, self.z_dim = n_k, n_p, z_dim
        n_out = n_k + n_p + 2 * z_dim
        self.bases = LieBases(n_k, n_p, algebra_dim)
        if len(image_shape) == 1:
            self.encoder: nn.Module = VectorEncoder(image_shape[0], n_out, hidden=unet_width)
            self.unet: nn.Module = ConditionalMLP(
                image_shape[0], algebra_dim**2, hidden=unet_width, normalize_condition=normalize_condition
            )
            return
        self.encoder = Encoder(image_shape, n_out)
        self.unet = ConditionalUNet(
            image_shape[0],
            algebra_dim**2,
            width=unet_width,
            normalize_condition=normalize_condition,
            condition_channels=condition_channels,
        )

    def encode(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(c_k (B, n_k), c_p (B, n_p), mu (B, z), logvar (B, z)) of images (B, C, H, W)."""
        return tuple(self.encoder(images).split([self.n_k, self.n_p, self.z_dim, self.z_dim], dim=1))

    def condition_of(self, x: torch.Tensor) -> torch.Tensor:
        """The decoder's condition (B, m²): vec(X), or vec(exp(X)) with ``condition="exp"``."""
        return (torch.linalg.matrix_exp(x) if self.hparams.condition == "exp" else x).flatten(1)

    def losses(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every loss term on a batch (B, C, H, W), unweighted; terms whose weight is 0 are skipped."""
        hp = self.hparams
        c_k, c_p, mu, logvar = self.encode(images)
        x_k, x_p = self.bases.components(c_k, c_p)
        x = x_k + x_p
        cond = self.condition_of(x)
        terms = {"cfm": cfm_loss(lambda t, xt: self.unet(t, xt, cond), images, hp.sigma_min)}
        if hp.cartan_weight:
            terms["cartan"] = sum(CARTAN_FORMS[hp.cartan_form](self.bases.k, self.bases.p).values())
        if hp.geodesic_weight:
            terms["geodesic"] = x_k.square().sum((1, 2)).mean()
        if hp.nontrivial_weight:
            terms["nontrivial"] = self.bases.nontriviality()
        if hp.kl_weight and self.z_dim:
            terms["kl"] = gaussian_kl(mu, logvar)
        if hp.gsc_weight:
            noise = torch.randn_like(images)
            candidate = noise + self.unet(
                torch.zeros(len(images), device=images.device), noise, self.condition_of(-x)
            )
            c_hat = torch.cat(self.encode(candidate)[:2], dim=1)
            c = torch.cat([c_k, c_p], dim=1)
            terms["gsc"] = (c_hat + c if hp.gsc_sign == "paper" else c_hat - c).square().sum(1).mean()
        return terms

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        hp = self.hparams
        terms = self.losses(batch[0])
        weights = {
            "cfm": 1.0,
            "cartan": hp.cartan_weight,
            "geodesic": hp.geodesic_weight,
            "nontrivial": hp.nontrivial_weight,
            "gsc": hp.gsc_weight,
            "kl": hp.kl_weight,
        }
        loss = sum(weights[name] * value for name, value in terms.items())
        for name, value in terms.items():
            self.log(f"train/{name}", value, on_step=False, on_epoch=True, batch_size=len(batch[0]))
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(batch[0]))
        return loss

    @torch.no_grad()
    def decode(self, x: torch.Tensor, image_shape: tuple[int, ...]) -> torch.Tensor:
        """Images (B, *image_shape) in [0, 1] decoded from Lie-algebra elements x (B, m, m), seeded noise."""
        generator = torch.Generator(device=x.device).manual_seed(self.hparams.eval_seed)
        noise = torch.randn((len(x), *image_shape), generator=generator, device=x.device, dtype=x.dtype)
        cond = self.condition_of(x)
        out = sample(
            lambda t, xt: self.unet(t, xt, cond), noise, self.hparams.sample_steps, self.hparams.sampler
        )
        return out.clamp(0, 1)

    @torch.no_grad()
    def lie_element(self, images: torch.Tensor) -> torch.Tensor:
        """X (B, m, m) of images (B, C, H, W) (the encoder's mean; z is not used)."""
        c_k, c_p, _, _ = self.encode(images)
        return self.bases(c_k, c_p)

    def reconstruct(self, images: torch.Tensor) -> torch.Tensor:
        return self.decode(self.lie_element(images), tuple(images.shape[1:]))

    def on_test_epoch_end(self) -> None:
        with torch.no_grad():
            residuals = cartan_residuals(self.bases.k, self.bases.p)
            orthogonality = cartan_orthogonality(self.bases.k, self.bases.p)
            commutators = commutator_ratio(self.bases.k, self.bases.p)
            self.log("test/cartan_span_overlap", span_overlap(self.bases.k, self.bases.p))
        for name in residuals:
            self.log(f"test/cartan_residual_{name}", residuals[name])
            self.log(f"test/cartan_orthogonality_{name}", orthogonality[name])
        for name, value in commutators.items():
            self.log(f"test/commutator_ratio_{name}", value)


class VAE(ReconstructionModule):
    """VAE / β-VAE baseline: the same encoder trunk, a Bernoulli deconvolution decoder, loss BCE + β·KL.

    For vector data (``image_shape`` = (D,)) encoder and decoder are MLPs of width ``hidden``.
    """

    def __init__(
        self,
        optimizer: OptimizerFactory,
        image_shape: tuple[int, int, int] = (1, 32, 32),
        latent_dim: int = 10,
        beta: float = 1.0,
        hidden: int = 128,
    ) -> None:
        super().__init__(optimizer)
        image_shape = plain_shape(image_shape)
        self.save_hyperparameters(logger=False, ignore=["optimizer"])
        if len(image_shape) == 1:
            self.encoder: nn.Module = VectorEncoder(image_shape[0], 2 * latent_dim, hidden=hidden)
            self.decoder: nn.Module = mlp(latent_dim, image_shape[0], hidden)
        else:
            self.encoder = Encoder(image_shape, 2 * latent_dim)
            self.decoder = VAEDecoder(image_shape, latent_dim)

    def losses(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-batch-mean Bernoulli reconstruction term (summed over pixels) and KL of images (B, C, H, W)."""
        mu, logvar = self.encoder(images).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        logits = self.decoder(z)
        rec = F.binary_cross_entropy_with_logits(logits, images, reduction="sum") / len(images)
        return {"rec": rec, "kl": gaussian_kl(mu, logvar)}

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        terms = self.losses(batch[0])
        loss = terms["rec"] + self.hparams.beta * terms["kl"]
        for name, value in terms.items():
            self.log(f"train/{name}", value, on_step=False, on_epoch=True, batch_size=len(batch[0]))
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(batch[0]))
        return loss

    @torch.no_grad()
    def reconstruct(self, images: torch.Tensor) -> torch.Tensor:
        mu, _ = self.encoder(images).chunk(2, dim=1)
        return torch.sigmoid(self.decoder(mu))
