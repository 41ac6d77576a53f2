"""Feynman equations as regression data: a safe formula parser, the AI Feynman CSV, the paper's 20 formulas.

Formulas are parsed with :mod:`ast` and evaluated by walking a whitelist of nodes (numbers, variable
names, ``+ - * / **``, unary ``+ -``, the constant ``pi`` and calls to ``ALLOWED_FUNCTIONS``); file text
is never passed to ``eval`` or ``exec``.

Two sampling modes:

- ``paper``: the 20 dimensionless formulas of the KAN initialisation study (``src/feynman.py`` of
  srigas/KAN_Initialization_Schemes), inputs on [-1, 1] with zero avoided. The rule, reconstructed from
  the official ``generate_feyn_data``: draw x ~ U(-1 + eps, 1) per coordinate with eps = 1e-6, then move
  any |x| < eps to sign(x) * eps (an exact 0 goes to +eps; the official ``jnp.sign`` would leave it at 0).
  The lower bound -1 + eps also keeps 1 + x away from 0. The test grid applies the same rule to
  ``linspace(-1 + eps, 1, r)`` per axis with r = 1000, 200, 30, 10 for 1, 2, 3, >= 4 inputs.
- ``csv``: the 100 equations of ``FeynmanEquations.csv`` sampled uniformly in their own ranges (the
  benchmark's way; a deviation from the paper when used for its experiments).

Batches are ``(x, y)`` float32 tuples, ``x: (B, d)``, ``y: (B, 1)``.
"""

from __future__ import annotations

import ast
import csv
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from litlab.core.errors import ConfigError
from litlab.core.paths import DATA_ROOT_ENV, data_root_candidates
from litlab.datamodules.base import RegressionDataModule, TensorBatchDataset
from litlab.datamodules.functions import uniform_grid

CSV_NAME = "FeynmanEquations.csv"
CSV_URL = "https://space.mit.edu/home/tegmark/aifeynman/FeynmanEquations.csv"
MAX_FORMULA_LENGTH = 1000
ZERO_EPS = 1e-6

ALLOWED_FUNCTIONS: dict[str, tuple[Callable, Callable]] = {
    "sqrt": (np.sqrt, torch.sqrt),
    "exp": (np.exp, torch.exp),
    "log": (np.log, torch.log),
    "ln": (np.log, torch.log),
    "sin": (np.sin, torch.sin),
    "cos": (np.cos, torch.cos),
    "tan": (np.tan, torch.tan),
    "sinh": (np.sinh, torch.sinh),
    "cosh": (np.cosh, torch.cosh),
    "tanh": (np.tanh, torch.tanh),
    "arcsin": (np.arcsin, torch.asin),
    "arccos": (np.arccos, torch.acos),
    "arctan": (np.arctan, torch.atan),
    "abs": (np.abs, torch.abs),
}
CONSTANTS: dict[str, float] = {"pi": math.pi}
_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_UNARY = (ast.USub, ast.UAdd)

Array = np.ndarray | torch.Tensor


def _describe(node: ast.AST) -> str:
    """A short human name for a rejected construct."""
    if isinstance(node, ast.Attribute):
        return f"attribute access '.{node.attr}'"
    if isinstance(node, ast.Call):
        return f"call to {ast.unparse(node.func)!r}"
    if isinstance(node, ast.Constant):
        return f"constant {node.value!r}"
    if isinstance(node, ast.BinOp | ast.UnaryOp):
        return f"operator {type(node.op).__name__}"
    return f"{type(node).__name__} expression {ast.unparse(node)!r}"


class Formula:
    """A formula string compiled into a whitelisted AST; call it on ``x: (N, d)`` (numpy or torch) -> (N, 1).

    Column ``i`` of ``x`` is ``variables[i]``. Anything outside the whitelist raises ValueError naming
    ``name`` and the offending construct.
    """

    def __init__(self, expression: str, variables: tuple[str, ...] | list[str], name: str) -> None:
        self.expression = expression
        self.variables = tuple(variables)
        self.name = name
        for var in self.variables:
            if not var.isidentifier() or var in ALLOWED_FUNCTIONS or var in CONSTANTS:
                self._reject(f"variable name {var!r} (must be an identifier, not a function or constant)")
        if len(set(self.variables)) != len(self.variables):
            self._reject(f"repeated variable names {self.variables}")
        if len(expression) > MAX_FORMULA_LENGTH:
            self._reject(f"a formula longer than {MAX_FORMULA_LENGTH} characters")
        try:
            self.tree = ast.parse(expression.strip(), mode="eval").body
            self._check(self.tree)
        except SyntaxError as error:
            self._reject(f"text that does not parse ({error.msg})")
        except RecursionError:
            self._reject("nesting too deep")

    def _reject(self, construct: str) -> None:
        shown = self.expression if len(self.expression) <= 120 else self.expression[:117] + "..."
        raise ValueError(f"equation {self.name!r}: {construct} is not allowed in formula {shown!r}")

    def _check(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                self._reject(_describe(node))
        elif isinstance(node, ast.Name):
            if node.id not in self.variables and node.id not in CONSTANTS:
                self._reject(f"unknown name {node.id!r} (variables: {', '.join(self.variables)})")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY):
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, _UNARY):
            self._check(node.operand)
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                self._reject(_describe(node.func))
            if node.func.id not in ALLOWED_FUNCTIONS:
                self._reject(f"call to {node.func.id!r} (allowed: {', '.join(ALLOWED_FUNCTIONS)})")
            if len(node.args) != 1 or node.keywords:
                self._reject(f"{node.func.id}() with other than one positional argument")
            self._check(node.args[0])
        else:
            self._reject(_describe(node))

    def _eval(self, node: ast.AST, env: dict[str, Array], backend: int) -> Array | float:
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return env[node.id] if node.id in env else CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp):
            value = self._eval(node.operand, env, backend)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Call):
            fn = ALLOWED_FUNCTIONS[node.func.id][backend]
            arg = self._eval(node.args[0], env, backend)
            if backend and not isinstance(arg, torch.Tensor):
                arg = torch.tensor(arg, dtype=torch.float64)
            return fn(arg)
        left, right = self._eval(node.left, env, backend), self._eval(node.right, env, backend)
        op = type(node.op)
        if op is ast.Add:
            return left + right
        if op is ast.Sub:
            return left - right
        if op is ast.Mult:
            return left * right
        if op is ast.Div:
            return left / right
        return left**right

    def __call__(self, x: Array) -> Array:
        if x.ndim != 2 or x.shape[1] != len(self.variables):
            raise ValueError(
                f"equation {self.name!r} takes x of shape (N, {len(self.variables)}) "
                f"({', '.join(self.variables)}), got {tuple(x.shape)}"
            )
        backend = int(isinstance(x, torch.Tensor))
        env = {var: x[:, i] for i, var in enumerate(self.variables)}
        if backend:
            out = torch.as_tensor(self._eval(self.tree, env, backend), dtype=x.dtype, device=x.device)
        else:
            with np.errstate(all="ignore"):  # non-finite values are reported by the caller that needs them
                out = np.asarray(self._eval(self.tree, env, backend), dtype=x.dtype)
        if out.ndim == 0:  # a formula without variables
            out = out.expand(x.shape[0]) if backend else np.full(x.shape[0], out)
        return out.reshape(-1, 1)

    def __repr__(self) -> str:
        return f"Formula({self.name!r}: {self.expression} of {', '.join(self.variables)})"


@dataclass(frozen=True)
class FeynmanEquation:
    """One row of the AI Feynman CSV: file name (``I.6.2a``), number, output symbol, formula, ranges."""

    name: str
    number: int
    output: str
    formula: Formula
    ranges: tuple[tuple[float, float], ...]


class MissingFeynmanCSV(ConfigError, FileNotFoundError):
    """The AI Feynman CSV is in none of the places looked in: both a config error and a missing file."""


def feynman_csv_path(root: str | os.PathLike | None = None) -> Path:
    """Where ``FeynmanEquations.csv`` is: ``root`` if given, else ``$LITLAB_DATA_ROOT/feynman``, else
    the shipped copy; a clear MissingFeynmanCSV if none holds it."""
    candidates = [Path(root).expanduser()] if root is not None else data_root_candidates("feynman")
    files = [c if c.suffix == ".csv" else c / CSV_NAME for c in candidates]
    for path in files:
        if path.is_file():
            return path
    raise MissingFeynmanCSV(
        f"{CSV_NAME} not found; looked in: {', '.join(str(p) for p in files)}. Set data.root=<folder with "
        f"{CSV_NAME}> or export {DATA_ROOT_ENV}=<data folder with a feynman/ subfolder> (the file is "
        f"published at {CSV_URL})."
    )


def load_feynman_equations(root: str | os.PathLike | None = None) -> dict[str, FeynmanEquation]:
    """All equations of the CSV, keyed by file name (``I.6.2a`` ...), each parsed by the safe parser."""
    path = feynman_csv_path(root)
    equations = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if not row.get("Filename"):
                continue
            name, n_vars = row["Filename"].strip(), int(row["# variables"])
            variables = [row[f"v{i}_name"].strip() for i in range(1, n_vars + 1)]
            ranges = tuple((float(row[f"v{i}_low"]), float(row[f"v{i}_high"])) for i in range(1, n_vars + 1))
            formula = Formula(row["Formula"], variables, name)
            equations[name] = FeynmanEquation(
                name, int(row["Number"]), row["Output"].strip(), formula, ranges
            )
    if not equations:
        raise ValueError(f"{path} holds no equations; expected the AI Feynman CSV with a Filename column")
    return equations


# The paper's 20 dimensionless formulas (official ``src/feynman.py`` f1..f20, same column order), named by
# the AI Feynman CSV id whose dimensionless form they are (pykan's table writes I.6.20 and II.11.7 for the
# CSV's I.6.2 and II.11.17). Variables are ratios of the original ones.
_DIMENSIONLESS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("I.6.2", "exp(-theta**2/(2*sigma**2))/sqrt(2*pi*sigma**2)", ("theta", "sigma")),
    ("I.6.2b", "exp(-(theta-theta1)**2/(2*sigma**2))/sqrt(2*pi*sigma**2)", ("theta", "theta1", "sigma")),
    ("I.12.11", "1+a*sin(theta)", ("a", "theta")),
    ("I.13.12", "a*(1/b-1)", ("a", "b")),
    ("I.16.6", "(a+b)/(1+a*b)", ("a", "b")),
    ("I.18.4", "(1+a*b)/(1+a)", ("a", "b")),
    ("I.26.2", "arcsin(n*sin(theta2))", ("n", "theta2")),
    ("I.27.6", "1/(1+a*b)", ("a", "b")),
    ("I.29.16", "sqrt(1+a**2-2*a*cos(theta1-theta2))", ("a", "theta1", "theta2")),
    ("I.30.3", "sin(n*theta/2)**2/sin(theta/2)**2", ("n", "theta")),
    ("I.40.1", "n_0*exp(-a)", ("n_0", "a")),
    ("I.50.26", "cos(a)+alpha*cos(a)**2", ("a", "alpha")),
    ("II.2.42", "(a-1)*b", ("a", "b")),
    ("II.6.15a", "1/(4*pi)*c*sqrt(a**2+b**2)", ("a", "b", "c")),
    ("II.11.17", "n_0*(1+a*cos(theta))", ("n_0", "a", "theta")),
    ("II.11.27", "n*alpha/(1-n*alpha/3)", ("n", "alpha")),
    ("II.35.18", "n_0/(exp(a)+exp(-a))", ("n_0", "a")),
    ("II.36.38", "a+alpha*b", ("a", "alpha", "b")),
    ("III.10.19", "sqrt(1+a**2+b**2)", ("a", "b")),
    ("III.17.37", "beta*(1+alpha*cos(theta))", ("alpha", "beta", "theta")),
)
PAPER_FORMULAS: dict[str, Formula] = {
    f"f{i}": Formula(expression, variables, f"f{i} ({feynman_id})")
    for i, (feynman_id, expression, variables) in enumerate(_DIMENSIONLESS, start=1)
}
PAPER_IDS: dict[str, str] = {f"f{i}": row[0] for i, row in enumerate(_DIMENSIONLESS, start=1)}


def get_paper_formula(equation: str | int) -> Formula:
    """One of the paper's 20 formulas by key (``f7``), 1-based index (7) or Feynman id (``I.26.2``)."""
    key = f"f{equation}" if isinstance(equation, int) else str(equation)
    key = {fid: k for k, fid in PAPER_IDS.items()}.get(key, key)
    if key not in PAPER_FORMULAS:
        raise ValueError(
            f"unknown paper formula {equation!r}; use f1..f20, 1..20 or a Feynman id: "
            f"{', '.join(PAPER_IDS.values())}"
        )
    return PAPER_FORMULAS[key]


def get_csv_equation(equation: str | int, root: str | os.PathLike | None = None) -> FeynmanEquation:
    """One CSV equation by file name (``I.6.2a``) or by its ``Number`` column (1..100)."""
    equations = load_feynman_equations(root)
    if isinstance(equation, int):
        match = [eq for eq in equations.values() if eq.number == equation]
        if match:
            return match[0]
    elif equation in equations:
        return equations[equation]
    raise ValueError(
        f"unknown Feynman equation {equation!r}; use a file name such as I.6.2a or a number 1..100"
    )


def avoid_zero(x: np.ndarray, eps: float = ZERO_EPS) -> np.ndarray:
    """Move entries with |x| < eps to +-eps (keeping their sign; an exact 0 goes to +eps)."""
    return np.where(np.abs(x) < eps, np.where(x >= 0, eps, -eps), x)


def sample_unit_avoiding_zero(n: int, dim: int, seed: int, eps: float = ZERO_EPS) -> torch.Tensor:
    """``(n, dim)`` float32 points from U(-1 + eps, 1) with |x| >= eps (the paper's Feynman inputs)."""
    x = np.random.default_rng(seed).uniform(-1.0 + eps, 1.0, size=(n, dim))
    return torch.from_numpy(avoid_zero(x.astype(np.float32), np.float32(eps)))


def official_grid_resolution(dim: int) -> int:
    """Points per axis of the official Feynman evaluation grid for ``dim`` inputs."""
    return {1: 1000, 2: 200, 3: 30}.get(dim, 10)


def unit_grid_avoiding_zero(dim: int, resolution: int | None = None, eps: float = ZERO_EPS) -> torch.Tensor:
    """The official Feynman test grid: ``linspace(-1 + eps, 1, r)`` per axis with zero avoided."""
    grid = uniform_grid(resolution or official_grid_resolution(dim), dim, low=-1.0 + eps).numpy()
    return torch.from_numpy(avoid_zero(grid, np.float32(eps)))


def sample_ranges(n: int, ranges: tuple[tuple[float, float], ...], seed: int) -> torch.Tensor:
    """``(n, d)`` float32 points, coordinate i uniform in ``ranges[i]`` (the AI Feynman benchmark's way)."""
    low, high = np.array(ranges, dtype=np.float64).T
    return torch.from_numpy(np.random.default_rng(seed).uniform(low, high, size=(n, len(ranges)))).float()


class FeynmanDataModule(RegressionDataModule):
    """Regression data for one Feynman equation, seeded, with a held-out split and a test set.

    Args:
        equation: in ``paper`` mode one of the 20 dimensionless formulas (``f1``..``f20``, 1..20, or the
            Feynman id such as ``I.26.2``); in ``csv`` mode a CSV file name (``I.6.2a``) or number 1..100.
        mode: ``paper`` samples [-1, 1]^d with zero avoided and tests on the official grid; ``csv``
            samples the CSV's ranges and tests on the held-out split (a grid is impractical in up to 9-D).
        n_train, n_test: training points and held-out (validation) points (paper: 4000 and 1000).
        grid_resolution: points per axis of the paper-mode test grid; ``None`` uses the official rule.
        batch_size: global training batch; ``None`` means full batch, as in the paper.
        root: folder holding ``FeynmanEquations.csv`` (csv mode only); see ``feynman_csv_path``.
        steps_per_epoch: full batch only: identical full-batch steps per trainer epoch.
    """

    def __init__(
        self,
        equation: str | int = "f1",
        mode: Literal["paper", "csv"] = "paper",
        n_train: int = 4000,
        n_test: int = 1000,
        grid_resolution: int | None = None,
        batch_size: int | None = None,
        eval_batch_size: int | None = None,
        seed: int = 42,
        root: str | None = None,
        num_workers: int = 0,
        steps_per_epoch: int = 1,
    ) -> None:
        if mode == "paper":
            self.formula = get_paper_formula(equation)
            self.ranges = None
        elif mode == "csv":
            row = get_csv_equation(equation, root)
            self.formula, self.ranges = row.formula, row.ranges
        else:
            raise ValueError(f"mode must be 'paper' or 'csv', got {mode!r}")
        if n_train <= 0 or n_test <= 0:
            raise ValueError(f"n_train and n_test must be positive, got {n_train} and {n_test}")
        super().__init__(n_train, batch_size, eval_batch_size, seed, num_workers, steps_per_epoch)
        self.equation, self.mode = equation, mode
        self.n_test = n_test
        self.grid_resolution = grid_resolution
        self.save_hyperparameters()

    @property
    def input_dim(self) -> int:
        """Number of inputs d of the equation (the model's ``n_in``)."""
        return len(self.formula.variables)

    def data_spec(self) -> dict[str, int]:
        """What a model needs before training: the equation's d inputs and 1 output."""
        return {"n_in": self.input_dim, "n_out": 1}

    def _targets(self, x: torch.Tensor, what: str) -> torch.Tensor:
        y = self.formula(x.double().numpy())
        bad = int((~np.isfinite(y)).sum())
        if bad:
            raise ValueError(
                f"{self.formula.name} gives {bad} non-finite values on the {what} ({self.mode} mode)"
            )
        return torch.from_numpy(y).float()

    def setup(self, stage: str | None = None) -> None:
        if hasattr(self, "train_set"):
            return
        n = self.n_train + self.n_test
        if self.mode == "paper":
            x = sample_unit_avoiding_zero(n, self.input_dim, self.seed)
        else:
            x = sample_ranges(n, self.ranges, self.seed)
        y = self._targets(x, "sampled points")
        self.train_set = TensorBatchDataset(x[: self.n_train], y[: self.n_train])
        self.val_set = TensorBatchDataset(x[self.n_train :], y[self.n_train :])
        if self.mode == "paper":
            grid = unit_grid_avoiding_zero(self.input_dim, self.grid_resolution)
            self.test_set = TensorBatchDataset(grid, self._targets(grid, "test grid"))
        else:
            self.test_set = self.val_set
