"""Physics-informed KAN training, the paper's forward-PDE study: RBA-weighted residual and condition losses.

The loss is the official one (``2. PDE Grid Search.ipynb`` of srigas/KAN_Initialization_Schemes):

    λ ← γ λ + η |r| / max|r|,   λ_B ← γ λ_B + η |r_B| / max|r_B|      (per point, λ = λ_B = 1 at start)
    L = mean((λ r)²) + mean((λ_B r_B)²)

with r the PDE residual at the collocation points and r_B = u(x_B) - u_B at the initial/boundary points.
The new weights enter the loss without detaching, as in the official code, and are stored for the next
step. Test metric: relative L2 against the reference solution over its whole grid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from torch import nn

from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.pde import PDEProblem, ReferenceSolution, ResidualAttention
from litlab.methods.kan.module import NetFactory, Regressor, relative_l2
from litlab.optim import OptimizerFactory, SchedulerFactory

PDEBatch = dict[str, torch.Tensor]


def pinn_loss(
    residual: torch.Tensor,
    boundary_residual: torch.Tensor,
    weights: torch.Tensor | None = None,
    boundary_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """mean((λ r)²) + mean((λ_B r_B)²); unit weights where ``None``. residual: (N, 1), boundary: (M, 1)."""
    if weights is not None:
        residual = weights * residual
    if boundary_weights is not None:
        boundary_residual = boundary_weights * boundary_residual
    return residual.square().mean() + boundary_residual.square().mean()


class PINNModule(Regressor):
    """Train ``net: (N, 2) -> (N, 1)`` to solve the datamodule's PDE; relative L2 on val/test.

    The problem (residual, reference solution) comes from the ``PDEDataModule``'s ``data_spec()`` through
    ``bind_data`` (which also builds a factory-given ``net``), or from ``bind`` for a hand-built module.
    With ``rba`` the per-point weights live in two ``ResidualAttention`` buffers (``collocation_attention``,
    ``boundary_attention``), saved in checkpoints; they are sized from the data spec or, when loading, from
    the checkpoint. Under DDP the residuals of all processes are
    gathered (with gradients) before the RBA update, so every process holds the whole, identical weight
    set and the run equals a single-process one. Logged: ``train/loss`` (the weighted objective),
    ``train/residual`` = mean(r²) and ``train/boundary`` = mean(r_B²) (unweighted), ``{val,test}/rel_l2``.

    Args:
        net: the network, e.g. ``build_kan(2, 1, ...)``, or a factory taking ``n_in``/``n_out``.
        optimizer, scheduler: factories taking ``params`` / ``optimizer`` (Hydra partials).
        rba: use residual-based attention weights (the paper: on); off gives the plain MSE sum.
        rba_gamma, rba_eta: the RBA decay γ and step η (paper: 0.999, 0.01).
        plot_resolution: at most this many grid points per axis in the test heatmaps.
    """

    def __init__(
        self,
        net: nn.Module | NetFactory,
        optimizer: OptimizerFactory,
        scheduler: SchedulerFactory | None = None,
        rba: bool = True,
        rba_gamma: float = 0.999,
        rba_eta: float = 0.01,
        plot_resolution: int = 256,
    ) -> None:
        super().__init__(net, optimizer, scheduler, plot_resolution)
        self.problem: PDEProblem | None = None
        self.reference: ReferenceSolution | None = None
        self.collocation_attention = ResidualAttention(0, rba_gamma, rba_eta) if rba else None
        self.boundary_attention = ResidualAttention(0, rba_gamma, rba_eta) if rba else None

    def bind(
        self,
        problem: PDEProblem,
        n_collocation_points: int,
        n_boundary_points: int,
        reference: ReferenceSolution | None = None,
    ) -> None:
        """Attach the PDE and size the RBA buffers (an error if loaded ones have another size)."""
        self.problem, self.reference = problem, reference
        self._size_attention("collocation_attention", n_collocation_points, "the data")
        self._size_attention("boundary_attention", n_boundary_points, "the data")

    def _size_attention(self, name: str, n_points: int, source: str) -> None:
        attention = getattr(self, name)
        if attention is None:
            return
        current = len(attention.weights)
        if current == 0:
            attention.weights = torch.ones(n_points, 1, device=attention.weights.device)
        elif current != n_points:
            raise LitlabError(
                f"{name} holds RBA weights for {current} points but {source} has {n_points}; resume or "
                "evaluate with the same data.n_collocation and data.n_boundary as the checkpoint's run."
            )

    def bind_data(self, spec: Mapping[str, Any]) -> None:
        """Build the network for the data's widths, then attach its PDE, point counts and reference."""
        if not isinstance(spec.get("problem"), PDEProblem):
            raise ConfigError(
                "PINNModule needs a PDE data module (data=pde/pinn): its data_spec() gives the PDE, the "
                "collocation and condition point counts and the reference solution"
            )
        super().bind_data(spec)
        self.bind(
            spec["problem"], spec["n_collocation_points"], spec["n_boundary_points"], spec.get("reference")
        )

    def logged_metrics(self) -> set[str]:
        """The Regressor's keys plus the unweighted residual and condition MSEs."""
        return super().logged_metrics() | {"train/residual", "train/boundary"}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Size the RBA buffers from the checkpoint before its state dict is loaded."""
        state = checkpoint.get("state_dict", {})
        for name in ("collocation_attention", "boundary_attention"):
            if f"{name}.weights" in state:
                self._size_attention(name, len(state[f"{name}.weights"]), "the checkpoint")

    def _gather(self, tensor: torch.Tensor, differentiable: bool = False) -> torch.Tensor:
        """All processes' shards concatenated along dim 0 (the tensor itself on one process)."""
        if self._trainer is None or self.trainer.world_size == 1:
            return tensor
        return self.all_gather(tensor, sync_grads=differentiable).flatten(0, 1)

    def loss_terms(self, batch: PDEBatch) -> dict[str, torch.Tensor]:
        """The weighted objective ``loss`` and the unweighted ``residual``/``boundary`` MSEs of a batch.

        Updates the RBA buffers in training mode (call once per step).
        """
        if self.problem is None:
            raise LitlabError(
                "PINNModule has no PDE yet: call bind_data(data.data_spec()) with a PDEDataModule, or bind()"
            )
        residual = self._gather(self.problem.residual(self.net, batch["collocation"]), differentiable=True)
        index = self._gather(batch["collocation_index"])
        boundary = self.net(batch["boundary_x"]) - batch["boundary_u"]
        weights = boundary_weights = None
        if self.collocation_attention is not None and self.boundary_attention is not None:
            weights = self.collocation_attention(residual, index)
            boundary_weights = self.boundary_attention(boundary, batch["boundary_index"])
        return {
            "loss": pinn_loss(residual, boundary, weights, boundary_weights),
            "residual": residual.detach().square().mean(),
            "boundary": boundary.detach().square().mean(),
        }

    def training_step(self, batch: PDEBatch, batch_idx: int) -> torch.Tensor:
        terms = self.loss_terms(batch)
        for name, value in terms.items():
            self.log(
                f"train/{name}", value, on_step=False, on_epoch=True, prog_bar=name == "loss", batch_size=1
            )
        return terms["loss"]

    @torch.no_grad()
    def predict_grid(self, reference: ReferenceSolution, max_points: int) -> tuple[torch.Tensor, ...]:
        """(axis0, axis1, u_ref, u_pred) on the reference grid strided to <= ``max_points`` per axis.

        Evaluated in one batch, so a batch-standardised (LeCun-normalized) KAN sees one set of statistics.
        """
        strides = [max(1, -(-len(axis) // max_points)) for axis in reference.axes]
        axes = [torch.from_numpy(axis[::s]) for axis, s in zip(reference.axes, strides)]
        first, second = torch.meshgrid(*axes, indexing="ij")
        points = torch.stack([first.reshape(-1), second.reshape(-1)], 1).float().to(self.device)
        u_ref = torch.from_numpy(reference.u[:: strides[0], :: strides[1]]).float()
        u_pred = self.net(points).reshape(u_ref.shape).cpu()
        return axes[0], axes[1], u_ref, u_pred

    def figures(self, stage: str) -> dict[str, Figure]:
        """Reference, prediction and |error| heatmaps over the (t, x) or (x, y) grid (not at fit end)."""
        if stage == "fit" or self.reference is None or self.problem is None:
            return {}
        axis0, axis1, u_ref, u_pred = self.predict_grid(self.reference, self.hparams.plot_resolution)
        extent = (float(axis0[0]), float(axis0[-1]), float(axis1[0]), float(axis1[-1]))
        low, high = float(u_ref.min()), float(u_ref.max())
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        panels = [("reference", u_ref, (low, high)), ("prediction", u_pred, (low, high))]
        panels.append(("|error|", (u_pred - u_ref).abs(), (None, None)))
        for ax, (title, values, (vmin, vmax)) in zip(axes, panels):
            image = ax.imshow(
                values.T, origin="lower", extent=extent, aspect="auto", vmin=vmin, vmax=vmax, cmap="viridis"
            )
            fig.colorbar(image, ax=ax)
            ax.set_title(title)
            ax.set_xlabel(self.problem.coordinates[0])
            ax.set_ylabel(self.problem.coordinates[1])
        fig.suptitle(f"{self.problem.name}: relative L2 = {relative_l2(u_pred, u_ref):.3e}")
        fig.tight_layout()
        return {"solution": fig}
