import numpy as np
import pytest
import tensorflow as tf
from gymnasium import spaces

from common.nn.distributions import make_pdtype, to_env_actions

SPACES = [
    spaces.Discrete(4),
    spaces.Box(-1, 1, (3,), np.float32),
    spaces.MultiDiscrete([3, 2, 4]),
    spaces.MultiBinary(5),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_numpy_and_tf_agree(space):
    pd = make_pdtype(space)
    rng = np.random.default_rng(0)
    params = rng.standard_normal((6, pd.param_size)).astype(np.float32)
    acts = pd.np_sample(params, rng)
    assert acts.shape == (6,) + pd.action_shape
    assert all(space.contains(to_env_actions(a, space).astype(space.dtype)) for a in acts) or isinstance(
        space, spaces.Box
    )
    np.testing.assert_allclose(pd.np_neglogp(params, acts), pd.tf_neglogp(params, acts).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(pd.np_mode(params), pd.tf_mode(params).numpy())
    assert pd.tf_entropy(params).shape == (6,)


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_sample_with_neglogp_is_a_sample_and_its_neglogp(space):
    """The rollout's one call draws what ``np_sample`` draws from the same generator state, with its neglogp."""
    pd = make_pdtype(space)
    params = np.random.default_rng(3).standard_normal((6, pd.param_size)).astype(np.float32)
    acts = pd.np_sample(params, np.random.default_rng(4))
    both, neglogp = pd.np_sample_neglogp(params, np.random.default_rng(4))
    np.testing.assert_array_equal(both, acts)
    assert both.dtype == acts.dtype and neglogp.dtype == np.float32 and neglogp.shape == (6,)
    np.testing.assert_allclose(neglogp, pd.tf_neglogp(params, acts).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_kl_is_the_expected_log_ratio(space):
    """KL(p || q) = E_{a~p}[log p(a) - log q(a)], estimated from 40,000 samples of p; KL(p || p) = 0."""
    pd = make_pdtype(space)
    rng = np.random.default_rng(2)
    p, q = (rng.standard_normal((1, pd.param_size)).astype(np.float32) * 0.5 for _ in range(2))
    kl = float(pd.tf_kl(p, q).numpy()[0])
    many_p, many_q = np.repeat(p, 40000, 0), np.repeat(q, 40000, 0)
    acts = pd.np_sample(many_p, rng)
    estimate = float(np.mean(pd.np_neglogp(many_q, acts) - pd.np_neglogp(many_p, acts)))
    assert kl > 0.01 and kl == pytest.approx(estimate, abs=0.03)
    assert float(pd.tf_kl(p, p).numpy()[0]) == pytest.approx(0.0, abs=1e-6)


def test_categorical_sampling_matches_probabilities():
    pd = make_pdtype(spaces.Discrete(3))
    logits = np.log(np.array([[0.2, 0.5, 0.3]] * 20000, np.float32))
    acts = pd.np_sample(logits, np.random.default_rng(1))
    np.testing.assert_allclose(np.bincount(acts, minlength=3) / len(acts), [0.2, 0.5, 0.3], atol=0.015)
    ent = pd.tf_entropy(logits[:1]).numpy()[0]
    assert ent == pytest.approx(-(0.2 * np.log(0.2) + 0.5 * np.log(0.5) + 0.3 * np.log(0.3)), rel=1e-5)


def test_gaussian_neglogp_and_entropy_by_hand():
    pd = make_pdtype(spaces.Box(-1, 1, (2,), np.float32))
    params = np.array([[0.0, 1.0, np.log(2.0), 0.0]], np.float32)  # mean (0,1), std (2,1)
    a = np.array([[1.0, 1.0]], np.float32)
    expected = 0.5 * (0.5**2) + np.log(2.0) + np.log(2 * np.pi)
    assert pd.np_neglogp(params, a)[0] == pytest.approx(expected, rel=1e-5)
    assert pd.tf_entropy(tf.constant(params)).numpy()[0] == pytest.approx(np.log(2.0) + (np.log(2 * np.pi) + 1), rel=1e-5)


def test_box_actions_are_clipped_and_unsupported_space_raises():
    space = spaces.Box(-1, 1, (2,), np.float32)
    np.testing.assert_array_equal(to_env_actions(np.array([[3.0, -5.0]]), space), [[1.0, -1.0]])
    with pytest.raises(TypeError, match="unsupported action space"):
        make_pdtype(spaces.Dict({"a": spaces.Discrete(2)}))
