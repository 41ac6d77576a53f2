"""Speed of the paper's aggregation against K-fold CV selection, and of our uLSIF/KLIEP against ``densratio``.

1. Aggregation vs CV on a KuLSIF grid (5 bandwidths × 11 λ, 200 centres) over a 20-D mixture pair:
   the aggregation step alone (Ĝ, r̂ and the K×K solve from the candidates' values), the whole cross-fitted
   aggregation (two half-sample grid fits + their aggregation) and 5-fold CV selection (five fold fits,
   scoring, plus the full-data refit it selects from).
2. uLSIF and KLIEP against densratio 0.4.0 (optional: skipped when absent) on a 5-D pair, 100 centres:
   fitting every point of the same grid (ours batched; densratio one call per point), and selection
   as each package does it (densratio: uLSIF's closed-form leave-one-out CV, KLIEP's 5-fold CV;
   ours: 5-fold CV over the grid plus the full fit).

Times are medians over ``--repeats`` runs on one thread. Run:
    python benchmarks/dre_aggregation_speed.py [--quick | --smoke]
Writes benchmarks/results/dre_aggregation_speed.json (``--quick``: dre_aggregation_speed_quick.json;
``--smoke``: n = 200, dre_aggregation_speed_smoke.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from _smoke import SMOKE_HELP, suffix

from litlab.core.machine import machine_info
from litlab.datamodules.density_ratio import GaussianMixturePair
from litlab.methods.dre.aggregation import aggregate, selection_weights
from litlab.methods.dre.compare import BANDWIDTH_FACTORS, LAMBDAS
from litlab.methods.dre.estimators import fit_grid
from litlab.methods.dre.kernels import bandwidth_grid
from litlab.methods.dre.selection import cross_validate

RESULTS = Path(__file__).resolve().parent / "results"


def timed(work: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``work()`` over ``repeats`` runs."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def draw(dim: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    pair = GaussianMixturePair(dim, 3, 1.5)
    generator = torch.Generator().manual_seed(seed)
    return pair.sample_p(n, generator), pair.sample_q(n, generator)


def aggregation_vs_cv(n: int, repeats: int, dim: int = 20, n_centres: int = 200) -> dict[str, float]:
    """Seconds of the aggregation step, the cross-fitted aggregation and 5-fold CV selection on one grid."""
    x_p, x_q = draw(dim, n)
    sigmas = bandwidth_grid(torch.cat([x_p[:500], x_q[:500]]), list(BANDWIDTH_FACTORS))
    lams = torch.tensor(LAMBDAS, dtype=torch.float64)
    half = n // 2

    def fit(rows_p: torch.Tensor, rows_q: torch.Tensor):
        return fit_grid("kulsif", rows_p, rows_q, rows_p[:n_centres], sigmas, lams)

    grid = fit(x_p, x_q)
    f_p, f_q = grid.predict(x_p), grid.predict(x_q)

    halves = [(x_p[:half], x_q[:half]), (x_p[half:], x_q[half:])]

    def cross_fitted() -> None:
        for (a_p, a_q), (b_p, b_q) in (halves, halves[::-1]):
            fitted = fit(a_p, a_q)
            aggregate(fitted.loss, fitted.predict(b_p), fitted.predict(b_q))

    def cv_select() -> None:
        cv = cross_validate(
            "kulsif", x_p, x_q, x_p[:n_centres], sigmas, lams, 5, torch.Generator().manual_seed(0)
        )
        selection_weights(cv.risk)
        fit(x_p, x_q)

    return {
        "n_per_distribution": n,
        "candidates": grid.size,
        "aggregation_step_s": timed(lambda: aggregate(grid.loss, f_p, f_q), repeats),
        "grid_fit_s": timed(lambda: fit(x_p, x_q), repeats),
        "cross_fitted_aggregation_s": timed(cross_fitted, repeats),
        "cv5_selection_s": timed(cv_select, repeats),
    }


def against_densratio(n: int, repeats: int, dim: int = 5, n_centres: int = 100) -> dict[str, float]:
    """Our uLSIF/KLIEP against densratio's on the same grid: fit every point, and select as each does."""
    from densratio import densratio

    x_p, x_q = draw(dim, n, seed=1)
    sigmas = bandwidth_grid(torch.cat([x_p[:500], x_q[:500]]), list(BANDWIDTH_FACTORS))
    lams = torch.tensor(LAMBDAS, dtype=torch.float64)
    centres = x_p[:n_centres]
    p, q = x_p.numpy(), x_q.numpy()
    quiet = {"kernel_num": n_centres, "verbose": False}

    def theirs_every_point(method: str) -> None:
        for sigma in sigmas.tolist():
            for lam in lams.tolist() if method == "uLSIF" else [None]:
                extra = {"lambda_": lam} if lam is not None else {}
                densratio(p, q, method=method, sigma=sigma, **extra, **quiet)

    def ours_selected(method: str) -> None:
        cv = cross_validate(method, x_p, x_q, centres, sigmas, lams, 5, torch.Generator().manual_seed(0))
        selection_weights(cv.risk)
        fit_grid(method, x_p, x_q, centres, sigmas, lams)

    np.random.seed(0)  # noqa: NPY002 - densratio draws centres from the legacy global generator
    return {
        "n_per_distribution": n,
        "ulsif_every_point_ours_s": timed(
            lambda: fit_grid("ulsif", x_p, x_q, centres, sigmas, lams), repeats
        ),
        "ulsif_every_point_densratio_s": timed(lambda: theirs_every_point("uLSIF"), repeats),
        "ulsif_selected_ours_cv5_s": timed(lambda: ours_selected("ulsif"), repeats),
        "ulsif_selected_densratio_loocv_s": timed(
            lambda: densratio(
                p, q, method="uLSIF", sigma_range=sigmas.numpy(), lambda_range=lams.numpy(), **quiet
            ),
            repeats,
        ),
        "kliep_every_point_ours_s": timed(
            lambda: fit_grid("kliep", x_p, x_q, centres, sigmas, lams), repeats
        ),
        "kliep_every_point_densratio_s": timed(lambda: theirs_every_point("KLIEP"), repeats),
        "kliep_selected_ours_cv5_s": timed(lambda: ours_selected("kliep"), repeats),
        "kliep_selected_densratio_cv5_s": timed(
            lambda: densratio(p, q, method="KLIEP", sigma=sigmas.numpy(), fold=5, **quiet), repeats
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 1000 only, one repeat")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 1 if args.quick or args.smoke else args.repeats
    sizes = [200] if args.smoke else [1000] if args.quick else [1000, 4000]
    load_before = os.getloadavg()[0]
    result = {
        "machine": machine_info(),
        "threads": 1,
        "repeats": repeats,
        "aggregation_vs_cv": [aggregation_vs_cv(n, repeats) for n in sizes],
    }
    try:
        import densratio

        result["densratio_version"] = getattr(densratio, "__version__", "0.4.0")
        result["against_densratio"] = [against_densratio(n, repeats) for n in sizes]
    except ModuleNotFoundError:
        result["against_densratio"] = "densratio is not installed (pip install 'litlab[dre]')"
    result["load_average_1min"] = {"before": load_before, "after": os.getloadavg()[0]}
    name = f"dre_aggregation_speed{suffix(args)}.json"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
