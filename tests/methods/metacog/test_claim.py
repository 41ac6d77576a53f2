"""The claim testable at our scale: the delegation analysis tells the three simulated subjects apart.

Only the positive control (delegates when its own max option probability is low) shows a significant
self-signal effect after the surface controls, with the right sign (more confidence, less delegation);
the negative control ("looks hard": digits and operation only) is significant only when the controls are
dropped, which is why they are there; the random agent never is. Seeds 30-31, unused while building
(0-1) and by the study (10-14). Measured spread over the study's five seeds (z of the max-prob
coefficient, results/metacog/study/tables/regressions.csv): positive -11.2 .. -12.0 with controls;
negative -0.93 .. 0.15 with, -7.5 .. -9.3 without; random -0.94 .. 0.97. Own correctness as the signal:
positive -7.3 .. -7.8, negative -1.0 .. 0.3, random -2.1 .. 0.5 (with controls).
Margins: |z| > 4 for a real effect, |z| < 3 for none (p > 0.003).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from litlab.methods.metacog.agents import SimulatedAgent, SimulatedBackend
from litlab.methods.metacog.session import GameConfig, analyse, play

SEEDS = (30, 31)


def _z(tmp_path: Path, policy: str, seed: int, controls: bool, **game: object) -> dict[str, float]:
    played = play(
        SimulatedBackend(SimulatedAgent(policy, seed=seed)),
        GameConfig(**game),
        tmp_path / f"{policy}-{seed}-{sorted(game.items())}",
        seed,
    )
    regressions = analyse(played, n_boot=200, seed=seed, controls=controls)["regressions"]
    return {signal: reg["z"] for signal, reg in regressions.items()} | {
        "ci_high": regressions["own_max_prob"]["ci_high"]
    }


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_only_the_positive_control_uses_its_own_signal_after_controls(tmp_path: Path, seed: int) -> None:
    positive = _z(tmp_path, "positive", seed, controls=True)
    assert positive["own_max_prob"] < -4 and positive["own_correct"] < -4 and positive["ci_high"] < 0
    for policy in ("negative", "random"):
        z = _z(tmp_path, policy, seed, controls=True)
        assert abs(z["own_max_prob"]) < 3 and abs(z["own_correct"]) < 3, (policy, z)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_without_controls_the_surface_heuristic_looks_metacognitive(tmp_path: Path, seed: int) -> None:
    assert _z(tmp_path, "negative", seed, controls=False)["own_max_prob"] < -4
    assert abs(_z(tmp_path, "random", seed, controls=False)["own_max_prob"]) < 3


@pytest.mark.slow
def test_the_decision_only_variant_with_alternating_labels_gives_the_same_separation(tmp_path: Path) -> None:
    game = {"decision_only": True, "second_chance": False}
    assert _z(tmp_path, "positive", SEEDS[0], controls=True, **game)["own_max_prob"] < -4
    assert abs(_z(tmp_path, "negative", SEEDS[0], controls=True, **game)["own_max_prob"]) < 3
