"""A regular (non-editable) install carries the mapped packages and the YAML configs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_install_imports_mapped_packages_and_finds_configs(tmp_path: Path) -> None:
    target = tmp_path / "site"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    probe = (
        "import litlab, litlab.callbacks.divergence, litlab.datamodules.functions, litlab.kernels.bspline;"
        "from importlib import resources;"
        "import litlab.data, hydra_plugins.litlab_searchpath;"
        "from litlab.runner.cli import all_options;"
        "print(litlab.__file__); print(' '.join(all_options('experiment')));"
        "print((resources.files('litlab.data') / 'feynman' / 'FeynmanEquations.csv').is_file());"
        "print((resources.files('litlab.methods.metacog') / 'prompts' / 'delegate.yaml').is_file())"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    location, experiments, shipped_data, shipped_prompts = result.stdout.splitlines()
    assert location.startswith(str(target)), "imported the checkout instead of the installed copy"
    assert "kan/function_fit" in experiments.split()
    assert shipped_data == "True", "the small real data sets are installed with the package"
    assert shipped_prompts == "True", "a method's YAML templates are installed with it"


def test_clone_root_on_sys_path_does_not_shadow_hugging_face_kernels() -> None:
    """`python -m ...` in a clone puts its root on sys.path; the top-level kernels/ folder must not hide
    Hugging Face's `kernels` (transformers >= 5.25 imports it) nor stop transformers from loading."""
    probe = (
        "import sys;"
        "import transformers.models.gpt2.modeling_gpt2;"
        "import kernels, litlab.kernels.bspline;"
        "hf = 'site-packages' in (kernels.__file__ or '');"
        "print(sys.path[0] == '', 'hf' if hf else 'clone')"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "show", "--quiet", "kernels"], capture_output=True, timeout=60
    )
    expected = "hf" if installed.returncode == 0 else "clone"
    assert result.stdout.split() == ["True", expected]
