"""The paper's NTK analysis: how the empirical NTK's spectrum evolves while a KAN trains, per init scheme."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import torch
from rich.progress import Progress

from litlab.core.figures import save_figure
from litlab.core.results import TaskOutput
from litlab.datamodules.functions import evaluate, get_function, sample_uniform
from litlab.methods.kan.layers import build_kan
from litlab.methods.kan.ntk import empirical_ntk, spectrum_summary
from litlab.task import TaskContext

log = logging.getLogger(__name__)


def scheme_label(init: Mapping[str, Any]) -> str:
    """``glorot`` or ``power(0.25,1.75)``."""
    if init.get("name") == "power":
        return f"power({init['alpha']},{init['beta']})"
    return str(init["name"])


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
    """Train one KAN per scheme full-batch on ``function``; at ``eval_epochs`` record the NTK spectrum.

    The NTK is computed on the first ``n_ntk_points`` training points (the paper uses 256).
    Writes ``ntk.csv`` (one row per scheme and epoch), ``spectra.json`` and plots; returns the final
    effective rank and condition number per scheme.
    """
    output_dir = ctx.output_dir
    output_dir = Path(output_dir)
    if max(eval_epochs) > epochs:
        raise ValueError(f"eval_epochs {list(eval_epochs)} go past epochs={epochs}")
    target = get_function(function)
    x = sample_uniform(n_train, 2, seed)
    y = evaluate(target, x)
    x_ntk = x[:n_ntk_points]
    rows, spectra = [], {}
    with Progress(transient=True) as progress:
        bar = progress.add_task("NTK study", total=len(schemes) * epochs)
        for init in schemes:
            label = scheme_label(init)
            torch.manual_seed(seed)
            net = build_kan(2, 1, width, depth, grid_size, init=dict(init))
            optimizer = torch.optim.Adam(net.parameters(), lr=lr)
            for epoch in range(epochs + 1):
                if epoch in eval_epochs:
                    with torch.no_grad():
                        loss = torch.nn.functional.mse_loss(net(x), y).item()
                    summary = spectrum_summary(empirical_ntk(net, x_ntk))
                    rows.append(
                        {
                            "scheme": label,
                            "epoch": epoch,
                            "train_loss": loss,
                            "effective_rank": summary.effective_rank,
                            "condition_number": summary.condition_number,
                            "trace": summary.trace,
                            "lambda_max": float(summary.eigenvalues[0]),
                        }
                    )
                    spectra[f"{label}@{epoch}"] = summary.eigenvalues.tolist()
                if epoch == epochs:
                    break
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.mse_loss(net(x), y).backward()
                optimizer.step()
                progress.advance(bar)
    table = pd.DataFrame(rows)
    table.to_csv(output_dir / "ntk.csv", index=False)
    (output_dir / "spectra.json").write_text(json.dumps(spectra))
    _plot(table, spectra, output_dir)
    final = table[table.epoch == epochs].set_index("scheme")
    log.info("NTK at epoch %d:\n%s", epochs, final.to_string())
    results = {f"{s}/effective_rank": float(r.effective_rank) for s, r in final.iterrows()}
    results |= {f"{s}/condition_number": float(r.condition_number) for s, r in final.iterrows()}
    results |= {f"{s}/train_loss": float(r.train_loss) for s, r in final.iterrows()}
    return {"metrics": results}


def _plot(table: pd.DataFrame, spectra: dict[str, list[float]], output_dir: Path) -> None:
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
    save_figure(fig, output_dir, "ntk")
