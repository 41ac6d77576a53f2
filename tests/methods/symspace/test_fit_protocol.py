"""A fits folder keeps the settings its fits were made with and refuses a run with other ones."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.methods.symspace.benchmark import EarlyStopping
from litlab.methods.symspace.fit_protocol import PROTOCOL_FILE, check_protocol, describe, fit_protocol
from litlab.methods.symspace.module import VAE


def _protocol(beta: float = 1.0, image_size: int = 16, width: int = 8) -> dict:
    models = {
        "vae": functools.partial(VAE, beta=beta, optimizer=functools.partial(torch.optim.Adam, lr=1e-3)),
        "cartanfm": functools.partial(VAE, hidden=width),
    }
    data = {"grid": {"image_size": image_size}, "split": "r2r", "case": 0}
    return fit_protocol(models, data, EarlyStopping(every=2, patience=1), classifier_epochs=1)


def test_a_partial_is_described_by_its_target_and_keywords_nested() -> None:
    assert _protocol()["models"]["vae"] == {
        "_target_": "litlab.methods.symspace.module.VAE",
        "beta": 1.0,
        "optimizer": {"_target_": "torch.optim.adam.Adam", "lr": 1e-3},
    }
    assert describe(functools.partial(max, 1, (2, 3))) == {"_target_": "builtins.max", "_args_": [1, [2, 3]]}


def test_settings_are_checked_only_against_fits_that_were_saved(tmp_path: Path) -> None:
    check_protocol(tmp_path, _protocol())
    check_protocol(tmp_path, _protocol(image_size=32))  # nothing saved yet: the new settings are recorded
    assert json.loads((tmp_path / PROTOCOL_FILE).read_text())["data"]["grid"]["image_size"] == 32
    (tmp_path / "vae_seed0.json").write_text("{}")
    for wrong, change in (
        (_protocol(image_size=16), "data.grid.image_size: 32 -> 16"),
        (_protocol(image_size=32, beta=4.0), "models.vae.beta: 1.0 -> 4.0"),
    ):
        with pytest.raises(LitlabError, match=f"holds fits made with other settings .*{change}.*fits_dir"):
            check_protocol(tmp_path, wrong)
    check_protocol(tmp_path, _protocol(image_size=32, width=16))  # no cartanfm fit saved: it may change
    (tmp_path / "cartanfm_seed1.ckpt").write_bytes(b"")  # a fit under way counts as saved
    with pytest.raises(LitlabError, match="models.cartanfm.hidden: 16 -> 8"):
        check_protocol(tmp_path, _protocol(image_size=32, width=8))


def test_a_folder_saved_before_protocols_were_kept_takes_the_first_run_s_settings(tmp_path: Path) -> None:
    (tmp_path / "vae_seed0.json").write_text("{}")
    check_protocol(tmp_path, _protocol(beta=2.0))
    with pytest.raises(LitlabError, match="models.vae.beta: 2.0 -> 1.0"):
        check_protocol(tmp_path, _protocol(beta=1.0))


def _stopping_protocol(min_steps: int) -> dict:
    models = {"vae": functools.partial(VAE, beta=1.0)}
    data = {"grid": {"image_size": 16}, "split": "r2r", "case": 0}
    return fit_protocol(models, data, EarlyStopping(every=2, patience=1, min_steps=min_steps), 1)


def _save_fit(fits_dir: Path, stem: str, steps: int, capped: bool = False) -> None:
    (fits_dir / f"{stem}.json").write_text(json.dumps({"steps": steps}))
    (fits_dir / f"{stem}.pt").write_bytes(b"recon")
    (fits_dir / f"{stem}.val.json").write_text("[]")
    if capped:
        (fits_dir / f"{stem}.ckpt").write_bytes(b"state")


def test_a_raised_min_steps_moves_aside_exactly_the_fits_that_stopped_before_it(tmp_path: Path) -> None:
    check_protocol(tmp_path, _stopping_protocol(4000))
    _save_fit(tmp_path, "vae_seed0", 6000)  # stopped before 10000: the new rule would train on
    _save_fit(tmp_path, "vae_seed1", 10000)  # stopped at 10000: the new rule stops it there too
    _save_fit(tmp_path, "vae_seed2", 8000, capped=True)  # reached max_steps: continues, whatever the rule
    check_protocol(tmp_path, _stopping_protocol(10000))
    moved = tmp_path / "superseded" / "min_steps4000"
    assert sorted(f.name for f in moved.iterdir()) == ["vae_seed0.json", "vae_seed0.pt", "vae_seed0.val.json"]
    assert json.loads((moved / "vae_seed0.json").read_text()) == {"steps": 6000}
    assert sorted(f.name for f in tmp_path.glob("vae_seed*.json")) == [
        "vae_seed1.json",
        "vae_seed1.val.json",
        "vae_seed2.json",
        "vae_seed2.val.json",
    ]
    assert json.loads((tmp_path / PROTOCOL_FILE).read_text())["early_stopping"]["min_steps"] == 10000
    check_protocol(tmp_path, _stopping_protocol(10000))  # the same rule again moves nothing
    assert len(list(moved.iterdir())) == 3


def test_a_lower_min_steps_is_refused_and_nothing_moves(tmp_path: Path) -> None:
    check_protocol(tmp_path, _stopping_protocol(4000))
    _save_fit(tmp_path, "vae_seed0", 6000)
    with pytest.raises(LitlabError, match=r"min_steps=4000; a lower one \(2000\).*min_steps >= 4000"):
        check_protocol(tmp_path, _stopping_protocol(2000))
    assert (tmp_path / "vae_seed0.json").is_file() and not (tmp_path / "superseded").exists()
