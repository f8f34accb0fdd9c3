"""Exploration noise: statistics of normal and OU noise, per-env resets, noise strings, param-noise adaption."""
import numpy as np
import pytest

from common.noise import (
    AdaptiveParamNoiseSpec,
    NoiseTypeError,
    NormalActionNoise,
    OrnsteinUhlenbeckActionNoise,
    SumActionNoise,
    parse_noise_type,
)


def test_normal_noise_mean_std_and_shape():
    noise = NormalActionNoise(np.array([0.5, -1.0]), np.array([0.2, 0.05]), n_envs=3, rng=np.random.default_rng(0))
    samples = np.stack([noise.sample() for _ in range(20000)])
    assert samples.shape == (20000, 3, 2) and samples.dtype == np.float32
    np.testing.assert_allclose(samples.mean(axis=(0, 1)), [0.5, -1.0], atol=0.005)
    np.testing.assert_allclose(samples.std(axis=(0, 1)), [0.2, 0.05], rtol=0.02)
    # envs draw independent noise
    assert abs(np.corrcoef(samples[:, 0, 0], samples[:, 1, 0])[0, 1]) < 0.03


def test_ou_noise_stationary_variance_and_autocorrelation():
    theta, dt, sigma = 1.0, 0.1, 0.3
    noise = OrnsteinUhlenbeckActionNoise(np.zeros(1), np.full(1, sigma), n_envs=4000, theta=theta, dt=dt,
                                         rng=np.random.default_rng(1))
    for _ in range(100):  # burn in: (1 - theta dt)^100 ~ 3e-5
        noise.sample()
    a = noise.sample()[:, 0].astype(np.float64)
    b = noise.sample()[:, 0].astype(np.float64)
    decay = 1.0 - theta * dt
    stationary_var = sigma**2 * dt / (1.0 - decay**2)
    assert np.var(a) == pytest.approx(stationary_var, rel=0.08)
    assert np.corrcoef(a, b)[0, 1] == pytest.approx(decay, abs=0.02)


def test_ou_noise_reverts_to_mu():
    noise = OrnsteinUhlenbeckActionNoise(np.full(2, 3.0), np.zeros(2), n_envs=2, theta=0.5, dt=1.0)
    for _ in range(60):
        x = noise.sample()
    np.testing.assert_allclose(x, 3.0, atol=1e-6)


def test_ou_reset_only_the_given_envs():
    noise = OrnsteinUhlenbeckActionNoise(np.zeros(2), np.full(2, 0.5), n_envs=3, rng=np.random.default_rng(2))
    for _ in range(10):
        noise.sample()
    before = noise.x.copy()
    assert np.all(before != 0)
    noise.reset([0])
    np.testing.assert_array_equal(noise.x[0], 0.0)
    np.testing.assert_array_equal(noise.x[1:], before[1:])
    noise.reset()
    np.testing.assert_array_equal(noise.x, 0.0)


@pytest.mark.parametrize(
    "text, action_cls, param_stddev",
    [
        ("none", None, None),
        (None, None, None),
        ("normal_0.2", NormalActionNoise, None),
        ("ou_0.3", OrnsteinUhlenbeckActionNoise, None),
        ("adaptive-param_0.2", None, 0.2),
        ("adaptive-param_0.1, ou_0.2", OrnsteinUhlenbeckActionNoise, 0.1),
        ("normal_0.1,ou_0.2", SumActionNoise, None),
    ],
)
def test_parse_noise_type(text, action_cls, param_stddev):
    action, param = parse_noise_type(text, (2,), n_envs=3, rng=np.random.default_rng(0))
    if action_cls is None:
        assert action is None
    else:
        assert type(action) is action_cls and action.sample().shape == (3, 2)
    if param_stddev is None:
        assert param is None
    else:
        assert param.current_stddev == param.desired_action_stddev == param_stddev


def test_parse_noise_sigma_is_used():
    action, _ = parse_noise_type("normal_0.3", (1,), n_envs=1, rng=np.random.default_rng(0))
    assert np.std([action.sample() for _ in range(5000)]) == pytest.approx(0.3, rel=0.05)


@pytest.mark.parametrize("text", ["gauss_0.2", "normal", "normal_x", "ou_-1", "adaptive-param_0.1,adaptive-param_0.2"])
def test_parse_noise_type_errors_are_one_line(text):
    with pytest.raises(NoiseTypeError) as info:
        parse_noise_type(text, (2,))
    msg = str(info.value)
    assert "\n" not in msg and "noise" in msg and ("adaptive-param" in msg or text in msg)


def test_adaptive_param_noise_adapt_direction():
    spec = AdaptiveParamNoiseSpec(initial_stddev=0.2, desired_action_stddev=0.1, adoption_coefficient=1.01)
    spec.adapt(0.5)
    assert spec.current_stddev == pytest.approx(0.2 / 1.01)
    spec.adapt(0.01)
    spec.adapt(0.01)
    assert spec.current_stddev == pytest.approx(0.2 * 1.01)
    with pytest.raises(ValueError):
        AdaptiveParamNoiseSpec(adoption_coefficient=1.0)
