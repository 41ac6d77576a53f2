"""The seed-level statistics every study's tables use: the t interval and the ``mean ± sd`` cells."""

import math

import pytest
from scipy import stats

from litlab.core.stats import format_mean_sd, mean_and_half_width, mean_and_sd


def test_half_width_is_the_student_t_interval_of_the_mean() -> None:
    values = [1.0, 2.0, 4.0, 7.0]
    mean, half = mean_and_half_width(values)
    sem = stats.sem(values)
    assert mean == pytest.approx(3.5)
    assert half == pytest.approx(stats.t.ppf(0.975, 3) * sem)
    assert math.isnan(mean_and_half_width([5.0])[1])


def test_mean_and_sd_is_the_sample_sd_and_zero_for_one_value() -> None:
    assert mean_and_sd([1.0, 3.0]) == pytest.approx((2.0, math.sqrt(2.0)))
    assert mean_and_sd([4.0]) == (4.0, 0.0)


@pytest.mark.parametrize(
    ("values", "digits", "cell"),
    [
        ([1.0, 3.0], 2, "2.00 ± 1.41"),
        ([0.12345, 0.12355], 4, "0.1235 ± 0.0001"),
        ([4.0], 3, "4.000"),  # one seed: no spread to report
        ([4.0, math.nan], 2, "4.00"),  # a fit that did not record the value is left out
        ([], 2, "–"),
        ([math.nan], 2, "–"),
    ],
)
def test_format_mean_sd_cells(values: list[float], digits: int, cell: str) -> None:
    assert format_mean_sd(values, digits=digits) == cell
