"""The five init schemes: reference σ values, the Hydra-facing config object, and LeCun's variance claim."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from litlab.methods.kan.init import GAIN, SCHEMES, InitScheme
from litlab.methods.kan.layers import KAN, KANLayer
from litlab.methods.kan.moments import kan_moments


@pytest.mark.parametrize(
    ("scheme", "sigma_b", "sigma_r"),
    [
        (InitScheme("glorot"), 0.0172, 0.0458),
        (InitScheme("lecun_numerical"), 0.144, None),
        (InitScheme("power", alpha=0.25, beta=1.75), 8.9e-6, 0.19),
    ],
)
def test_reference_stds_for_g20_32_to_32(scheme: InitScheme, sigma_b: float, sigma_r: float | None) -> None:
    """Reference values of the paper notes for G = 20, k = 3, a 32 -> 32 layer."""
    got_b, got_r = scheme.stds(32, 32, 20, 3)
    assert got_b == pytest.approx(sigma_b, rel=0.02)
    if sigma_r is not None:
        assert got_r == pytest.approx(sigma_r, rel=0.02)


def test_formulas_share_variance_over_s_terms() -> None:
    n_in, s = 32, 20 + 3 + 1
    sigma_b, sigma_r = InitScheme("lecun_normalized").stds(n_in, 32, 20, 3)
    assert sigma_b == pytest.approx(GAIN / math.sqrt(n_in * s))
    lecun_b, lecun_r = InitScheme("lecun_numerical").stds(n_in, 32, 20, 3)
    assert sigma_r == lecun_r
    assert InitScheme("baseline").stds(32, 96, 20, 3) == (0.1, pytest.approx(math.sqrt(2 / 128)))


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="valid names: " + ", ".join(SCHEMES)):
        InitScheme("he")


def test_exponents_belong_to_power_only() -> None:
    with pytest.raises(ValueError, match="needs both alpha"):
        InitScheme("power", alpha=0.25)
    with pytest.raises(ValueError, match="only to init scheme 'power'"):
        InitScheme("glorot", beta=1.0)


def test_from_config_accepts_name_mapping_and_hydra_config() -> None:
    power = InitScheme("power", alpha=0.25, beta=1.75)
    assert InitScheme.from_config("glorot") == InitScheme("glorot")
    assert InitScheme.from_config({"name": "power", "alpha": 0.25, "beta": 1.75}) == power
    assert InitScheme.from_config(OmegaConf.create({"name": "power", "alpha": 0.25, "beta": 1.75})) == power
    assert InitScheme.from_config(power) is power
    with pytest.raises(TypeError):
        InitScheme.from_config({"name": "glorot", "alhpa": 1.0})


@pytest.mark.parametrize("scheme", [InitScheme("glorot"), InitScheme("power", alpha=0.5, beta=1.0)])
def test_apply_draws_gaussians_with_the_scheme_stds(scheme: InitScheme) -> None:
    layer = KANLayer(64, 64, grid_size=5)
    scheme.apply(layer, generator=torch.Generator().manual_seed(0))
    sigma_b, sigma_r = scheme.stds(64, 64, 5, 3)
    # 64·64·8 and 64·64 draws: the sample std is within 2% and 5% of σ with overwhelming probability.
    assert layer.spline_weight.std().item() == pytest.approx(sigma_b, rel=0.02)
    assert layer.residual_weight.std().item() == pytest.approx(sigma_r, rel=0.05)
    assert torch.equal(layer.spline_scale, torch.ones(64, 64))
    assert torch.equal(layer.bias, torch.zeros(64))


def test_baseline_is_glorot_uniform_residual_and_small_gaussian_spline() -> None:
    layer = KANLayer(48, 80, grid_size=5)
    InitScheme("baseline").apply(layer, generator=torch.Generator().manual_seed(0))
    bound = math.sqrt(6 / (48 + 80))
    assert layer.residual_weight.abs().max() <= bound
    assert layer.residual_weight.abs().max() > 0.99 * bound
    assert layer.spline_weight.std().item() == pytest.approx(0.1, rel=0.02)


def test_init_is_seeded() -> None:
    layers = [KANLayer(4, 3, grid_size=5) for _ in range(2)]
    for layer in layers:
        InitScheme("glorot").apply(layer, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(layers[0].state_dict(), layers[1].state_dict(), atol=0, rtol=0)


def test_lecun_normalized_requires_a_standardised_basis() -> None:
    with pytest.raises(ValueError, match="standardize_basis=True"):
        InitScheme("lecun_normalized").apply(KANLayer(2, 2, grid_size=5))
    with pytest.raises(ValueError, match="standardize_basis=False"):
        InitScheme("glorot").apply(KANLayer(2, 2, grid_size=5, standardize_basis=True))
    model = KAN([2, 3, 1], grid_size=5, init={"name": "lecun_normalized"})
    assert all(layer.standardize_basis for layer in model.layers)


@pytest.mark.parametrize("name", ["lecun_numerical", "lecun_normalized"])
@pytest.mark.parametrize("grid_size", [5, 20])
def test_lecun_first_layer_preserves_second_moment(name: str, grid_size: int) -> None:
    """Inputs U(-1, 1) -> E[y²] = n_in (σ_r² μ_R + (G + k) σ_b² μ_B) = g² (G + k + 1) / S = g².

    Tolerance 4%: the estimate's spread over weight draws is dominated by (Σ_i E_x φ_ji)², one χ²
    degree of freedom per output; with 8192 outputs its measured seed-to-seed std is at most 0.7%
    (12 seeds), and the Monte Carlo μ (10^4 draws) and the eps of the standardisation add biases under 1%.
    """
    generator = torch.Generator().manual_seed(0)
    layer = KANLayer(32, 8192, grid_size, standardize_basis=name == "lecun_normalized", backend="torch")
    InitScheme(name).apply(layer, generator=generator)
    x = torch.rand(256, 32, generator=generator) * 2 - 1
    with torch.no_grad():
        second_moment = layer(x).square().mean().item()
    assert second_moment == pytest.approx(GAIN**2, rel=0.04)


def test_moments_ablation_is_the_plain_fan_rule() -> None:
    """moments=false: every μ is 1, so Glorot is g √(2 / (S (n_in + n_out))) for both branches."""
    sigma_b, sigma_r = InitScheme("glorot", moments=False).stds(32, 16, 20, 3)
    plain = GAIN * math.sqrt(2 / (24 * (32 + 16)))
    assert sigma_b == pytest.approx(plain) and sigma_r == pytest.approx(plain)
    assert InitScheme("lecun_numerical", moments=False).stds(32, 16, 20, 3) == (
        pytest.approx(GAIN / math.sqrt(32 * 24)),
        pytest.approx(GAIN / math.sqrt(32 * 24)),
    )
    for name, extra in (("baseline", {}), ("power", {"alpha": 0.25, "beta": 1.75}), ("zero_spline", {})):
        with pytest.raises(ValueError, match="moments=false applies only to"):
            InitScheme(name, moments=False, **extra)


@pytest.mark.parametrize(
    "scheme",
    [
        InitScheme("glorot", split=False),
        InitScheme("power", alpha=0.25, beta=1.75, split=False),
        InitScheme("baseline", split=False),
    ],
)
def test_split_ablation_keeps_the_layer_scale_and_shares_one_std(scheme: InitScheme) -> None:
    """split=false: σ_r = σ_b, and n_in (σ_r² μ_R + (G + k) σ_b² μ_B) equals the full scheme's, both from the
    formula and measured on a 32 -> 4096 layer with inputs U(-1, 1) (4096 outputs: within 5 %)."""
    full = InitScheme(scheme.name, scheme.alpha, scheme.beta)
    moments = kan_moments(20, 3)

    def layer_scale(stds: tuple[float, float]) -> float:
        return 32 * (stds[1] ** 2 * moments.mu_r + 23 * stds[0] ** 2 * moments.mu_b)

    shared = scheme.stds(32, 4096, 20, 3)
    assert shared[0] == shared[1]
    assert layer_scale(shared) == pytest.approx(layer_scale(full.stds(32, 4096, 20, 3)), rel=1e-12)
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(512, 32, generator=generator) * 2 - 1
    measured = []
    for each in (scheme, full):
        layer = KANLayer(32, 4096, grid_size=20, backend="torch")
        each.apply(layer, generator=generator)
        with torch.no_grad():
            measured.append(layer(x).square().mean().item())
    assert measured[0] == pytest.approx(measured[1], rel=0.05)


def test_zero_spline_is_the_baseline_residual_with_splines_off() -> None:
    layers = [KANLayer(8, 6, grid_size=5) for _ in range(2)]
    for layer, name in zip(layers, ("baseline", "zero_spline")):
        InitScheme(name).apply(layer, generator=torch.Generator().manual_seed(3))
    assert torch.equal(layers[0].residual_weight, layers[1].residual_weight)
    assert torch.equal(layers[1].spline_weight, torch.zeros(6, 8, 8))


def test_labels_name_the_scheme_and_its_ablations() -> None:
    assert InitScheme("glorot").label == "glorot"
    assert InitScheme("power", alpha=0.25, beta=1.75, split=False).label == "power(0.25,1.75)/no_split"
    assert InitScheme("glorot", moments=False, split=False).label == "glorot/no_moments/no_split"
