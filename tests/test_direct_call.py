"""DirectCall runs a tf.function's concrete functions directly: same results as the ordinary call."""
import numpy as np
import tensorflow as tf
from gymnasium import spaces

from algos.a2c.model import A2CModel
from common.nn.direct_call import DirectCall


def _counter_function():
    total = tf.Variable(0.0)

    def add(x, scale, extra=None):
        out = tf.reduce_sum(x) * scale
        if extra is not None:
            out += tf.reduce_sum(extra)
        total.assign_add(out)
        return out, total.read_value()

    return total, tf.function(add, reduce_retracing=True)


def test_direct_call_matches_the_ordinary_call_and_updates_variables():
    total, fn = _counter_function()
    call = DirectCall(fn)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out, after = call(x, np.float32(2.0))
    assert out.numpy() == 30.0 and after.numpy() == 30.0 and total.numpy() == 30.0
    out, after = call(x, np.float32(1.0), np.ones(4, np.float32))  # another signature: its own concrete function
    assert out.numpy() == 19.0 and after.numpy() == 49.0
    out, _ = call(np.ones((5, 3), np.float32), np.float32(1.0))  # another shape
    assert out.numpy() == 15.0
    assert len(call._concrete) == 3


def test_python_values_take_the_ordinary_call():
    total, fn = _counter_function()
    out, _ = DirectCall(fn)(np.ones((2, 2), np.float32), 3.0)
    assert out.numpy() == 12.0 and total.numpy() == 12.0


def test_an_update_refreshes_numpy_acting_from_the_same_call():
    model = A2CModel(spaces.Box(-1.0, 1.0, (4,), np.float32), spaces.Discrete(2), seed=0)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(40, 4)).astype(np.float32)
    before = model.policy.step(obs)[0]
    model.train(0.05, obs, rng.integers(0, 2, 40), rng.normal(size=40).astype(np.float32), np.zeros(40, np.float32))
    params, values, _ = model.policy.step(obs)  # numpy mirror
    tf_params, tf_values, _ = model.policy.forward(obs)
    assert not np.allclose(params, before)
    np.testing.assert_allclose(params, tf_params.numpy(), atol=1e-5)
    np.testing.assert_allclose(values, tf_values.numpy(), atol=1e-5)
