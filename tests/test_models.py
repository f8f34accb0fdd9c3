import numpy as np
import pytest
import tensorflow as tf

from common.nn.models import (
    build_network,
    get_network_builder,
    register,
    registered_networks,
)


@pytest.mark.parametrize("kwargs", [{}, {"layer_norm": True, "activation": "relu", "num_layers": 3}, {"activation": "elu"}])
def test_mlp_numpy_mirror_matches_tf(kwargs):
    net = build_network("mlp", (3, 2), seed=0, **kwargs)
    x = np.random.default_rng(0).standard_normal((7, 3, 2)).astype(np.float32)
    np.testing.assert_allclose(net(x).numpy(), net.numpy_forward(x, net.numpy_params()), atol=1e-5)
    assert net.output_dim == 64 and not net.recurrent


def test_same_seed_same_weights():
    a = build_network("mlp", (4,), seed=3).numpy_params()
    b = build_network("mlp", (4,), seed=3).numpy_params()
    c = build_network("mlp", (4,), seed=4).numpy_params()
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize(
    "name,shape,kwargs,dim",
    [("cnn", (84, 84, 4), {}, 512), ("cnn_small", (84, 84, 4), {}, 128), ("conv_only", (84, 84, 4), {}, 7 * 7 * 64),
     ("impala_cnn", (64, 64, 3), {}, 256)],
)
def test_conv_networks_shapes(name, shape, kwargs, dim):
    net = build_network(name, shape, seed=0, **kwargs)
    out = net(np.zeros((2,) + shape, np.float32))
    assert out.shape == (2, dim) and net.output_dim == dim


@pytest.mark.parametrize("convs", [[(8, 4, 1), (6, 2, 1)], [(5, 3, 2)]])
def test_board_cnn_numpy_mirror_matches_tensorflow(convs):
    net = build_network("board_cnn", (6, 7, 2), seed=1, convs=convs, num_hidden=12)
    for var in net.variables:
        var.assign(np.random.default_rng(0).normal(size=var.shape).astype(np.float32))
    x = np.random.default_rng(1).integers(0, 2, (9, 6, 7, 2)).astype(np.float32)
    assert net.has_numpy_mirror and net.output_dim == 12
    np.testing.assert_allclose(net.numpy_forward(x), net(x).numpy(), rtol=1e-5, atol=1e-4)
    assert not build_network("cnn_small", (84, 84, 4), seed=0).has_numpy_mirror  # Atari frames act in TF


def test_lstm_resets_state_and_carries_it():
    net = build_network("lstm", (3,), seed=0, nlstm=8)
    x = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
    s0 = net.initial_state(2)
    out, s = net(x, s0, np.zeros((4, 2)))
    assert out.shape == (4, 2, 8) and s.shape == (2, 16)
    # running the sequence in two halves with the carried state gives the same result
    o1, s1 = net(x[:2], s0, np.zeros((2, 2)))
    o2, _ = net(x[2:], s1, np.zeros((2, 2)))
    np.testing.assert_allclose(np.concatenate([o1, o2]), out.numpy(), atol=1e-6)
    # a reset at step 2 makes the second half independent of the first
    resets = np.zeros((4, 2))
    resets[2] = 1
    o3, _ = net(x, s0 + 5.0, resets)
    o4, _ = net(x[2:], s0, np.zeros((2, 2)))
    np.testing.assert_allclose(o3.numpy()[2:], o4.numpy(), atol=1e-6)


def test_registry_custom_network_and_errors():
    @register("my_test_net")
    def my_net(width=5):
        def factory(input_shape):
            m = tf.Module()
            m.w = tf.Variable(tf.ones([int(np.prod(input_shape)), width]))
            m.output_dim, m.recurrent, m.state_size = width, False, 0
            return m

        return factory

    assert "my_test_net" in registered_networks()
    assert get_network_builder("my_test_net") is my_net
    assert build_network("my_test_net", (2,), width=3).output_dim == 3
    with pytest.raises(ValueError, match="unknown network 'nope'; known: .*mlp"):
        get_network_builder("nope")
    with pytest.raises(ValueError, match="bad keyword arguments for network"):
        build_network("mlp", (2,), nonsense=1)
    with pytest.raises(ValueError, match="unknown activation"):
        build_network("mlp", (2,), activation="swishy")
    with pytest.raises(ValueError, match="image observations"):
        build_network("cnn", (4,))


def test_mlp_without_orthogonal_init_draws_weights_and_biases_as_pytorch_does():
    net = build_network("mlp", (10,), seed=0, num_hidden=[50, 40], ortho_init=False)
    for layer, fan_in in zip(net.layers, (10, 50)):
        w, b = layer.w.numpy(), layer.b.numpy()
        bound = 1 / np.sqrt(fan_in)
        assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
        assert np.abs(w).max() > 0.8 * bound and np.abs(b).max() > 0.5 * bound  # spread over U(-bound, bound)
        assert abs(float(w.std()) - bound / np.sqrt(3)) < 0.1 * bound
    orthogonal = build_network("mlp", (10,), seed=0, num_hidden=[50, 40])
    assert not orthogonal.layers[0].b.numpy().any()


def test_actor_critic_heads_follow_the_networks_ortho_init():
    import gymnasium as gym

    from common.nn.policies import ActorCritic

    obs, act = gym.spaces.Box(-1, 1, (5,)), gym.spaces.Box(-1, 1, (3,))
    plain = ActorCritic(obs, act, network="mlp", seed=1, num_hidden=32)
    torch_like = ActorCritic(obs, act, network="mlp", seed=1, num_hidden=32, ortho_init=False)
    assert np.abs(plain.pi.w.numpy()).max() < 0.02 and not plain.pi.b.numpy().any()  # gain 0.01, zero bias
    bound = 1 / np.sqrt(32)
    for head in (torch_like.pi, torch_like.vf):
        assert 0.5 * bound < np.abs(head.w.numpy()).max() <= bound and head.b.numpy().any()


@pytest.mark.parametrize("name,shape,kwargs", [("cnn", (84, 84, 4), {}), ("cnn_small", (84, 84, 4), {}),
                                               ("conv_only", (84, 84, 4), {}), ("impala_cnn", (32, 32, 3), {}),
                                               ("mlp", (17,), {"num_hidden": 256}),
                                               ("mlp", (17,), {"num_hidden": 64, "layer_norm": True})])
def test_bfloat16_compute_keeps_float32_weights_and_stays_close_to_float32(name, shape, kwargs):
    from common.errors import ConfigError

    full = build_network(name, shape, seed=0, **kwargs)
    half = build_network(name, shape, seed=0, compute_dtype="bfloat16", **kwargs)
    assert all(v.dtype == tf.float32 for v in half.trainable_variables)
    x = np.random.default_rng(0).uniform(0, 1, (3,) + shape).astype(np.float32)
    with tf.GradientTape() as tape:
        out = half(x)
        loss = tf.reduce_sum(out)
    grads = tape.gradient(loss, half.trainable_variables)
    assert out.dtype == tf.float32 and all(g is not None and g.dtype == tf.float32 for g in grads)
    expected = full(x).numpy()
    assert not np.array_equal(out.numpy(), expected)  # it did compute in bfloat16 (8-bit mantissa) ...
    scale = np.abs(expected).max()
    assert np.abs(out.numpy() - expected).max() < 0.05 * scale  # ... and stayed close
    with pytest.raises(ConfigError, match="compute_dtype must be one of float32, bfloat16, auto"):
        get_network_builder(name)(compute_dtype="float16")


def test_auto_compute_dtype_follows_the_cpu(monkeypatch):
    from common.nn import networks

    for has_bf16, dtype in ((True, tf.bfloat16), (False, tf.float32)):
        monkeypatch.setattr(networks, "cpu_has_bfloat16", lambda has=has_bf16: has)
        assert build_network("cnn_small", (84, 84, 4), seed=0, compute_dtype="auto").compute_dtype == dtype
