"""The pruning target: a tiny class-conditional diffusers DiT, its DDIM sampler and its training module.

``build_dit`` makes a ``diffusers.DiTTransformer2DModel`` (adaLN-zero, class labels through
``num_embeds_ada_norm``; its label table has a null class ``n_classes`` for classifier-free guidance,
dropped 10 % of the time in training). ``sample`` runs a full deterministic DDIM trajectory and calls
``on_step(i)`` before step i, which is how the Hessian hooks learn the timestep of each call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch import nn

from litlab.core.errors import ConfigError, LitlabError
from litlab.optim import OptimizerFactory, SchedulerFactory, step_scheduled


def _diffusers() -> Any:
    try:
        import diffusers
    except ImportError as error:  # an optional dependency of this paper only
        raise LitlabError("obsdiff needs diffusers: pip install 'diffusers>=0.30'") from error
    return diffusers


def build_dit(
    image_size: int = 16,
    channels: int = 3,
    n_classes: int = 8,
    num_layers: int = 4,
    num_heads: int = 4,
    head_dim: int = 16,
    patch_size: int = 2,
) -> nn.Module:
    """A class-conditional ``DiTTransformer2DModel`` predicting ε for (channels, size, size) images."""
    if image_size % patch_size:
        raise ConfigError(f"image_size {image_size} must be a multiple of patch_size {patch_size}")
    return _diffusers().DiTTransformer2DModel(
        num_attention_heads=num_heads,
        attention_head_dim=head_dim,
        in_channels=channels,
        out_channels=channels,
        num_layers=num_layers,
        sample_size=image_size,
        patch_size=patch_size,
        num_embeds_ada_norm=n_classes,
        norm_num_groups=1,
    )


def make_scheduler(num_train_timesteps: int = 1000) -> Any:
    """The DDIM scheduler (cosine betas, ε-prediction, clipped x̂₀) used for training noise and sampling."""
    return _diffusers().DDIMScheduler(
        num_train_timesteps=num_train_timesteps,
        beta_schedule="squaredcos_cap_v2",
        clip_sample=True,
        prediction_type="epsilon",
    )


def predict_eps(
    model: nn.Module, x: torch.Tensor, t: torch.Tensor | int, labels: torch.Tensor, guidance: float, null: int
) -> torch.Tensor:
    """ε̂(x_t, t, y), x: (n, C, S, S); with guidance > 1 the conditional and null-class halves run as one
    doubled batch (the CFG duplicate the Hessian sees) and mix as ε_u + g·(ε_c − ε_u)."""
    if guidance == 1.0:
        timestep = torch.as_tensor(t, device=x.device).expand(len(x))
        return model(x, timestep=timestep, class_labels=labels).sample
    both = torch.cat([x, x])
    timestep = torch.as_tensor(t, device=x.device).expand(len(both))
    labels = torch.cat([labels, torch.full_like(labels, null)])
    conditional, unconditional = model(both, timestep=timestep, class_labels=labels).sample.chunk(2)
    return unconditional + guidance * (conditional - unconditional)


@torch.no_grad()
def eps_flops(model: nn.Module, image_size: int, guidance: float = 2.0) -> int:
    """FLOPs of one guided ε̂ call on one image (torch's FLOP counter: matmuls and convolutions). A
    masked (unstructured or N:M) model counts as dense; only removed rows and columns reduce it."""
    from torch.utils.flop_counter import FlopCounterMode

    channels = model.config.in_channels
    x, label = torch.zeros(1, channels, image_size, image_size), torch.zeros(1, dtype=torch.long)
    null = model.config.num_embeds_ada_norm
    with FlopCounterMode(display=False) as counter:
        predict_eps(model, x, 500, label, guidance, null)
    return counter.get_total_flops()


@torch.no_grad()
def sample(
    model: nn.Module,
    noise: torch.Tensor,
    labels: torch.Tensor,
    steps: int = 20,
    guidance: float = 1.0,
    on_step: Callable[[int], None] | None = None,
    record: bool = False,
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Deterministic DDIM from ``noise`` (n, C, S, S): (final images, [(x_t, ε̂_t)] per step if record)."""
    scheduler = make_scheduler()
    scheduler.set_timesteps(steps)
    null = int(model.config.num_embeds_ada_norm)
    x, trajectory = noise, []
    for index, t in enumerate(scheduler.timesteps):
        if on_step is not None:
            on_step(index)
        eps = predict_eps(model, x, t, labels, guidance, null)
        if record:
            trajectory.append((x, eps))
        x = scheduler.step(eps, t, x, eta=0.0).prev_sample
    return x, trajectory


@torch.no_grad()
def eps_errors(
    model: nn.Module,
    trajectory: list[tuple[torch.Tensor, torch.Tensor]],
    labels: torch.Tensor,
    guidance: float = 1.0,
) -> torch.Tensor:
    """(steps,) mean squared ε̂ difference of ``model`` vs the reference on the reference's own
    trajectory [(x_t, ε̂_ref)] (as ``sample(..., record=True)`` returns it)."""
    scheduler = make_scheduler()
    scheduler.set_timesteps(len(trajectory))
    null = int(model.config.num_embeds_ada_norm)
    errors = [
        (predict_eps(model, x, t, labels, guidance, null) - eps).square().mean()
        for (x, eps), t in zip(trajectory, scheduler.timesteps)
    ]
    return torch.stack(errors)


class DiTDiffusion(L.LightningModule):
    """Trains ``build_dit`` with the DDPM ε-loss ‖ε − ε̂(√ᾱ_t x₀ + √(1−ᾱ_t) ε, t, y)‖² (t uniform).

    The network is built in ``bind_data`` from the data's image size, channels and classes. ``scheduler``
    (optional) is a partial learning-rate scheduler called with the optimizer, stepped every step.
    """

    def __init__(
        self,
        optimizer: OptimizerFactory,
        num_layers: int = 4,
        num_heads: int = 4,
        head_dim: int = 16,
        patch_size: int = 2,
        num_train_timesteps: int = 1000,
        scheduler: SchedulerFactory | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False, ignore=["optimizer", "scheduler"])
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.net: nn.Module | None = None
        self.scheduler = make_scheduler(num_train_timesteps)

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the DiT for the data's image size, channels and class count."""
        h = self.hparams
        self.net = build_dit(
            int(spec["image_size"]),
            int(spec["channels"]),
            int(spec["n_classes"]),
            h.num_layers,
            h.num_heads,
            h.head_dim,
            h.patch_size,
        )

    def logged_metrics(self) -> set[str]:
        return {"train/loss", "val/loss", "test/loss"}

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """The ε-prediction loss of one (images, labels) batch."""
        if self.net is None:
            raise LitlabError("DiTDiffusion has no network yet: call bind_data(data.data_spec()) first")
        images, labels = batch
        noise = torch.randn_like(images)
        t = torch.randint(0, self.hparams.num_train_timesteps, (len(images),), device=images.device)
        noisy = self.scheduler.add_noise(images, noise, t)
        return nn.functional.mse_loss(self.net(noisy, timestep=t, class_labels=labels).sample, noise)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.log("val/loss", self.loss(batch), prog_bar=True, batch_size=len(batch[0]))

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self.log("test/loss", self.loss(batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        if self.net is None:
            raise LitlabError("DiTDiffusion has no network yet: call bind_data(data.data_spec()) first")
        optimizer = self.optimizer_factory(params=self.net.parameters())
        scheduler = None if self.scheduler_factory is None else self.scheduler_factory(optimizer)
        return step_scheduled(optimizer, scheduler)


def save_dit(model: nn.Module, folder: str | Path) -> Path:
    """Write ``model`` in diffusers' format (config.json + diffusion_pytorch_model.safetensors)."""
    model.save_pretrained(str(folder), safe_serialization=True)
    return Path(folder)


def load_dit(folder: str | Path) -> nn.Module:
    """Load a DiT written by ``save_dit``, pruned or not: FFN widths and attention head counts are read
    from the stored tensors, so a model whose neurons or heads were physically removed loads back with its
    own shapes."""
    from safetensors.torch import load_file

    from litlab.methods.obsdiff.structured import head_dim, remove_ffn_neurons, remove_heads

    path = Path(folder) / "diffusion_pytorch_model.safetensors"
    if not path.exists():
        raise LitlabError(f"{folder} holds no diffusers DiT ({path.name} missing)")
    dit_class = _diffusers().DiTTransformer2DModel
    model = dit_class.from_config(dit_class.load_config(str(folder)))
    state = load_file(str(path))
    for name, module in model.named_modules():
        ffn, query = state.get(f"{name}.net.0.proj.weight"), state.get(f"{name}.to_q.weight")
        if name.endswith(".ff") and ffn is not None and len(ffn) != module.net[0].proj.out_features:
            remove_ffn_neurons(module, torch.arange(len(ffn)))
        if query is not None and hasattr(module, "heads") and len(query) != module.to_q.out_features:
            remove_heads(module, torch.arange(len(query) // head_dim(module)))
    model.load_state_dict(state)
    return model
