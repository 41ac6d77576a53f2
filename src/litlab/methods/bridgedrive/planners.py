"""The five planners compared in the BridgeDrive study, all on the same encoder and decoder.

Plans are ``(B, H, 2)`` ego-frame waypoints in metres; networks see them normalised per waypoint index
(mean and std of the training plans). Anchors are k-means centres of training plans (``anchors.kmeans``).

- ``BridgePlanner``: classifier picks an anchor, a VP diffusion bridge carries it to the plan (BridgeDrive).
- ``TruncatedDiffusionPlanner``: DiffusionDrive's truncated DDIM from a lightly noised anchor.
- ``PlainDiffusionPlanner``: DDIM from N(0, I) (TransfuserDP-style).
- ``AnchorClassifierPlanner``: the chosen anchor itself.
- ``RegressionPlanner``: one deterministic decoder pass.
"""

from __future__ import annotations

import abc
import copy

import torch
from diffusers import DDIMScheduler
from torch import Tensor, nn
from torch.nn import functional as F
from torchvision.ops import sigmoid_focal_loss

from litlab.methods.bridgedrive.anchors import nearest_anchor
from litlab.methods.bridgedrive.bridge import VPBridge
from litlab.methods.bridgedrive.networks import AnchorClassifier, Denoiser, Encoder

TRAIN_TIMESTEPS = 1000


def focal_loss(logits: Tensor, target: Tensor, alpha: float = 0.25, gamma: float = 2.0) -> Tensor:
    """Sigmoid focal loss of ``logits: (B, K)`` against class indices ``target: (B,)``, summed over K,
    averaged over B (DETR / DiffusionDrive convention)."""
    onehot = F.one_hot(target, logits.shape[1]).to(logits.dtype)
    return sigmoid_focal_loss(logits, onehot, alpha=alpha, gamma=gamma, reduction="sum") / len(logits)


def ddim_update(x_t: Tensor, x0_hat: Tensor, alpha_bar_t: Tensor, alpha_bar_prev: Tensor) -> Tensor:
    """Deterministic DDIM step (η = 0) from x_t to the previous time, given x̂_0 (prediction_type="sample")."""
    eps = (x_t - alpha_bar_t.sqrt() * x0_hat) / (1 - alpha_bar_t).sqrt()
    return alpha_bar_prev.sqrt() * x0_hat + (1 - alpha_bar_prev).sqrt() * eps


def make_scheduler(spacing: str = "trailing") -> DDIMScheduler:
    """diffusers' DDIM with DiffusionDrive's settings: 1000 steps, scaled_linear, x0-prediction."""
    return DDIMScheduler(
        num_train_timesteps=TRAIN_TIMESTEPS,
        beta_schedule="scaled_linear",
        prediction_type="sample",
        clip_sample=False,
        set_alpha_to_one=True,
        timestep_spacing=spacing,
    )


class Planner(nn.Module, abc.ABC):
    """Shared parts: encoder, normalisation, anchors, loss weights.

    Args:
        obs_dim: observation length. anchors: ``(K, H, 2)`` in metres. mean, std: ``(H, 2)`` per-index stats.
        hidden: encoder width (the decoder is twice as wide).
    """

    uses_anchors = True
    uses_decoder = True

    def __init__(
        self,
        obs_dim: int,
        anchors: Tensor,
        mean: Tensor,
        std: Tensor,
        hidden: int = 128,
        l1_weight: float = 1.0,
        focal_weight: float = 1.0,
    ) -> None:
        super().__init__()
        self.register_buffer("anchors", anchors.float().clone())
        self.register_buffer("mean", mean.float().clone())
        self.register_buffer("std", std.float().clone().clamp_min(1e-3))
        self.horizon = anchors.shape[1]
        self.l1_weight, self.focal_weight = l1_weight, focal_weight
        self.encoder = Encoder(obs_dim, hidden)
        self.decoder = Denoiser(hidden, self.horizon, 2 * hidden) if self.uses_decoder else None
        self.classifier = AnchorClassifier(hidden, len(anchors), hidden) if self.uses_anchors else None

    def normalize(self, plan: Tensor) -> Tensor:
        return (plan - self.mean) / self.std

    def denormalize(self, x: Tensor) -> Tensor:
        return x * self.std + self.mean

    def classify(self, obs: Tensor) -> Tensor:
        """``(B,)`` index of the anchor the classifier picks."""
        return self.classifier(self.encoder(obs)).argmax(dim=1)

    def anchor_losses(self, context: Tensor, plan: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(focal loss, target anchor index (B,), that anchor normalised (B, H, 2))."""
        target = nearest_anchor(plan, self.anchors)
        focal = focal_loss(self.classifier(context), target)
        return focal, target, self.normalize(self.anchors[target])

    @abc.abstractmethod
    def loss(self, obs: Tensor, plan: Tensor) -> dict[str, Tensor]:
        """Training losses for ``obs: (B, D)`` and expert ``plan: (B, H, 2)``; key ``loss`` is optimised."""

    @abc.abstractmethod
    def plan(self, obs: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        """``(B, H, 2)`` plan in metres using ``steps`` decoder calls (ignored by one-shot planners)."""


ANCHOR_CHOICES = ("classifier", "random", "fixed")


class BridgePlanner(Planner):
    """BridgeDrive: x̂_0 decoder trained on VP-bridge samples between the nearest anchor and the plan
    (t = k/1000, k ~ U{1..1000}), loss L1(x̂_0, x_0) + focal; DBIM sampling from the classifier's anchor.

    Ablations (config flags): ``anchor=False`` bridges from the mean training plan instead of an anchor, in
    training and sampling, with no classifier (the bridge without its anchor guidance);
    ``anchor_choice="random"`` samples from a uniformly random anchor and ``"fixed"`` from the one anchor
    nearest the mean plan (trained as the paper; tests whether the classifier's pick matters).
    """

    def __init__(
        self,
        *args,
        beta_d: float = 1.0,
        beta_min: float = 0.1,
        anchor: bool = True,
        anchor_choice: str = "classifier",
        **kwargs,
    ) -> None:
        if anchor_choice not in ANCHOR_CHOICES:
            raise ValueError(f"anchor_choice={anchor_choice!r}; choose one of {ANCHOR_CHOICES}")
        self.uses_anchors = anchor
        super().__init__(*args, **kwargs)
        self.bridge = VPBridge(beta_d, beta_min)
        self.anchor_choice = anchor_choice

    def start(self, context: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """``(B, H, 2)`` normalised bridge start x_T at sampling time (see the class docstring)."""
        batch = (len(context), self.horizon, 2)
        if not self.uses_anchors:
            return torch.zeros(batch, device=context.device)  # the mean plan, normalised
        if self.anchor_choice == "classifier":
            index = self.classifier(context).argmax(dim=1)
        elif self.anchor_choice == "random":
            index = torch.randint(len(self.anchors), (len(context),), generator=generator).to(context.device)
        else:
            index = nearest_anchor(self.mean[None], self.anchors).expand(len(context))
        return self.normalize(self.anchors[index])

    def loss(self, obs: Tensor, plan: Tensor) -> dict[str, Tensor]:
        context = self.encoder(obs)
        x0 = self.normalize(plan)
        if self.uses_anchors:
            focal, _, x_T = self.anchor_losses(context, plan)
        else:
            focal, x_T = torch.zeros((), device=obs.device), torch.zeros_like(x0)
        t = torch.randint(1, TRAIN_TIMESTEPS + 1, (len(obs),), device=obs.device) / TRAIN_TIMESTEPS
        x_t = self.bridge.marginal(x0, x_T, t, torch.randn_like(x0))
        l1 = (self.decoder(context, x_t, x_T, t * TRAIN_TIMESTEPS) - x0).abs().mean()
        return {"loss": self.l1_weight * l1 + self.focal_weight * focal, "l1": l1, "focal": focal}

    @torch.no_grad()
    def plan(self, obs: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        context = self.encoder(obs)
        x_T = self.start(context, generator)
        x0 = self.bridge.sample(
            lambda x, t, anchor: self.decoder(context, x, anchor, t * TRAIN_TIMESTEPS), x_T, steps, generator
        )
        return self.denormalize(x0)


class TruncatedDiffusionPlanner(Planner):
    """DiffusionDrive: train on the nearest anchor noised to t ~ U{0..truncation-1} (DDPM forward process),
    L1 on x̂_0 + focal; sample by noising the chosen anchor to ``start_step`` (DiffusionDrive: t = 8 of 1000)
    and running DDIM to 0."""

    def __init__(self, *args, truncation: int = 50, start_step: int = 8, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not 0 < start_step < truncation <= TRAIN_TIMESTEPS:
            raise ValueError("need 0 < start_step < truncation <= 1000")
        self.truncation, self.start_step = truncation, start_step
        self.scheduler = make_scheduler()
        self.register_buffer("alpha_bar", self.scheduler.alphas_cumprod.float().clone(), persistent=False)

    def loss(self, obs: Tensor, plan: Tensor) -> dict[str, Tensor]:
        context = self.encoder(obs)
        focal, _, anchor = self.anchor_losses(context, plan)
        t = torch.randint(0, self.truncation, (len(obs),), device=obs.device)
        x_t = self.scheduler.add_noise(anchor, torch.randn_like(anchor), t.cpu()).to(anchor)
        l1 = (self.decoder(context, x_t, anchor, t.float()) - self.normalize(plan)).abs().mean()
        return {"loss": self.l1_weight * l1 + self.focal_weight * focal, "l1": l1, "focal": focal}

    def timesteps(self, steps: int) -> list[int]:
        """Decoder-call times: ``steps`` values from ``start_step`` down to 0 (2 steps from t = 8: [8, 0])."""
        grid = (
            torch.linspace(self.start_step, 0, steps).round().long().tolist()
            if steps > 1
            else [self.start_step]
        )
        return grid

    @torch.no_grad()
    def plan(self, obs: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        context = self.encoder(obs)
        anchor = self.normalize(self.anchors[self.classifier(context).argmax(dim=1)])
        times = self.timesteps(steps)
        noise = torch.randn(anchor.shape, generator=generator).to(anchor)
        ab = self.alpha_bar
        x = ab[times[0]].sqrt() * anchor + (1 - ab[times[0]]).sqrt() * noise
        for i, t in enumerate(times):
            x0_hat = self.decoder(context, x, anchor, torch.full((len(x),), float(t), device=x.device))
            ab_prev = ab[times[i + 1]] if i + 1 < len(times) else torch.ones((), device=x.device)
            x = ddim_update(x, x0_hat, ab[t], ab_prev)
        return self.denormalize(x)


class PlainDiffusionPlanner(Planner):
    """DDPM-trained x̂_0 decoder over all 1000 steps, sampled by diffusers' DDIM from N(0, I) (no anchors)."""

    uses_anchors = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler = make_scheduler()

    def loss(self, obs: Tensor, plan: Tensor) -> dict[str, Tensor]:
        context = self.encoder(obs)
        x0 = self.normalize(plan)
        t = torch.randint(0, TRAIN_TIMESTEPS, (len(obs),), device=obs.device)
        x_t = self.scheduler.add_noise(x0, torch.randn_like(x0), t.cpu()).to(x0)
        l1 = (self.decoder(context, x_t, torch.zeros_like(x0), t.float()) - x0).abs().mean()
        return {"loss": self.l1_weight * l1, "l1": l1}

    @torch.no_grad()
    def plan(self, obs: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        context = self.encoder(obs)
        scheduler = copy.deepcopy(self.scheduler)
        scheduler.set_timesteps(steps)
        shape = (len(obs), self.horizon, 2)
        x = torch.randn(shape, generator=generator).to(context)
        zeros = torch.zeros(shape, device=context.device)
        for t in scheduler.timesteps:
            x0_hat = self.decoder(context, x, zeros, torch.full((len(x),), float(t), device=x.device))
            x = scheduler.step(x0_hat, t, x).prev_sample
        return self.denormalize(x)


class AnchorClassifierPlanner(Planner):
    """The classifier's anchor, with no refinement (focal loss only)."""

    uses_decoder = False

    def loss(self, obs: Tensor, plan: Tensor) -> dict[str, Tensor]:
        focal, _, _ = self.anchor_losses(self.encoder(obs), plan)
        return {"loss": self.focal_weight * focal, "focal": focal}

    @torch.no_grad()
    def plan(self, obs: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        return self.anchors[self.classify(obs)]


class RegressionPlanner(Planner):
    """One decoder pass with zero x_t, anchor and time (an MLP regressor on the shared encoder), L1 loss."""

    uses_anchors = False

    def _predict(self, obs: Tensor) -> Tensor:
        context = self.encoder(obs)
        zeros = torch.zeros(len(obs), self.horizon, 2, device=obs.device)
        return self.decoder(context, zeros, zeros, torch.zeros(len(obs), device=obs.device))

    def loss(self, obs: Tensor, plan: Tensor) -> dict[str, Tensor]:
        l1 = (self._predict(obs) - self.normalize(plan)).abs().mean()
        return {"loss": self.l1_weight * l1, "l1": l1}

    @torch.no_grad()
    def plan(self, obs: Tensor, steps: int, generator: torch.Generator | None = None) -> Tensor:
        return self.denormalize(self._predict(obs))
