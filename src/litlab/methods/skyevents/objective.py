"""The training objective of one reconstruction setup (RGB only, whole-frame events, or RER)."""

from __future__ import annotations

import torch
from torch import nn
from torchmetrics.functional.image import peak_signal_noise_ratio, structural_similarity_index_measure

from litlab.datamodules.events import UAVSequence
from litlab.datamodules.uav.render import GroundTexture, log_luminance
from litlab.methods.skyevents.losses import (
    blur_aware_rgb_loss,
    event_frames,
    overlap_mask,
    region_event_loss,
    whole_frame_event_loss,
)
from litlab.methods.skyevents.renderers import SplatScene, TextureScene

EVENT_LOSSES = ("none", "full", "rer")
RENDERERS = ("texture", "gaussians")


class EventReconstruction(nn.Module):
    """A texture on the LiDAR surface trained by a blur-aware RGB loss plus ``event_weight`` × an event loss.

    ``event_loss``: ``none`` (RGB only), ``full`` (whole-frame ``(ΔL̂ − C·Σp)²``) or ``rer`` (region-wise,
    normalised, inside the RGB overlap). Event views render ``event_supersample``² rays per pixel, as the
    event pixels are coarser than the texels. Each training frame contributes one event window of random
    length in ``window`` (s) around its time; events are read on the event clock at ``t + offset``.
    ``overlap_mask=False`` is RER's ablation: its regions cover the whole event frame, not only Ω.
    ``renderer``: ``texture`` (albedo texels of ``texel`` m on the LiDAR DEM) or ``gaussians`` (3DGS
    initialised on the DEM every ``splat_spacing`` m, SH colour of ``sh_degree``, adaptive ``density``
    control and per-parameter ``splat_learning_rates``; ``wall_fill`` adds points down the DEM's walls and
    ``seen_only`` keeps only points the frames see, ``splat_opacity`` is their initial opacity; see
    ``renderers``).
    """

    def __init__(
        self,
        texel: float = 1.25,
        event_loss: str = "rer",
        event_weight: float = 0.05,
        exposure_samples: int = 5,
        window: tuple[float, float] = (0.01, 0.04),
        patch: int = 8,
        min_events: int = 8,
        dark: float = 0.01,
        event_supersample: int = 2,
        region_norm: str = "l1",
        overlap_mask: bool = True,
        renderer: str = "texture",
        splat_spacing: float = 1.25,
        sh_degree: int = 1,
        density: dict | None = None,
        splat_learning_rates: dict | None = None,
        wall_fill: bool = False,
        seen_only: bool = False,
        splat_opacity: float = 0.1,
    ) -> None:
        super().__init__()
        if event_loss not in EVENT_LOSSES:
            raise ValueError(f"event_loss must be one of {EVENT_LOSSES}, got {event_loss!r}")
        if renderer not in RENDERERS:
            raise ValueError(f"renderer must be one of {RENDERERS}, got {renderer!r}")
        self.renderer = renderer
        self.splat_options = {
            "spacing": splat_spacing,
            "sh_degree": sh_degree,
            "density": dict(density or {}),
            "learning_rates": dict(splat_learning_rates or {}),
            "wall_fill": wall_fill,
            "seen_only": seen_only,
            "opacity": splat_opacity,
        }
        self.texel = texel
        self.event_loss = event_loss
        self.event_weight = event_weight
        self.exposure_samples = exposure_samples
        self.window = tuple(window)
        self.patch = patch
        self.min_events = min_events
        self.dark = dark
        self.event_supersample = event_supersample
        self.region_norm = region_norm
        self.overlap_mask = overlap_mask
        self.scene: TextureScene | SplatScene | None = None
        self.offset = 0.0

    @property
    def texture(self) -> GroundTexture:
        """The texture of the ``texture`` renderer."""
        if not isinstance(self.scene, TextureScene):
            raise AttributeError("only the texture renderer has a texture")
        return self.scene.texture

    def build(self, sequence: UAVSequence, offset: float) -> None:
        """Create the scene over the sequence's ground and fix the event-clock ``offset`` (s)."""
        if self.renderer == "texture":
            self.scene = TextureScene(sequence, self.texel)
        else:
            self.scene = SplatScene(sequence, **self.splat_options)
        self.offset = float(offset)

    def render_rgb(self, sequence: UAVSequence, times: torch.Tensor) -> torch.Tensor:
        """Renders ``(*times.shape, 3, H, W)`` at RGB-clock ``times``."""
        rotation, centre = sequence.rgb_pose(times.reshape(-1))
        k = sequence.rgb_intrinsics
        return self.scene(k, rotation, centre).reshape(*times.shape, 3, k.height, k.width)

    def losses(self, sequence: UAVSequence, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """``rgb``, ``event`` and ``total`` losses on the frames ``index (B,)``."""
        frame_times = sequence.frame_times[index]
        u = torch.linspace(-0.5, 0.5, self.exposure_samples, device=frame_times.device) * sequence.exposure
        rgb = blur_aware_rgb_loss(self.render_rgb(sequence, frame_times[:, None] + u), sequence.frames[index])
        out = {"rgb": rgb, "total": rgb}
        if self.event_loss == "none":
            return out
        lo, hi = self.window
        length = lo + (hi - lo) * torch.rand(len(index), device=frame_times.device)
        t_a, t_b = frame_times - length / 2, frame_times + length / 2
        k = sequence.event_intrinsics
        polarity, counts = event_frames(
            sequence.events, t_a.double() + self.offset, t_b.double() + self.offset, k.height, k.width
        )
        rotation, centre = sequence.event_pose(torch.cat([t_a, t_b]))
        image = self.scene(k, rotation, centre, self.event_supersample)
        log_l = log_luminance(image, self.dark)
        delta = log_l[len(index) :] - log_l[: len(index)]
        if self.event_loss == "full":
            event = whole_frame_event_loss(delta, polarity, sequence.event_threshold)
        else:
            mask = self.rer_mask(sequence, frame_times) if self.overlap_mask else torch.ones_like(counts)
            event = region_event_loss(
                delta, polarity, counts, mask, self.patch, self.min_events, norm=self.region_norm
            )
        out.update(event=event, total=rgb + self.event_weight * event)
        return out

    def rer_mask(self, sequence: UAVSequence, times: torch.Tensor) -> torch.Tensor:
        """Ω ``(B, 1, h, w)``: event pixels whose LiDAR point lands in the RGB view at ``times (B,)``."""
        rotation, centre = sequence.event_pose(times)
        rgb_rotation, rgb_centre = sequence.rgb_pose(times)
        return overlap_mask(
            sequence.event_intrinsics,
            rotation,
            centre,
            sequence.rgb_intrinsics,
            rgb_rotation,
            rgb_centre,
            sequence.surface,
        )

    @torch.no_grad()
    def evaluate(self, sequence: UAVSequence, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """PSNR and SSIM at frames ``index``: sharp renders against the well-lit sharp ground truth, or, for
        a real recording (no ground truth), the capture model's render (the exposure mean, as in the RGB
        loss) against the captured frame.

        As papers report them: each the mean over views of the per-view value (PSNR from each view's own
        MSE, not the pooled one); SSIM is torchmetrics' (Gaussian window 11, σ 1.5, data range 1).
        """
        times = sequence.frame_times[index]
        if sequence.sharp_views is None:
            u = torch.linspace(-0.5, 0.5, self.exposure_samples, device=times.device) * sequence.exposure
            pred, target = self.render_rgb(sequence, times[:, None] + u).mean(1), sequence.frames[index]
        else:
            pred, target = self.render_rgb(sequence, times), sequence.sharp_views[index]
        pred = pred.clamp(0, 1)
        return {
            "psnr": peak_signal_noise_ratio(pred, target, data_range=1.0, dim=(1, 2, 3)),
            "ssim": structural_similarity_index_measure(pred, target, data_range=1.0),
        }
