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
