import numpy as np
import pytest

from common.running_mean_std import RunningMeanStd


def test_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 3))
    rms = RunningMeanStd(epsilon=1e-8, shape=(3,))
    for chunk in np.array_split(data, 7):
        rms.update(chunk)
    np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-6)
    np.testing.assert_allclose(rms.std, data.std(axis=0), rtol=1e-6)
    assert rms.count == pytest.approx(1000, abs=1e-6)


def test_update_from_moments_equals_update():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(50,)), rng.normal(5, 3, size=(70,))
    r1, r2 = RunningMeanStd(), RunningMeanStd()
    r1.update(a)
    r1.update(b)
    r2.update_from_moments(a.mean(), a.var(), len(a))
    r2.update_from_moments(b.mean(), b.var(), len(b))
    assert r1.mean == pytest.approx(r2.mean)
    assert r1.var == pytest.approx(r2.var)
    assert r1.mean.dtype == np.float64


@pytest.mark.parametrize("shape", [(3,), ()])
def test_one_sample_at_a_time_matches_numpy(shape):
    """The one-env path (a batch of one sample per step) gives the mean and variance of the whole stream."""
    rng = np.random.default_rng(2)
    data = rng.normal(3.0, 2.0, size=(500, *shape))
    rms = RunningMeanStd(epsilon=1e-8, shape=shape)
    for x in data:
        rms.update(x[None])
    np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-6)
    assert rms.count == pytest.approx(500, abs=1e-6)
    assert isinstance(rms.mean, np.ndarray) and rms.mean.shape == shape and rms.var.dtype == np.float64


def test_wrong_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="shape"):
        RunningMeanStd(shape=(2,)).update(np.zeros((4, 3)))
