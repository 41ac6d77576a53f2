"""Train CartanFM, its ablations and the VAE baselines on recombination splits and score them.

``symspace_benchmark`` is the entry point of ``litlab-run task=symspace/benchmark`` and
``task=symspace/sprite_claim``: for every split, case and seed it trains each model for ``max_steps`` Adam
steps (or, with early stopping, until in-distribution validation stops improving), then reports held-out and
in-distribution reconstruction errors, factor-classifier accuracy on the held-out reconstructions, (for
CartanFM variants) the Cartan residuals of the learnt bases, and the paper's held-out error beside ours.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.figure import Figure

from litlab.core.cache import write_text_atomic
from litlab.core.errors import LitlabError
from litlab.core.figures import save_figure
from litlab.core.progress import track
from litlab.core.results import TaskOutput
from litlab.core.stats import format_mean_sd
from litlab.datamodules.sprites import FACTORS, SpritesDataModule, recombination_mask
from litlab.fitting import FitResult, Fitter
from litlab.methods.symspace.claim_check import PAPER_HELDOUT_BCE, claim_check
from litlab.methods.symspace.classifier import FactorClassifier, factor_accuracy, train_factor_classifier
from litlab.methods.symspace.fit_protocol import check_protocol, fit_protocol
from litlab.methods.symspace.lie import cartan_orthogonality, cartan_residuals
from litlab.methods.symspace.module import CartanFM, ReconstructionModule, reconstruction_errors
from litlab.task import TaskContext

log = logging.getLogger("litlab")

# One scoring classifier per case, whichever seeds a run covers: fits of one case saved by runs over
# different seed lists (the 32x32 study's phases) are scored by the same classifier.
CLASSIFIER_SEED = 0

Curve = list[list[float]]  # [step, val/id_bce] at each validation of one fit
ModuleFactory = Callable[..., ReconstructionModule]


@dataclass(frozen=True)
class EarlyStopping:
    """Validate every ``every`` steps on the in-distribution validation split (never the held-out one), keep
    the weights of the lowest ``val/id_bce`` and stop after ``patience`` validations without a new best, but
    not before ``min_steps``: a flow-matching decoder's validation BCE first rises above the blank image's
    (sharp sprites in the wrong places) before it falls, which patience alone mistakes for a plateau."""

    every: int
    patience: int
    min_steps: int = 0


def fit(
    fitter: Fitter,
    module: ReconstructionModule,
    data: SpritesDataModule,
    max_steps: int,
    seed: int,
    stopping: EarlyStopping | None = None,
    checkpoint: Path | None = None,
    progress: str | None = None,
) -> tuple[ReconstructionModule, FitResult]:
    """Train ``module`` on the set-up ``data``'s training split for at most ``max_steps`` seeded steps
    (continuing the fit saved in ``checkpoint`` at its last validation, if that file exists), showing the
    steps done under the description ``progress``."""
    validation: dict = {}
    if stopping is not None:
        validation = {
            "val": data.val_dataloader(),
            "val_every_n_steps": stopping.every,
            "monitor": "val/id_bce",
            "patience": stopping.patience,
            "min_steps": stopping.min_steps,
            "restore_best": True,
        }
    result = fitter.fit(
        module,
        data.train_dataloader(),
        max_steps=max_steps,
        seed=seed,
        checkpoint=checkpoint,
        progress=progress,
        **validation,
    )
    return module.eval(), result


@torch.no_grad()
def reconstruct_all(
    module: ReconstructionModule, images: torch.Tensor, batch_size: int = 512
) -> torch.Tensor:
    """Reconstructions (n, C, H, W) of images (n, C, H, W), in batches."""
    device = next(module.parameters()).device
    return torch.cat([module.reconstruct(chunk.to(device)).cpu() for chunk in images.split(batch_size)])


def split_tensors(data: SpritesDataModule, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """All images (n, C, H, W) in [0, 1] and factors (n, 5) of one split ("train", "val", "test")."""
    images, factors = data.sets[name].tensors
    return images.float() / data.pixel_scale, factors


@torch.no_grad()
def score(
    module: ReconstructionModule, data: SpritesDataModule, classifier: FactorClassifier | None
) -> tuple[dict[str, float], torch.Tensor]:
    """Held-out and in-distribution errors, classifier accuracy and Cartan residuals; held-out recons."""
    results: dict[str, float] = {}
    heldout_recon = torch.empty(0)
    for name, split in (("heldout", "test"), ("id", "val")):
        images, factors = split_tensors(data, split)
        recon = reconstruct_all(module, images)
        for metric, values in reconstruction_errors(recon, images).items():
            results[f"{name}_{metric}"] = float(values.mean())
        if classifier is not None:
            for factor, acc in factor_accuracy(classifier, recon, factors, FACTORS).items():
                results[f"{name}_acc_{factor}"] = acc
        if name == "heldout":
            heldout_recon = recon
    if isinstance(module, CartanFM):
        for name, value in cartan_residuals(module.bases.k, module.bases.p).items():
            results[f"cartan_residual_{name}"] = float(value)
        penalties = cartan_orthogonality(module.bases.k, module.bases.p)
        results["cartan_orthogonality"] = float(sum(penalties.values()))
        results["heldout_k_share"] = k_share(module, split_tensors(data, "test")[0])
        if classifier is not None:
            results["mirror_in_heldout"] = mirror_in_heldout(module, data, classifier)
    return results, heldout_recon


@torch.no_grad()
def k_share(module: CartanFM, images: torch.Tensor) -> float:
    """Mean share ‖X_k‖² / ‖X‖² of images (n, C, H, W): how far the geodesic term has pushed X into p."""
    c_k, c_p, _, _ = module.encode(images.to(next(module.parameters()).device))
    x_k, x_p = module.bases.components(c_k, c_p)
    return float((x_k.square().sum((1, 2)) / (x_k + x_p).square().sum((1, 2))).mean())


@torch.no_grad()
def mirror_in_heldout(
    module: CartanFM, data: SpritesDataModule, classifier: FactorClassifier, n: int = 512
) -> float:
    """Share of geodesic mirror images (decoded from −X of training images) read as held-out combinations.

    A measure of whether the symmetry s_o sends observed latents towards the unobserved region; the share
    of the grid that is held out is the chance level.
    """
    images, _ = split_tensors(data, "train")
    images = images[torch.linspace(0, len(images) - 1, min(n, len(images))).long()]
    mirrors = module.decode(-module.lie_element(images), tuple(images.shape[1:]))
    predicted = torch.stack([lg.argmax(1) for lg in classifier(mirrors)], dim=1).numpy()
    return float(recombination_mask(predicted, data.sizes, data.split, data.case).mean())


@torch.no_grad()
def classifier_on_data(data: SpritesDataModule, classifier: FactorClassifier) -> dict[str, float]:
    """The classifier's accuracy on the true held-out and in-distribution images (the scores' ceiling)."""
    results = {}
    for name, split in (("heldout", "test"), ("id", "val")):
        images, factors = split_tensors(data, split)
        for factor, acc in factor_accuracy(classifier, images, factors, FACTORS).items():
            results[f"{name}_acc_{factor}"] = acc
    return results


def full_grid_classifier(fitter: Fitter, data: SpritesDataModule, epochs: int, seed: int) -> FactorClassifier:
    """A factor classifier on every image of ``data`` (train, val and held-out): for scoring only."""
    parts = [split_tensors(data, name) for name in ("train", "val", "test")]
    images, factors = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    return train_factor_classifier(fitter, images, factors, data.sizes, epochs=epochs, seed=seed)


def run_case(
    fitter: Fitter,
    models: dict[str, ModuleFactory],
    data_kwargs: dict,
    seeds: list[int],
    max_steps: int,
    classifier_epochs: int = 0,
    stopping: EarlyStopping | None = None,
    fits_dir: Path | None = None,
) -> tuple[pd.DataFrame, dict[str, torch.Tensor], dict[tuple[str, int], Curve], SpritesDataModule]:
    """Train and score every model × seed on one split; rows of scores (with the steps trained and, under
    early stopping, the step of the weights kept), seed 0's reconstructions of the held-out images
    picked by :func:`grid_pick`, and each fit's validation curve under early stopping. With ``fits_dir``,
    every finished fit is saved there and read back instead of trained again, and under early stopping the
    fit under way keeps its state there at each validation (``<model>_seed<s>.ckpt``): a killed study rerun
    with ``resume=auto`` loses at most the steps since the last validation. The state is deleted once a
    fit that stopped early is saved and kept for one that reached ``max_steps``, so a rerun with a larger
    ``max_steps`` continues exactly those fits. A run whose settings differ from those the saved fits were
    made with stops with an error (:func:`check_protocol`)."""
    data = SpritesDataModule(**data_kwargs)
    data.setup()
    if fits_dir is not None:
        fits_dir.mkdir(parents=True, exist_ok=True)
        check_protocol(fits_dir, fit_protocol(models, data_kwargs, stopping, classifier_epochs))
    jobs = [(name, seed) for seed in seeds for name in models]
    saved = {job: _saved_fit(fits_dir, *job, max_steps) for job in jobs}
    curves: dict[tuple[str, int], Curve] = {}
    classifier = None
    if classifier_epochs and not all(saved.values()):
        classifier = full_grid_classifier(fitter, data, classifier_epochs, CLASSIFIER_SEED)
    rows, examples = [], {}
    if classifier_epochs:
        data_file = fits_dir / "data.json" if fits_dir else None
        if data_file is not None and data_file.is_file():
            row = json.loads(data_file.read_text())
        else:
            row = {"split": data.split, "case": data.case, "model": "data"}
            row |= classifier_on_data(data, classifier)
            if data_file is not None:
                write_text_atomic(data_file, json.dumps(row))
        rows.append(row)
    pick = grid_pick(len(split_tensors(data, "test")[0]))
    for name, seed in track(jobs, description=f"{data.split} case {data.case}"):
        if saved[(name, seed)] is not None:
            row, recon, curve = saved[(name, seed)]
        else:
            torch.manual_seed(seed)
            checkpoint = fits_dir / f"{name}_seed{seed}.ckpt" if fits_dir and stopping else None
            module = models[name](image_shape=data.image_shape)
            progress = f"{data.split} case {data.case}: {name} seed {seed}"
            module, fitted = fit(fitter, module, data, max_steps, seed, stopping, checkpoint, progress)
            results, full_recon = score(module, data, classifier)
            kept = fitted.best_step if fitted.best_step is not None else fitted.steps
            row = {"split": data.split, "case": data.case, "model": name, "seed": seed}
            row |= {"steps": fitted.steps, "kept_step": kept, **results}
            recon = full_recon[pick]
            curve = validation_curve(fitted)
            if fits_dir is not None:
                torch.save(recon, fits_dir / f"{name}_seed{seed}.pt")
                write_text_atomic(fits_dir / f"{name}_seed{seed}.val.json", json.dumps(curve))
                write_text_atomic(fits_dir / f"{name}_seed{seed}.json", json.dumps(row))  # marks it done
                if checkpoint is not None and fitted.stopped_early:
                    checkpoint.unlink(missing_ok=True)
        rows.append(row)
        if curve:
            curves[(name, seed)] = curve
        if seed == seeds[0]:
            examples[name] = recon
    return pd.DataFrame(rows), examples, curves, data


def validation_curve(fitted: FitResult) -> Curve:
    """``[step, val/id_bce]`` at every validation of a fit (empty without early stopping)."""
    return [[row["step"], row["val/id_bce"]] for row in fitted.history if "val/id_bce" in row]


def _saved_fit(
    fits_dir: Path | None, name: str, seed: int, max_steps: int
) -> tuple[dict, torch.Tensor, Curve] | None:
    """A finished fit's row, picked reconstructions and validation curve from ``fits_dir`` (fits saved
    before curves were kept have none), or None: not saved, or it reached a ``max_steps`` smaller than this
    one and kept its state to continue."""
    if fits_dir is None or not (fits_dir / f"{name}_seed{seed}.json").is_file():
        return None
    row = json.loads((fits_dir / f"{name}_seed{seed}.json").read_text())
    if row["steps"] < max_steps and (fits_dir / f"{name}_seed{seed}.ckpt").is_file():
        return None
    curve_file = fits_dir / f"{name}_seed{seed}.val.json"
    curve = json.loads(curve_file.read_text()) if curve_file.is_file() else []
    return row, torch.load(fits_dir / f"{name}_seed{seed}.pt"), curve


def validation_figure(
    curves: dict[tuple[str, int], Curve], kept: dict[tuple[str, int], int], title: str = ""
) -> Figure:
    """In-distribution validation BCE against step, one line per model and seed, the kept step marked."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    colours: dict[str, str] = {}
    for (name, seed), curve in curves.items():
        steps, values = (list(column) for column in zip(*curve, strict=True))
        label = None if name in colours else name
        colour = colours.setdefault(name, f"C{len(colours)}")
        ax.plot(steps, values, color=colour, lw=1, label=label)
        if kept.get((name, seed)) in steps:
            ax.plot(kept[(name, seed)], values[steps.index(kept[(name, seed)])], "o", color=colour, ms=4)
    ax.set_xlabel("step")
    ax.set_ylabel("val/id_bce (dot: weights kept)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def grid_pick(n_images: int, n: int = 10) -> torch.Tensor:
    """Indices of the ``n`` evenly spaced held-out images the reconstruction grid shows."""
    return torch.linspace(0, n_images - 1, min(n, n_images)).long()


def reconstruction_grid(originals: torch.Tensor, examples: dict[str, torch.Tensor]) -> plt.Figure:
    """One row of held-out originals, then one row per model of its reconstructions (same images)."""
    rows = {"held-out": originals, **examples}
    fig, axes = plt.subplots(
        len(rows), len(originals), figsize=(1.1 * len(originals), 1.15 * len(rows)), squeeze=False
    )
    for r, (name, images) in enumerate(rows.items()):
        for c in range(len(originals)):
            axes[r, c].imshow(images[c].permute(1, 2, 0).squeeze(-1), cmap="gray", vmin=0, vmax=1)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=7, rotation=0, ha="right", va="center")
    return fig


def paper_vs_ours(runs: pd.DataFrame) -> pd.DataFrame:
    """Held-out BCE per (split, case, model): the paper's beside ours (mean ± sd over seeds, and n), ours also
    with the official evaluation's clamp (``bce_code``) where the fits recorded it."""
    rows = []
    trained = runs[runs["model"] != "data"]
    for (split, case, model), group in trained.groupby(["split", "case", "model"], sort=False):
        paper = PAPER_HELDOUT_BCE.get((split, model))
        row = {
            "split": split,
            "case": case,
            "model": model,
            "paper_heldout_bce": paper[int(case)] if paper else "–",  # not in the poster
            "ours_heldout_bce": format_mean_sd(group["heldout_bce"]),
        }
        if "heldout_bce_code" in group:
            row["ours_heldout_bce_code"] = format_mean_sd(group["heldout_bce_code"])
        rows.append(row | {"seeds": len(group)})
    return pd.DataFrame(rows)


def symspace_benchmark(
    ctx: TaskContext,
    models: dict[str, ModuleFactory],
    splits: Sequence[str] = ("r2r",),
    cases: tuple[int, ...] = (0, 1, 2),
    seeds: tuple[int, ...] = (0,),
    max_steps: int = 2000,
    classifier_epochs: int = 10,
    data: dict | None = None,
    early_stopping: Mapping[str, int] | None = None,
    fits_dir: str | None = None,
    fit_only: Sequence[str] | None = None,
) -> TaskOutput:
    """Tables ``runs`` (every fit), ``table`` (mean over seeds) and ``paper_vs_ours``, and held-out
    reconstruction grids, for every split × case. ``early_stopping`` ({every, patience, min_steps}): see
    :class:`EarlyStopping`; without it every model trains ``max_steps`` steps. ``fits_dir``: where each
    case's finished fits are kept and read back (``<split>_case<n>/`` in it; default the run's ``fits/``);
    the 32×32 CPU study keeps them under ``results/`` so that a fresh clone continues it. ``fit_only``: the
    names of the models to fit (default all), e.g. the cheap ones while too little time is left for CartanFM.

    Returns ``<model>/heldout_bce`` averaged over splits, cases and seeds.
    """
    if fit_only is not None:
        unknown = sorted(set(fit_only) - set(models))
        if unknown or not fit_only:
            raise LitlabError(f"task.fit_only={list(fit_only)}: name some of {', '.join(models)}")
        models = {name: factory for name, factory in models.items() if name in fit_only}
    output_dir = Path(ctx.output_dir)
    fits_root = Path(fits_dir).expanduser() if fits_dir else output_dir / "fits"
    stopping = EarlyStopping(**early_stopping) if early_stopping else None
    frames = []
    for split in splits:
        for case in cases:
            frame, examples, curves, datamodule = run_case(
                ctx.fitter,
                models,
                {**(data or {}), "split": split, "case": case},
                list(seeds),
                max_steps,
                classifier_epochs,
                stopping,
                fits_dir=fits_root / f"{split}_case{case}",
            )
            frames.append(frame)
            originals, _ = split_tensors(datamodule, "test")
            grid = reconstruction_grid(originals[grid_pick(len(originals))], examples)
            save_figure(grid, output_dir, f"{split}_case{case}_heldout")
            if curves:
                trained = frame[frame["model"] != "data"]
                kept = {
                    (row.model, int(row.seed)): int(row.kept_step) for row in trained.itertuples(index=False)
                }
                figure = validation_figure(curves, kept, f"{split} case {case}: in-distribution validation")
                save_figure(figure, output_dir, f"{split}_case{case}_validation")
    return claim_output(pd.concat(frames, ignore_index=True))


def claim_output(runs: pd.DataFrame) -> TaskOutput:
    """From the rows of every fit: ``<model>/heldout_bce`` averaged over splits, cases and seeds, and the
    tables ``runs``, ``table`` (mean over seeds), ``paper_vs_ours`` and, where CartanFM ran beside
    them, ``claim_check`` (CartanFM against the VAE and FM-only, paired over seeds)."""
    table = runs.drop(columns="seed").groupby(["split", "case", "model"], sort=False).mean().reset_index()
    log.info("\n%s", table.round(3).to_string(index=False))
    trained = runs[runs["model"] != "data"]
    results = {
        f"{m}/heldout_bce": float(v) for m, v in trained.groupby("model")["heldout_bce"].mean().items()
    }
    tables = {"runs": runs, "table": table.round(3), "paper_vs_ours": paper_vs_ours(runs)}
    check = claim_check(trained)
    if not check.empty:  # a run without CartanFM and the VAE or FM-only has nothing to compare
        tables["claim_check"] = check
    return {"metrics": results, "tables": tables}


def collect_claim_runs(ctx: TaskContext, runs: Sequence[str] = ()) -> TaskOutput:
    """One set of tables and plots from finished sprite-claim runs that each covered some cases (the
    32×32 CPU study and ``scripts/gpu_symspace.sh`` run one case per run folder): their ``runs`` rows
    concatenated, the tables recomputed, their plots copied."""
    frames = []
    plots = Path(ctx.output_dir) / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    for run in runs:
        folder = Path(run).expanduser()
        rows = folder / "tables" / "runs.csv"
        if not rows.is_file():
            raise LitlabError(f"{folder} has no tables/runs.csv: not a finished sprite-claim run")
        frames.append(pd.read_csv(rows))
        for plot in sorted((folder / "plots").glob("*.png")):
            shutil.copy2(plot, plots / plot.name)
    if not frames:
        raise LitlabError("task.runs is empty: name the run folders to collect")
    runs_table = pd.concat(frames, ignore_index=True)
    repeated = runs_table.duplicated(["split", "case", "model", "seed"], keep=False)
    if repeated.any():
        first = runs_table[repeated].iloc[0]
        fit = f"{first['split']} case {first['case']} {first['model']} seed {first['seed']}"
        raise LitlabError(f"{fit} is in more than one of the runs collected; collect each case once")
    return claim_output(runs_table)
