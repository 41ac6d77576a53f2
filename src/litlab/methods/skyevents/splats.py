"""A 3D Gaussian scene for SkyEvents' reconstructions: initialised from LiDAR points, rendered by
``litlab.kernels.gaussian_splatting``, grown and pruned by the adaptive density control of 3DGS.

Adaptive density control (Kerbl et al., 2023, §5.2): the norm of each Gaussian's mean gradient in
normalised device coordinates is averaged over the views that saw it; every ``densify_every`` steps a
Gaussian above ``grad_threshold`` is cloned when small (max scale ≤ ``percent_dense`` × scene extent) and
split in two when large (means drawn from it, scales / 1.6); Gaussians with opacity under ``min_opacity``
are pruned, and after the first opacity reset also those larger than ``max_world_scale`` × extent;
opacities are reset to ≤ 0.01 every ``reset_every`` steps. All of it stops at ``stop`` or half the fit,
whichever comes first (3DGS: 15k of 30k), so the second half only optimises and a fit never ends just after
an opacity reset. The optimizer's moments follow the parameters (zero for new Gaussians), as in the
official code. Reconstructed: the extent is the radius of the initial
points (3DGS uses the cameras'), and the official screen-size pruning (radius > 20 px) is left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from litlab.kernels.gaussian_splatting import (
    SH_C0,
    Camera,
    covariance_3d,
    project,
    quaternion_to_matrix,
    rasterize,
    sh_colour,
)

PARAMETERS = ("means", "quaternions", "log_scales", "opacity_logits", "sh")


@dataclass(frozen=True)
class DensityControl:
    """The 3DGS schedule and thresholds (the official defaults, steps scaled down for CPU-sized runs)."""

    start: int = 100
    stop: int = 1500
    densify_every: int = 50
    reset_every: int = 600
    grad_threshold: float = 2e-4
    percent_dense: float = 0.01
    split_scale: float = 1.6
    min_opacity: float = 0.005
    max_world_scale: float = 0.1
    max_gaussians: int = 100_000


class GaussianScene(nn.Module):
    """Gaussians with SH colour of ``degree``; ``render(camera)`` keeps the image-space means' gradients."""

    def __init__(self, means: Tensor, colours: Tensor, degree: int = 1, opacity: float = 0.1) -> None:
        super().__init__()
        n = len(means)
        sh = torch.zeros(n, (degree + 1) ** 2, 3)
        sh[:, 0] = (colours - 0.5) / SH_C0
        self.means = nn.Parameter(means.float().clone())
        self.quaternions = nn.Parameter(torch.tensor([1.0, 0.0, 0.0, 0.0]).repeat(n, 1))
        self.log_scales = nn.Parameter(nearest_neighbour_scale(means).log()[:, None].repeat(1, 3))
        self.opacity_logits = nn.Parameter(torch.full((n,), math.log(opacity / (1 - opacity))))
        self.sh = nn.Parameter(sh)
        self.extent = float((means - means.mean(0)).norm(dim=-1).max())
        self.register_buffer("grad_sum", torch.zeros(n))
        self.register_buffer("grad_views", torch.zeros(n))
        self._image_means: list[tuple[Tensor, Tensor, Tensor]] = []

    def __len__(self) -> int:
        return len(self.means)

    def render(self, camera: Camera, background: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """rgb ``(3, H, W)``, expected depth and opacity ``(1, H, W)`` of one view."""
        projected = project(self.means, covariance_3d(self.quaternions, self.log_scales), camera)
        if self.training and projected.means.requires_grad:
            projected.means.retain_grad()
            ndc_per_pixel = projected.means.new_tensor([camera.width / 2, camera.height / 2])
            self._image_means.append((projected.means, projected.visible, ndc_per_pixel))
        directions = nn.functional.normalize(self.means - camera.centre, dim=-1)
        colours = sh_colour(self.sh, directions)
        opacities = torch.sigmoid(self.opacity_logits)
        return rasterize(projected, opacities, colours, camera.width, camera.height, background)

    @torch.no_grad()
    def accumulate_gradients(self) -> None:
        """After ``backward``: add each rendered view's NDC mean-gradient norms to the statistics."""
        for means, visible, ndc_per_pixel in self._image_means:
            if means.grad is not None:
                self.grad_sum += (means.grad * ndc_per_pixel).norm(dim=-1) * visible
                self.grad_views += visible.float()
        self._image_means.clear()

    def adapt(
        self,
        optimizer: torch.optim.Optimizer,
        control: DensityControl,
        step: int,
        total_steps: int | None = None,
    ) -> dict[str, int]:
        """Call after each optimizer step: densify, prune and reset opacities on the 3DGS schedule, which
        ends at ``control.stop`` or at half of ``total_steps`` (the fit's length), whichever is first."""
        stop = control.stop if total_steps is None else min(control.stop, total_steps // 2)
        counts: dict[str, int] = {}
        if control.start <= step < stop and step % control.densify_every == 0:
            counts = self.densify_and_prune(optimizer, control, prune_large=step > control.reset_every)
        if 0 < step < stop and step % control.reset_every == 0:
            self.reset_opacity(optimizer)
        return counts

    @torch.no_grad()
    def densify_and_prune(
        self, optimizer: torch.optim.Optimizer, control: DensityControl, prune_large: bool = True
    ) -> dict[str, int]:
        """Clone, split and prune once (3DGS ``densify_and_prune``); returns how many of each."""
        mean_grad = self.grad_sum / self.grad_views.clamp_min(1)
        large_grad = mean_grad >= control.grad_threshold
        room = max(control.max_gaussians - len(self), 0)
        max_scale = self.log_scales.exp().amax(-1)
        small = max_scale <= control.percent_dense * self.extent
        clone = _first(large_grad & small, room)
        split = _first(large_grad & ~small, max(room - int(clone.sum()), 0))
        old = {name: getattr(self, name).detach() for name in PARAMETERS}
        cloned = {name: value[clone] for name, value in old.items()}
        halves = {name: value[split].repeat(2, *[1] * (value.dim() - 1)) for name, value in old.items()}
        scales = halves["log_scales"].exp()
        rotation = quaternion_to_matrix(halves["quaternions"])
        halves["means"] = (
            halves["means"] + (rotation @ (torch.randn_like(scales) * scales)[..., None])[..., 0]
        )
        halves["log_scales"] = (scales / control.split_scale).log()
        keep = ~split
        added = {name: torch.cat([cloned[name], halves[name]]) for name in PARAMETERS}
        opacity = torch.sigmoid(torch.cat([old["opacity_logits"][keep], added["opacity_logits"]]))
        world = torch.cat([old["log_scales"][keep], added["log_scales"]]).exp().amax(-1)
        survive = opacity >= control.min_opacity
        if prune_large:
            survive &= world <= control.max_world_scale * self.extent
        self._replace(optimizer, keep, added, survive)
        return {"cloned": int(clone.sum()), "split": int(split.sum()), "pruned": int((~survive).sum())}

    @torch.no_grad()
    def reset_opacity(self, optimizer: torch.optim.Optimizer, ceiling: float = 0.01) -> None:
        """Opacities to at most ``ceiling``, their Adam moments zeroed (3DGS ``reset_opacity``)."""
        self.opacity_logits.clamp_(max=math.log(ceiling / (1 - ceiling)))
        state = optimizer.state.get(self.opacity_logits, {})
        for key in ("exp_avg", "exp_avg_sq"):
            if key in state:
                state[key].zero_()

    def _replace(
        self, optimizer: torch.optim.Optimizer, keep: Tensor, added: dict[str, Tensor], survive: Tensor
    ) -> None:
        """Rows ``keep`` of every parameter plus ``added``, then rows ``survive``; Adam moments follow."""
        for name in PARAMETERS:
            old = getattr(self, name)
            new = nn.Parameter(torch.cat([old.detach()[keep], added[name]])[survive])
            state = optimizer.state.pop(old, None)
            for group in optimizer.param_groups:
                group["params"] = [new if p is old else p for p in group["params"]]
            if state is not None:
                for key in ("exp_avg", "exp_avg_sq"):
                    moment = state[key]
                    state[key] = torch.cat([moment[keep], moment.new_zeros(added[name].shape)])[survive]
                optimizer.state[new] = state
            setattr(self, name, new)
        n = len(self.means)
        self.grad_sum, self.grad_views = self.grad_sum.new_zeros(n), self.grad_views.new_zeros(n)


def nearest_neighbour_scale(points: Tensor, k: int = 3, chunk: int = 4096) -> Tensor:
    """√(mean squared distance to the ``k`` nearest other points) ``(N,)``: the 3DGS initial scale."""
    if len(points) < 2:
        raise ValueError(f"a Gaussian scene is initialised from at least 2 points, got {len(points)}")
    k = min(k, len(points) - 1)
    scales = []
    for start in range(0, len(points), chunk):
        distances = torch.cdist(points[start : start + chunk], points).square()
        nearest = distances.topk(k + 1, largest=False).values[:, 1:]  # the first is the point itself
        scales.append(nearest.mean(-1).clamp_min(1e-8).sqrt())
    return torch.cat(scales)


def _first(mask: Tensor, limit: int) -> Tensor:
    """``mask`` with only its first ``limit`` true entries kept (the Gaussian budget)."""
    return mask & (mask.cumsum(0) <= limit)
