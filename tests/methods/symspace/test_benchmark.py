"""The benchmark and sprite-claim tasks run end to end at a tiny size and write their tables, results and
plots; early stopping keeps the best in-distribution weights."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import open_dict

from litlab.core.errors import LitlabError
from litlab.core.results import write_results
from litlab.datamodules.sprites import SpritesDataModule
from litlab.fitting import Fitter
from litlab.methods.symspace import benchmark, claim_status
from litlab.methods.symspace.benchmark import EarlyStopping, fit, score
from litlab.methods.symspace.claim_status import heldout_summary, study_status
from litlab.methods.symspace.module import VAE, CartanFM
from litlab.task import TaskContext


def _tiny_benchmark(compose_config):
    """The benchmark task at a tiny size, with VAE and two CartanFM variants on R2R case 0."""
    cfg = compose_config(
        "run",
        [
            "task=symspace/benchmark",
            "task.cases=[0]",
            "task.max_steps=2",
            "task.classifier_epochs=1",
            "+task.data.grid.n_scales=2",
            "+task.data.grid.n_orientations=2",
            "+task.data.grid.n_positions=4",
            "task.data.batch_size=16",
            "task.models.cartanfm.unet_width=8",
            "task.models.cartanfm.sample_steps=2",
            "task.models.cartanfm_paper_decoder.unet_width=8",
            "task.models.cartanfm_paper_decoder.sample_steps=2",
        ],
    )
    with open_dict(cfg):
        kept = ("vae", "cartanfm", "cartanfm_paper_decoder")
        cfg.task.models = {name: cfg.task.models[name] for name in kept}
    return instantiate(cfg.task)


def test_benchmark_task_writes_table_results_and_grids(compose_config, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    out = _tiny_benchmark(compose_config)(TaskContext.local(tmp_path))
    results = out["metrics"]
    assert set(results) == {"vae/heldout_bce", "cartanfm/heldout_bce", "cartanfm_paper_decoder/heldout_bce"}
    runs = out["tables"]["runs"]
    assert list(runs["model"]) == ["data", "vae", "cartanfm", "cartanfm_paper_decoder"]
    data_row = runs.set_index("model").loc["data"]
    assert 0.0 <= data_row["heldout_acc_all"] <= 1.0
    cartan = runs.set_index("model").loc["cartanfm"]
    assert 0.0 <= cartan["mirror_in_heldout"] <= 1.0 and cartan["cartan_residual_pp"] > 0
    assert 0.0 <= cartan["heldout_k_share"] <= 1.0 and cartan["cartan_orthogonality"] > 0
    assert "heldout_bce" in out["tables"]["table"].columns
    assert (tmp_path / "plots" / "r2r_case0_heldout.png").exists()


def test_a_rerun_in_the_same_folder_trains_only_the_fits_not_yet_saved(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    """A killed study resumed with ``resume=auto`` keeps its finished fits and gives the same tables."""
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    task = _tiny_benchmark(compose_config)
    first = task(TaskContext.local(tmp_path))["tables"]["runs"]
    fits = tmp_path / "fits" / "r2r_case0"
    (fits / "cartanfm_seed0.json").unlink()  # killed while this fit was training
    trained = []
    real_fit = benchmark.fit
    monkeypatch.setattr(
        benchmark, "fit", lambda fitter, module, *a: trained.append(module) or real_fit(fitter, module, *a)
    )
    again = task(TaskContext.local(tmp_path))["tables"]["runs"]
    assert [type(m).__name__ for m in trained] == ["CartanFM"]
    pd.testing.assert_frame_equal(first, again)


def _tiny_sprite_claim(compose_config, *overrides: str):
    """The sprite-claim task at a tiny size (R2E and R2R case 0, seed 0), with the VAE and CartanFM."""
    cfg = compose_config(
        "run",
        [
            "task=symspace/sprite_claim",
            "task.cases=[0]",
            "task.seeds=[0]",
            "task.max_steps=6",
            "task.early_stopping.every=2",
            "task.early_stopping.patience=1",
            "task.classifier_epochs=1",
            "task.data.grid.n_positions=4",
            "task.data.batch_size=16",
            "task.models.cartanfm.unet_width=8",
            "task.models.cartanfm.sample_steps=2",
            *overrides,
        ],
    )
    with open_dict(cfg):
        cfg.task.models = {name: cfg.task.models[name] for name in ("vae", "cartanfm")}
    return instantiate(cfg.task)


def test_the_sprite_claim_stops_early_on_in_distribution_images_and_sets_the_paper_beside_ours(
    compose_config, tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    with caplog.at_level("INFO", logger="litlab"):
        tables = _tiny_sprite_claim(compose_config)(TaskContext.local(tmp_path))["tables"]
    assert "r2r case 0: cartanfm seed 0: 0/6" in caplog.messages  # each fit reports its steps
    runs = tables["runs"]
    trained = runs[runs["model"] != "data"]
    assert sorted(set(zip(trained["split"], trained["model"], strict=True))) == [
        ("r2e", "cartanfm"),
        ("r2e", "vae"),
        ("r2r", "cartanfm"),
        ("r2r", "vae"),
    ]
    assert ((trained["kept_step"] % 2 == 0) & (trained["kept_step"] <= trained["steps"])).all()
    for fit_row in trained.itertuples(index=False):  # each fit's validation curve is kept and plotted
        curve = json.loads(
            (tmp_path / "fits" / f"{fit_row.split}_case0" / f"{fit_row.model}_seed0.val.json").read_text()
        )
        assert [step for step, _ in curve] == list(range(2, int(fit_row.steps) + 1, 2))
        assert fit_row.kept_step in [step for step, _ in curve]
    assert (tmp_path / "plots" / "r2r_case0_validation.png").exists()
    capped = {f"{row.split}_case0/{row.model}_seed0" for row in trained.itertuples() if row.steps == 6}
    kept = {f"{path.parent.name}/{path.stem}" for path in (tmp_path / "fits").rglob("*.ckpt")}
    assert kept == capped  # deleted once saved, unless the fit reached max_steps (a larger one continues it)
    floor = 256 * -math.log1p(-1e-3)  # 16x16 pixels at the official evaluation's clamp
    assert (trained["heldout_bce_code"] >= floor - 1e-4).all()
    assert "ours_heldout_bce_code" in tables["paper_vs_ours"]
    paper = tables["paper_vs_ours"].set_index(["split", "model"])["paper_heldout_bce"]
    assert (paper[("r2r", "cartanfm")], paper[("r2e", "cartanfm")], paper[("r2r", "vae")]) == (
        7.02,
        2.21,
        28.81,
    )
    check = tables["claim_check"].set_index("split")  # one seed, one comparison per case: no interval yet
    assert list(check["versus"]) == ["vae", "vae"] and set(check["verdict"]) == {"one seed: no interval"}
    assert (check.loc["r2r", "paper (versus − cartanfm)"], check.loc["r2e", "paper (versus − cartanfm)"]) == (
        "+21.79",
        "+5.04",
    )


def test_collecting_runs_that_each_covered_some_cases_gives_the_tables_of_one_run(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    whole = _tiny_sprite_claim(compose_config)(TaskContext.local(tmp_path / "whole"))["tables"]
    folders = []
    for split in ("r2r", "r2e"):  # as if each split had run in its own folder
        folder = tmp_path / split
        part = whole["runs"][whole["runs"]["split"] == split]
        write_results(folder, kind="task", name="part", tables={"runs": part})
        (folder / "plots").mkdir()
        (folder / "plots" / f"{split}_case0_validation.png").write_bytes(b"png")
        folders.append(str(folder))
    collected = benchmark.collect_claim_runs(TaskContext.local(tmp_path / "collected"), folders)["tables"]
    for name, order in (("table", "model"), ("paper_vs_ours", "model"), ("claim_check", "versus")):
        pd.testing.assert_frame_equal(
            collected[name].sort_values(["split", "case", order]).reset_index(drop=True),
            whole[name].sort_values(["split", "case", order]).reset_index(drop=True),
        )
    plots = sorted(p.name for p in (tmp_path / "collected" / "plots").glob("*.png"))
    assert plots == ["r2e_case0_validation.png", "r2r_case0_validation.png"]
    ctx = TaskContext.local(tmp_path / "again")
    with pytest.raises(LitlabError, match="r2r case 0 .* is in more than one of the runs collected"):
        benchmark.collect_claim_runs(ctx, [folders[0], folders[0]])
    with pytest.raises(LitlabError, match="has no tables/runs.csv"):
        benchmark.collect_claim_runs(ctx, [str(tmp_path / "whole")])
    with pytest.raises(LitlabError, match="task.runs is empty"):
        benchmark.collect_claim_runs(ctx)


def test_fits_kept_in_a_fits_dir_go_on_across_runs_over_different_seeds_and_are_scored_alike(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    """The 32x32 study keeps its fits outside the run folder and runs seed 1 before seed 0: its rows must
    equal one run's over both seeds, the scoring classifier included."""
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    kept = tmp_path / "kept"
    task = _tiny_sprite_claim(compose_config, "task.splits=[r2r]", f"task.fits_dir={kept}")
    task(TaskContext.local(tmp_path / "first"), seeds=[1])
    trained = []
    real_fit = benchmark.fit
    monkeypatch.setattr(benchmark, "fit", lambda *a: trained.append(a[1]) or real_fit(*a))
    resumed = task(TaskContext.local(tmp_path / "fresh clone"), seeds=[0, 1])["tables"]["runs"]
    assert len(trained) == 2 and not (tmp_path / "fresh clone" / "fits").exists()  # seed 0's two fits
    monkeypatch.setattr(benchmark, "fit", real_fit)
    whole = _tiny_sprite_claim(compose_config, "task.splits=[r2r]")
    at_once = whole(TaskContext.local(tmp_path / "at once"), seeds=[0, 1])["tables"]["runs"]
    pd.testing.assert_frame_equal(resumed, at_once)


def test_fit_only_fits_the_models_named_and_names_the_choices_when_one_is_unknown(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    task = _tiny_sprite_claim(compose_config, "task.splits=[r2r]")
    runs = task(TaskContext.local(tmp_path), fit_only=["vae"])["tables"]["runs"]
    assert list(runs["model"]) == ["data", "vae"]
    for wrong in (["vea"], []):
        with pytest.raises(LitlabError, match=r"task.fit_only=.*: name some of vae, cartanfm"):
            task(TaskContext.local(tmp_path), fit_only=wrong)


def test_the_sprite_claim_refuses_a_fits_dir_of_another_grid_and_keeps_its_fits(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    kept = tmp_path / "kept"
    _tiny_sprite_claim(compose_config, "task.splits=[r2r]", f"task.fits_dir={kept}", "task.fit_only=[vae]")(
        TaskContext.local(tmp_path / "first")
    )
    saved = {path: path.read_bytes() for path in sorted(kept.rglob("*.*"))}
    longer = _tiny_sprite_claim(
        compose_config, "task.splits=[r2r]", f"task.fits_dir={kept}", "task.max_steps=8"
    )
    larger_grid = _tiny_sprite_claim(
        compose_config, "task.splits=[r2r]", f"task.fits_dir={kept}", "task.data.grid.n_positions=5"
    )
    with pytest.raises(LitlabError, match=r"data.grid.n_positions: 4 -> 5"):
        larger_grid(TaskContext.local(tmp_path / "second"))
    assert {path: path.read_bytes() for path in sorted(kept.rglob("*.*"))} == saved
    runs = longer(TaskContext.local(tmp_path / "third"), fit_only=["vae"])["tables"]["runs"]  # may grow
    assert list(runs["model"]) == ["data", "vae"]


class _Killed(Exception):
    """Stands for the process being killed."""


def _killed_when_scoring_cartanfm(real_score: Callable) -> Callable:
    """``benchmark.score`` that stands for the study being killed when a CartanFM fit is scored."""

    def killed(module, *args):
        if isinstance(module, CartanFM):
            raise _Killed
        return real_score(module, *args)

    return killed


def test_a_fit_killed_before_it_was_saved_continues_from_its_checkpoint(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    task = _tiny_sprite_claim(compose_config, "task.splits=[r2r]")
    clean = task(TaskContext.local(tmp_path / "clean"))["tables"]["runs"]
    real_score = benchmark.score
    monkeypatch.setattr(benchmark, "score", _killed_when_scoring_cartanfm(real_score))
    with pytest.raises(_Killed):
        task(TaskContext.local(tmp_path / "killed"))
    fits = tmp_path / "killed" / "fits" / "r2r_case0"
    assert (fits / "cartanfm_seed0.ckpt").exists() and not (fits / "cartanfm_seed0.json").exists()
    monkeypatch.setattr(benchmark, "score", real_score)
    steps = []
    monkeypatch.setattr(CartanFM, "training_step", _counting(CartanFM.training_step, steps))
    again = task(TaskContext.local(tmp_path / "killed"))["tables"]["runs"]
    assert not steps  # its state at its last validation was all it needed: no step trained again
    pd.testing.assert_frame_equal(clean, again)
    trained = again[again["model"] != "data"]
    capped = {f"{row.model}_seed{int(row.seed)}" for row in trained.itertuples() if row.steps == 6}
    assert {path.stem for path in fits.glob("*.ckpt")} == capped  # kept only where a larger budget continues
    assert not list(fits.glob("*.partial"))


def test_a_larger_max_steps_continues_the_fits_that_reached_the_old_one(
    compose_config, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    patient = ("task.splits=[r2r]", "task.early_stopping.patience=10")  # no fit stops early
    longer = _tiny_sprite_claim(compose_config, *patient, "task.max_steps=10")
    clean = longer(TaskContext.local(tmp_path / "clean"))["tables"]["runs"]
    _tiny_sprite_claim(compose_config, *patient, "task.max_steps=6")(TaskContext.local(tmp_path / "extended"))
    fits = tmp_path / "extended" / "fits" / "r2r_case0"
    assert {path.name for path in fits.glob("*.ckpt")} == {"vae_seed0.ckpt", "cartanfm_seed0.ckpt"}
    steps = []
    for model in (VAE, CartanFM):
        monkeypatch.setattr(model, "training_step", _counting(model.training_step, steps))
    extended = longer(TaskContext.local(tmp_path / "extended"))["tables"]["runs"]
    assert len(steps) == 2 * 4  # steps 7-10 of each fit
    pd.testing.assert_frame_equal(clean, extended)


def _counting(step: Callable, calls: list) -> Callable:
    """The method ``step``, also counting its calls in ``calls``."""

    def counted(self, *args):
        calls.append(1)
        return step(self, *args)

    return counted


def _small_vae() -> tuple[SpritesDataModule, VAE]:
    """A set-up R2R case 0 on a small 16x16 grid and an untrained VAE for it."""
    data = SpritesDataModule(
        split="r2r", case=0, grid={"image_size": 16, "n_scales": 2, "n_orientations": 2, "n_positions": 4}
    )
    data.setup()
    module = VAE(image_shape=data.image_shape, optimizer=partial(torch.optim.Adam, lr=1e-3))
    return data, module


def test_early_stopping_keeps_the_weights_of_the_best_in_distribution_validation(tmp_path: Path) -> None:
    data, module = _small_vae()
    module, result = fit(Fitter(), module, data, 8, seed=0, stopping=EarlyStopping(every=2, patience=10))
    scores = {int(row["step"]): row["val/id_bce"] for row in result.history}
    assert list(scores) == [2, 4, 6, 8] and result.best_step == min(scores, key=scores.get)
    assert score(module, data, None)[0]["id_bce"] == pytest.approx(scores[result.best_step], rel=1e-4)


def test_early_stopping_does_not_end_a_fit_before_min_steps() -> None:
    data, module = _small_vae()
    stopping = EarlyStopping(every=2, patience=0, min_steps=6)
    _, result = fit(Fitter(), module, data, 8, seed=0, stopping=stopping)
    assert result.steps == 6 and result.stopped_early


def test_the_status_of_a_study_names_each_fit_saved_capped_continuing_or_started(
    compose_config, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("LITLAB_CACHE", str(tmp_path / "cache"))
    patient = ("task.splits=[r2r]", "task.early_stopping.patience=10")  # both fits reach max_steps
    runs = _tiny_sprite_claim(compose_config, *patient)(TaskContext.local(tmp_path / "run"))["tables"]["runs"]
    monkeypatch.setattr(sys, "argv", ["claim_status", str(tmp_path)])
    claim_status.main()
    printed = capsys.readouterr().out
    assert "0 done, 2 capped" in printed and "CartanFM against the VAE and FM-only" in printed
    assert re.search(r"r2r +0 +vae +\+21\.79 +[+-]\d+\.\d +1 one seed: no interval", printed)
    (tmp_path / "run" / "fits" / "r2r_case0" / "vae_seed0.json").unlink()  # as if killed before it was saved
    status = study_status([tmp_path]).set_index("model")
    assert list(status["state"]) == ["capped", "started"] and list(status.index) == ["cartanfm", "vae"]
    cartanfm = runs.set_index("model").loc["cartanfm"]
    assert status.loc["cartanfm", "heldout_bce"] == cartanfm["heldout_bce"]
    assert status.loc["vae", "step"] == 6 and math.isnan(status.loc["vae", "heldout_bce"])
    summary = heldout_summary(study_status([tmp_path]))  # saved fits only: the VAE's is not
    assert summary.to_dict() == {"cartanfm": {"r2r_case0": f"{cartanfm['heldout_bce']:.1f} (1)"}}

    longer = _tiny_sprite_claim(compose_config, *patient, "task.max_steps=10")
    monkeypatch.setattr(benchmark, "score", _killed_when_scoring_cartanfm(benchmark.score))
    with pytest.raises(_Killed):  # a larger budget continues the capped CartanFM, killed before it is saved
        longer(TaskContext.local(tmp_path / "run"))
    continuing = study_status([tmp_path]).set_index("model").loc["cartanfm"]
    assert continuing["state"] == "continuing" and continuing["step"] == 10
    assert math.isnan(continuing["heldout_bce"])  # the saved score is of the capped weights, not these
    with pytest.raises(FileNotFoundError, match="no sprite-claim fits under"):
        study_status([tmp_path / "elsewhere"])
