"""The paper's NTK analysis: how the empirical NTK's spectrum evolves while a KAN trains, per init scheme."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from litlab.core.errors import ConfigError
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.datamodules.functions import evaluate, get_function, sample_uniform
from litlab.methods.kan.fitting import fit_full_batch
from litlab.methods.kan.init import InitScheme
from litlab.methods.kan.layers import build_kan
from litlab.methods.kan.module import Regressor
from litlab.methods.kan.ntk import empirical_ntk, spectrum_summary
from litlab.task import TaskContext

log = logging.getLogger(__name__)


class NTKProbe(Regressor):
    """A Regressor that records its NTK spectrum on ``x_ntk`` and its train loss at ``eval_epochs``.

    Full batch, so epoch e starts after e optimizer steps; the Fitter's epoch hooks take the records
    (epoch ``epochs`` is recorded when training ends). Rows go to ``records``, eigenvalues to ``spectra``.
    """

    def __init__(
        self, net: nn.Module, lr: float, x: Tensor, y: Tensor, x_ntk: Tensor, eval_epochs: Sequence[int]
    ):
        super().__init__(net, functools.partial(torch.optim.Adam, lr=lr))
        self.x, self.y, self.x_ntk = x, y, x_ntk
        self.eval_epochs = set(eval_epochs)
        self.epoch = 0
        self.records: list[dict[str, float]] = []
        self.spectra: dict[int, list[float]] = {}

    def _record(self) -> None:
        if self.epoch not in self.eval_epochs:
            return
        device = next(self.net.parameters()).device
        with torch.no_grad():
            loss = nn.functional.mse_loss(self.net(self.x.to(device)), self.y.to(device)).item()
        summary = spectrum_summary(empirical_ntk(self.net, self.x_ntk.to(device)))
        self.records.append(
            {
                "epoch": self.epoch,
                "train_loss": loss,
                "effective_rank": summary.effective_rank,
                "condition_number": summary.condition_number,
                "trace": summary.trace,
                "lambda_max": float(summary.eigenvalues[0]),
            }
        )
        self.spectra[self.epoch] = summary.eigenvalues.tolist()

    def on_train_epoch_start(self) -> None:
        self._record()

    def on_train_epoch_end(self) -> None:
        self.epoch += 1

    def on_train_end(self) -> None:
        self._record()


def ntk_study(
    ctx: TaskContext,
    schemes: Sequence[Mapping[str, Any]],
    function: str = "f2",
    width: int = 16,
    depth: int = 2,
    grid_size: int = 5,
    n_train: int = 4000,
    n_ntk_points: int = 256,
    epochs: int = 500,
    eval_epochs: Sequence[int] = (0, 50, 100, 250, 500),
    lr: float = 1e-3,
    seed: int = 0,
) -> TaskOutput:
    """Train one KAN per scheme full-batch on ``function`` (through ``ctx.fitter``); at ``eval_epochs``
    record the NTK spectrum on the first ``n_ntk_points`` training points (the paper uses 256).

    Returns the ``ntk`` table (one row per scheme and epoch), its plot, and the final effective rank,
    condition number and train loss per scheme; the eigenvalues go to ``spectra.json`` in the run folder.
    """
    if max(eval_epochs) > epochs:
        raise ConfigError(f"task.eval_epochs {list(eval_epochs)} go past task.epochs={epochs}")
    target = get_function(function)
    x = sample_uniform(n_train, 2, seed)
    y = evaluate(target, x)
    rows, spectra = [], {}
    for init in track(schemes, "NTK study"):
        label = InitScheme.from_config(init).label
        torch.manual_seed(seed)
        probe = NTKProbe(
            build_kan(2, 1, width, depth, grid_size, init=dict(init)), lr, x, y, x[:n_ntk_points], eval_epochs
        )
        fit_full_batch(ctx.fitter, probe, x, y, epochs)
        rows += [{"scheme": label, **record} for record in probe.records]
        spectra |= {f"{label}@{epoch}": values for epoch, values in probe.spectra.items()}
    table = pd.DataFrame(rows)
    (ctx.output_dir / "spectra.json").write_text(json.dumps(spectra))
    final = table[table.epoch == epochs].set_index("scheme")
    log.info("NTK at epoch %d:\n%s", epochs, final.to_string())
    metrics = {}
    for scheme, row in final.iterrows():
        for key in ("effective_rank", "condition_number", "train_loss"):
            metrics[f"{scheme}/{key}"] = float(row[key])
    return {"metrics": metrics, "tables": {"ntk": table}, "figures": {"ntk": _plot(table, spectra)}}


def _plot(table: pd.DataFrame, spectra: dict[str, list[float]]) -> Figure:
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    for label, group in table.groupby("scheme", sort=False):
        axes[0].plot(group.epoch, group.effective_rank, marker="o", label=label)
        axes[1].semilogy(group.epoch, group.condition_number, marker="o", label=label)
        first = spectra[f"{label}@{group.epoch.min()}"]
        axes[2].loglog(range(1, len(first) + 1), [max(v, 1e-16) for v in first], label=label)
    axes[0].set(xlabel="epoch", ylabel="effective rank (Σλ)²/Σλ²")
    axes[1].set(xlabel="epoch", ylabel="condition number")
    axes[2].set(xlabel="index", ylabel="eigenvalue", title="NTK spectrum at init")
    axes[0].legend()
    fig.tight_layout()
    return fig
