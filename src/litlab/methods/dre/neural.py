"""A grid of neural ratio estimators (width × weight decay × epochs) fitted through the task's Fitter, and
the same ways of turning the grid into one estimate as for the kernel grids.

The candidates are fitted on half of P and Q; every method then uses the other half once: the paper's
aggregation (α̂ from its Hessian system there), validation selection (lowest held-out risk, the deep-learning
habit in place of K-fold CV), pseudo-BMA, the uniform mean. One fit per (width, weight decay) serves
all its epochs (snapshots), so every method costs the same fits.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from litlab.datamodules.base import batch_loader
from litlab.datamodules.density_ratio import labelled_set
from litlab.fitting import Fitter
from litlab.methods.dre.aggregation import aggregate, bma_weights, selection_weights, uniform_weights
from litlab.methods.dre.compare import RatioProblem
from litlab.methods.dre.losses import get_loss
from litlab.methods.dre.module import NeuralRatioEstimator

NEURAL_METHODS = ("aggregation", "validation", "bma", "uniform", "constant", "oracle")


def fit_neural_grid(
    fitter: Fitter,
    problem: RatioProblem,
    loss: str,
    widths: Sequence[int],
    weight_decays: Sequence[float],
    epochs: Sequence[int],
    batch_size: int,
    lr: float,
    seed: int,
) -> tuple[dict[str, torch.Tensor], list[dict[str, float]]]:
    """Fit one MLP per (width, weight decay) on the first halves of P and Q; return f of every (…, epoch)
    candidate on the second halves and the evaluation rows (``{"p_b", "q_b", "eval_p", "eval_q"}``, each
    ``(K, n)``) and the candidates' hyperparameters."""
    half_p, half_q = len(problem.x_p) // 2, len(problem.x_q) // 2
    train = labelled_set(
        problem.x_p[:half_p],
        problem.x_q[:half_q],
        problem.x_p.new_zeros(half_p),
        problem.x_q.new_zeros(half_q),
    )
    inputs = {
        "p_b": problem.x_p[half_p:].float(),
        "q_b": problem.x_q[half_q:].float(),
        "eval_p": problem.eval_p.float(),
        "eval_q": problem.eval_q.float(),
    }
    values: dict[str, list[torch.Tensor]] = {name: [] for name in inputs}
    labels = []
    for width in widths:
        for decay in weight_decays:
            torch.manual_seed(seed)
            module = NeuralRatioEstimator(loss=loss, hidden=(width, width), lr=lr, weight_decay=decay)
            module.bind_data({"dim": problem.x_p.shape[1]})
            module.snapshot(inputs, epochs)
            loader = batch_loader(train, batch_size, shuffle=True, seed=seed, num_workers=0)
            fitter.fit(module, loader, max_epochs=max(epochs), seed=seed)
            for epoch in sorted(epochs):
                for name in inputs:
                    values[name].append(module.snapshots[epoch][name])
                labels.append({"width": width, "weight_decay": decay, "epochs": epoch})
    return {name: torch.stack(rows) for name, rows in values.items()}, labels


def compare_neural(
    fitter: Fitter,
    problem: RatioProblem,
    loss: str = "lr",
    widths: Sequence[int] = (32, 128),
    weight_decays: Sequence[float] = (0.0, 1e-2),
    epochs: Sequence[int] = (5, 10, 20, 40),
    batch_size: int = 128,
    lr: float = 1e-3,
    jitter: float = 1e-3,
    seed: int = 0,
) -> dict[str, float]:
    """Errors 2(R(f̂) − R(f*)) of each method of :data:`NEURAL_METHODS` on one problem."""
    bregman = get_loss(loss)
    f, _ = fit_neural_grid(fitter, problem, loss, widths, weight_decays, epochs, batch_size, lr, seed)
    held_risk = bregman.risk(bregman.clip(f["p_b"]), bregman.clip(f["q_b"]))
    weights = {
        "aggregation": aggregate(bregman, f["p_b"], f["q_b"], jitter),
        "validation": selection_weights(held_risk),
        "bma": bma_weights(held_risk, (f["p_b"].shape[1] + f["q_b"].shape[1]) / 2),
        "uniform": uniform_weights(len(held_risk)),
    }
    bayes = problem.bayes_risk[loss]
    errors = {
        name: float(bregman.risk_error(w @ f["eval_p"], w @ f["eval_q"], bayes))
        for name, w in weights.items()
    }
    constant = bregman.inverse_link(torch.ones(1, dtype=torch.float64))
    errors["constant"] = float(bregman.risk_error(constant, constant, bayes))
    errors["oracle"] = float(bregman.risk_error(f["eval_p"], f["eval_q"], bayes).min())
    return {name: errors[name] for name in NEURAL_METHODS}
