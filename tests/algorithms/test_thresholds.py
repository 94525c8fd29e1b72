"""The threshold beta(t, delta) and the calibration function C against the values in docs/theory notes."""

import math

import numpy as np
import pytest

from algorithms import thresholds as th


@pytest.mark.parametrize(
    "x, expected",
    [
        (0.5, 8.0148),
        (1.0, 9.1045),
        (math.log(10), 11.3503),
        (math.log(100), 14.6623),
        (10.0, 21.4468),
        (20.0, 32.9148),
        (50.0, 65.1335),
        (100.0, 116.9713),
    ],
)
def test_calibration_C_matches_reference_values(x, expected):
    assert th.calibration_C(x) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize("t, expected", [(10, 47.90), (100, 57.37), (10**4, 66.23)])
def test_beta_matches_reference_values(t, expected):
    assert th.beta(t, 0.01, 5) == pytest.approx(expected, abs=5e-3)


@pytest.mark.parametrize("x", [1.0, 1.0 + 1e-12, 1.0 + 1e-9, 1.001, 1.5, 3.0, 50.0, 699.0, 700.0, 745.0, 800.0, 1e6])
def test_h_inverse_inverts_h_including_numerical_edges(x):
    u = th.h_inverse(x)
    assert u >= 1.0
    assert th.h(u) == pytest.approx(x, rel=1e-12, abs=1e-12)


def test_h_tilde_is_continuous_at_the_branch_point():
    z = 1.5
    x0 = th.h(1.0 / math.log(z))
    below = th.h_tilde(z, x0 - 1e-9)
    above = th.h_tilde(z, x0 + 1e-9)
    assert above == pytest.approx(below, abs=1e-6)


def test_h_tilde_is_the_minimum_over_lambda():
    z = 1.5
    for x in [1.2, 1.6, 2.0, 5.0, 20.0]:
        lam = np.linspace(1.0 + 1e-9, z, 200001)
        brute = np.min(lam * (x - np.log(np.log(lam))))
        assert th.h_tilde(z, x) == pytest.approx(brute, rel=1e-6)


def test_shortcut_is_below_C_for_small_x():
    # the often-quoted x + 4 log(1 + x + sqrt(2x)) is not a safe substitute below 15
    for x in [0.5, 1, 5, 10]:
        assert x + 4 * math.log(1 + x + math.sqrt(2 * x)) < th.calibration_C(x)


def test_beta_guards_small_t_and_grows():
    assert math.isfinite(th.beta(0, 0.1, 3))
    assert th.beta(1, 0.1, 3) == th.beta(2, 0.1, 3)  # floored at L - 1
    assert th.beta(1000, 0.1, 3) > th.beta(100, 0.1, 3)
    assert th.beta(100, 0.001, 3) > th.beta(100, 0.1, 3)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, float("nan")])
def test_beta_rejects_bad_delta(bad):
    with pytest.raises(ValueError, match="delta"):
        th.beta(10, bad, 3)


def test_calibration_rejects_negative():
    with pytest.raises(ValueError):
        th.calibration_C(-1.0)


def test_hoeffding_radii_formulas():
    n = np.array([1, 10, 100])
    r = th.hoeffding_radius_dctac(n, 0.05, 4)
    expected = np.sqrt(np.log(2 * math.pi**2 * n**2 * 6 / (6 * 0.05)) / (2 * n))
    np.testing.assert_allclose(r, expected)
    r2 = th.hoeffding_radius_dpca(10, 0.05, 4)
    assert r2 == pytest.approx(math.sqrt(math.log(2 * 100 * 16 / 0.05) / 20))
    with pytest.raises(ValueError):
        th.hoeffding_radius_dpca(0, 0.05, 4)
