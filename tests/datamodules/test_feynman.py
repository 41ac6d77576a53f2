"""The safe formula parser, the 100 CSV equations, the paper's 20 formulas and the Feynman DataModule."""

from __future__ import annotations

import inspect
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import litlab.datamodules.feynman as feynman
from litlab.datamodules.feynman import (
    PAPER_FORMULAS,
    ZERO_EPS,
    FeynmanDataModule,
    Formula,
    feynman_csv_path,
    get_csv_equation,
    get_paper_formula,
    load_feynman_equations,
    sample_ranges,
    sample_unit_avoiding_zero,
    unit_grid_avoiding_zero,
)

CSV = feynman_csv_path()


def _official(x: np.ndarray) -> list[np.ndarray]:
    """The official ``src/feynman.py`` f1..f20, retyped in numpy as an independent oracle."""
    a, b = x[:, 0], x[:, 1]
    c = x[:, 2] if x.shape[1] > 2 else None
    return [
        np.exp(-(a**2) / (2 * b**2)) / np.sqrt(2 * np.pi * b**2) if c is None else None,
        np.exp(-((a - b) ** 2) / (2 * c**2)) / np.sqrt(2 * np.pi * c**2) if c is not None else None,
        1 + a * np.sin(b),
        a * (1 / b - 1),
        (a + b) / (1 + a * b),
        (1 + a * b) / (1 + a),
        np.arcsin(a * np.sin(b)),
        1 / (1 + a * b),
        np.sqrt(1 + a**2 - 2 * a * np.cos(b - c)) if c is not None else None,
        np.sin(a * b / 2) ** 2 / np.sin(b / 2) ** 2,
        a * np.exp(-b),
        np.cos(a) + b * np.cos(a) ** 2,
        (a - 1) * b,
        c * np.sqrt(a**2 + b**2) / (4 * np.pi) if c is not None else None,
        a * (1 + b * np.cos(c)) if c is not None else None,
        a * b / (1 - a * b / 3),
        a / (np.exp(b) + np.exp(-b)),
        a + b * c if c is not None else None,
        np.sqrt(1 + a**2 + b**2),
        b * (1 + a * np.cos(c)) if c is not None else None,
    ]


def test_all_csv_equations_evaluate_on_their_ranges() -> None:
    equations = load_feynman_equations(CSV.parent)
    assert len(equations) == 100 and sorted(eq.number for eq in equations.values()) == list(range(1, 101))
    for eq in equations.values():
        x = sample_ranges(300, eq.ranges, seed=eq.number)
        lows, highs = np.array(eq.ranges).T
        assert (x.numpy() >= lows - 1e-6).all() and (x.numpy() <= highs + 1e-6).all()
        y = eq.formula(x.double().numpy())
        assert y.shape == (300, 1) and np.isfinite(y).all(), eq.name
        np.testing.assert_allclose(eq.formula(x.double()).numpy(), y, rtol=1e-12, err_msg=eq.name)


def test_csv_formulas_spot_values() -> None:
    gauss = get_csv_equation("I.6.2")  # exp(-(theta/sigma)**2/2)/(sqrt(2*pi)*sigma), columns sigma, theta
    x = np.array([[2.0, 1.0]])
    np.testing.assert_allclose(gauss.formula(x), [[np.exp(-0.125) / (np.sqrt(2 * np.pi) * 2)]])
    energy = get_csv_equation(9)  # I.13.4: 1/2*m*(v**2+u**2+w**2)
    assert energy.name == "I.13.4"
    np.testing.assert_allclose(energy.formula(np.array([[2.0, 1.0, 2.0, 3.0]])), [[14.0]])


MALICIOUS = [
    ("__import__('os').system('x')", "attribute access '.system'"),
    ("__import__('os')", "call to '__import__'"),
    ("a.__class__", "attribute access '.__class__'"),
    ("(lambda: a)()", "Lambda"),
    ("lambda: 1", "Lambda"),
    ("a[0]", "Subscript"),
    ("open(a)", "call to 'open'"),
    ("eval('1')", "call to 'eval'"),
    ("[a for a in b]", "ListComp"),
    ("'text'", "constant 'text'"),
    ("a if b else a", "IfExp"),
    ("a < b", "Compare"),
    ("a % b", "operator Mod"),
    ("a @ b", "operator MatMult"),
    ("sin(a, b)", "one positional argument"),
    ("exp(x=a)", "one positional argument"),
    ("a; b", "does not parse"),
    ("c", "unknown name 'c'"),
    ("True", "constant True"),
    ("(" * 300 + "a" + ")" * 300, "does not parse|nesting"),
    ("+".join(["a"] * 600), "longer than 1000"),
]


@pytest.mark.parametrize(("text", "construct"), MALICIOUS)
def test_parser_rejects_anything_outside_the_whitelist(text: str, construct: str) -> None:
    with pytest.raises(ValueError, match=r"equation 'evil'") as error:
        Formula(text, ("a", "b"), "evil")
    assert re.search(construct, str(error.value)), str(error.value)


def test_parser_rejects_bad_variable_names_and_never_calls_eval() -> None:
    with pytest.raises(ValueError, match="variable name 'sin'"):
        Formula("sin", ("sin",), "clash")
    with pytest.raises(ValueError, match="repeated"):
        Formula("a", ("a", "a"), "twice")
    source = inspect.getsource(feynman)
    assert not re.search(r"(?<![\w.])(eval|exec|compile)\(", source)


def test_parser_arithmetic_and_backends() -> None:
    f = Formula("-a**2/2 + sqrt(b)*pi - ln(exp(a)) + arccos(b/4)", ("a", "b"), "mix")
    x = np.array([[1.5, 2.0], [-0.5, 3.0]])
    a, b = x[:, 0], x[:, 1]
    expected = -(a**2) / 2 + np.sqrt(b) * np.pi - a + np.arccos(b / 4)
    np.testing.assert_allclose(f(x)[:, 0], expected, rtol=1e-14)
    np.testing.assert_allclose(f(torch.from_numpy(x))[:, 0].numpy(), expected, rtol=1e-14)
    assert Formula("2*pi", ("a",), "const")(np.zeros((3, 1))).shape == (3, 1)
    with pytest.raises(ValueError, match=r"shape \(N, 2\)"):
        f(np.zeros((4, 3)))


def test_paper_formulas_match_official_code() -> None:
    assert len(PAPER_FORMULAS) == 20
    for dim in (2, 3):
        x = sample_unit_avoiding_zero(1000, dim, seed=dim).double().numpy()
        for i, expected in enumerate(_official(x), start=1):
            formula = PAPER_FORMULAS[f"f{i}"]
            if expected is None or len(formula.variables) != dim:
                continue
            np.testing.assert_allclose(formula(x)[:, 0], expected, rtol=1e-12, err_msg=f"f{i}")
    assert get_paper_formula(7) is get_paper_formula("f7") is get_paper_formula("I.26.2")
    with pytest.raises(ValueError, match="unknown paper formula"):
        get_paper_formula("f21")


@pytest.mark.parametrize("key", sorted(PAPER_FORMULAS, key=lambda k: int(k[1:])))
def test_paper_formulas_are_finite_and_inputs_avoid_zero(key: str) -> None:
    dm = FeynmanDataModule(key, n_train=4000, n_test=1000)
    dm.setup()
    for dataset in (dm.train_set, dm.val_set, dm.test_set):
        x, y = dataset.tensors
        assert x.dtype == y.dtype == torch.float32
        assert torch.isfinite(y).all()
        assert (x.abs() >= np.float32(ZERO_EPS)).all() and (x > -1).all() and (x <= 1).all()


def test_zero_avoiding_rule() -> None:
    x = feynman.avoid_zero(np.array([0.0, 3e-7, -3e-7, -2e-6, 0.5]))
    np.testing.assert_array_equal(x, [ZERO_EPS, ZERO_EPS, -ZERO_EPS, -2e-6, 0.5])
    grid = unit_grid_avoiding_zero(2)
    assert grid.shape == (200**2, 2) and grid.min() == pytest.approx(-1 + ZERO_EPS)
    assert unit_grid_avoiding_zero(3).shape == (30**3, 3)
    assert unit_grid_avoiding_zero(1).shape == (1000, 1)
    assert unit_grid_avoiding_zero(2, resolution=11).abs().min() >= np.float32(ZERO_EPS)


def test_datamodule_seeding_split_and_modes() -> None:
    a, b, c = (FeynmanDataModule("f9", seed=s, n_train=500, n_test=100) for s in (1, 1, 2))
    for dm in (a, b, c):
        dm.setup()
    assert a.input_dim == 3 and len(a.test_set) == 30**3
    assert torch.equal(a.train_set.tensors[0], b.train_set.tensors[0])
    assert not torch.equal(a.train_set.tensors[0], c.train_set.tensors[0])
    assert torch.cdist(a.train_set.tensors[0], a.val_set.tensors[0]).min() > 0
    csv_mode = FeynmanDataModule(
        "I.9.18", mode="csv", n_train=200, n_test=50, batch_size=50, root=str(CSV.parent)
    )
    csv_mode.setup()
    batches = list(csv_mode.train_dataloader())
    assert csv_mode.input_dim == 9 and len(batches) == 4 and batches[0][0].shape == (50, 9)
    assert csv_mode.test_set is csv_mode.val_set
    with pytest.raises(ValueError, match="mode must be"):
        FeynmanDataModule("f1", mode="unit")
    with pytest.raises(ValueError, match="unknown Feynman equation"):
        FeynmanDataModule("I.99.99", mode="csv")


def test_missing_file_says_where_it_looked_and_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(FileNotFoundError) as error:
        FeynmanDataModule("I.6.2a", mode="csv", root=str(tmp_path))
    message = str(error.value)
    assert str(tmp_path / "FeynmanEquations.csv") in message
    assert "data.root=" in message and "LITLAB_DATA_ROOT" in message
    (tmp_path / "feynman").mkdir()
    shutil.copy(CSV, tmp_path / "feynman" / "FeynmanEquations.csv")
    monkeypatch.setenv("LITLAB_DATA_ROOT", str(tmp_path))
    assert feynman_csv_path() == tmp_path / "feynman" / "FeynmanEquations.csv"


@pytest.mark.parametrize(
    ("equation", "mode", "n_in"), [("f1", "paper", 2), ("f20", "paper", 3), ("I.9.18", "csv", 9)]
)
def test_data_spec_gives_the_equation_s_input_width(equation: str, mode: str, n_in: int) -> None:
    assert FeynmanDataModule(equation, mode=mode).data_spec() == {"n_in": n_in, "n_out": 1}


def test_steps_per_epoch_repeats_the_full_batch() -> None:
    dm = FeynmanDataModule("f1", n_train=50, n_test=10, grid_resolution=4, steps_per_epoch=4)
    dm.setup("fit")
    batches = list(dm.train_dataloader())
    assert len(batches) == 4 and all(torch.equal(x, dm.train_set.tensors[0]) for x, _ in batches)
