"""Milliseconds per update of a2c and trpo on CartPole-sized batches, for the speed choices of their models.

    .venv/bin/python bench/on_policy_update.py [--repeats 200]

a2c (40 samples: 8 envs x 5 steps): the one call per update (``compile_update``: the concrete function called
directly, the acting weights returned by the same call) with and without XLA (the first call's CPU seconds
beside the per-call time), against the polymorphic
``tf.function`` call followed by one read per weight that it replaced.
trpo (1024 samples, the CartPole-v1 entry's settings): the fused update (CG solve, line search and value
epochs in one tf.function call) with and without XLA, against a Python-driven update whose conjugate
gradient runs in numpy and calls a tf.function per Fisher-vector product and per line-search trial.
ppo2 (the CartPole-v1 entry's update: 256 samples, 20 epochs): what XLA costs at the first call and saves per
update, in CPU time. Prints the median over ``repeats`` calls after a warm-up.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
from gymnasium import spaces

if TYPE_CHECKING:
    from algos.trpo.model import TRPOModel

OBS, ACT = spaces.Box(-5.0, 5.0, (4,), np.float32), spaces.Discrete(2)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn()`` in ms, after 5 warm-up calls."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def a2c(repeats: int) -> None:
    import tensorflow as tf

    from algos.a2c.model import A2CModel

    rng = np.random.default_rng(0)
    obs = rng.normal(size=(40, 4)).astype(np.float32)
    acts, ret, val = rng.integers(0, 2, 40), rng.normal(size=40).astype(np.float32), np.zeros(40, np.float32)
    for jit in (True, False):
        model = A2CModel(OBS, ACT, seed=0)
        model._train = model.compile_update(model._train_graph, jit)
        cpu = time.process_time()
        model.train(7e-4, obs, acts, ret, val)
        first = time.process_time() - cpu
        ms = median_ms(lambda m=model: m.train(7e-4, obs, acts, ret, val), repeats)
        print(f"a2c update, 40 samples, one direct call (compile_update), XLA {'on ' if jit else 'off'}: "
              f"first call {first:.2f} s CPU, then {ms:.3f} ms")
    # the dispatch it replaced: the polymorphic tf.function call, then one read per acting weight
    model = A2CModel(OBS, ACT, seed=0)
    poly = tf.function(model._train_graph, reduce_retracing=True, jit_compile=True)
    empty = np.zeros((0,), np.float32)

    def polymorphic_update() -> None:
        poly(np.float32(7e-4), obs, acts, ret, val, empty, empty, None).numpy()
        model.policy.set_mirror([v.numpy() for v in model.policy.mirror_variables()])

    ms = median_ms(polymorphic_update, repeats)
    print(f"a2c update, 40 samples, polymorphic tf.function call + a read per weight, XLA on : {ms:.3f} ms")


def ppo2(repeats: int) -> None:
    """XLA's price and gain on ppo2's CartPole update (the shipped entry: 256 samples, 20 epochs of one
    minibatch): CPU seconds of the first call (trace + compile) and CPU ms per later update, interleaved."""
    from algos.ppo2.model import PPO2Model

    rng = np.random.default_rng(0)
    n = 256
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    acts, ret = rng.integers(0, 2, n), rng.normal(size=n).astype(np.float32)
    val, nlp = np.zeros(n, np.float32), np.full(n, 0.69, np.float32)
    idx = np.stack([rng.permutation(n) for _ in range(20)]).astype(np.int32)
    models, first, ms = {}, {}, {True: [], False: []}
    for jit in (True, False):
        t = time.process_time()
        model = PPO2Model(OBS, ACT, seed=0)
        model._train = model.compile_update(model._train_graph, jit)
        model.train(1e-3, 0.2, obs, acts, ret, val, nlp, idx)
        first[jit], models[jit] = time.process_time() - t, model
    for _ in range(max(repeats // 5, 3)):
        for jit in (True, False):
            t = time.process_time()
            for _ in range(5):
                models[jit].train(1e-3, 0.2, obs, acts, ret, val, nlp, idx)
            ms[jit].append((time.process_time() - t) / 5 * 1e3)
    for jit in (True, False):
        print(f"ppo2 update, {n} samples x 20 epochs, XLA {'on ' if jit else 'off'}: first call {first[jit]:.2f} s CPU, "
              f"then {statistics.median(ms[jit]):.2f} ms CPU per update")


def python_driven_trpo_update(model: TRPOModel, obs: np.ndarray, actions: np.ndarray, advs: np.ndarray,
                              returns: np.ndarray, vf_idx: np.ndarray, fns: tuple[Callable[..., Any], ...]) -> None:
    """The same update with a numpy conjugate gradient: one tf.function call per Fisher-vector product,
    per line-search trial and for the value epochs."""
    from algos.trpo.model import KL_SLACK, LINE_SEARCH_STEPS
    from common.nn.tf_util import flatten_grads

    prepare, fvp, losses, assign, value_epochs = fns
    advs = (advs - advs.mean()) / (advs.std() + 1e-8)
    old, old_nlp, grad, before = (t.numpy() for t in prepare(obs, actions, advs))
    theta0 = flatten_grads(model.pi_vars, model.pi_vars).numpy()
    x, r, p = np.zeros_like(grad), grad.copy(), grad.copy()
    rdotr = r @ r
    for _ in range(model.cg_iters):
        if rdotr < 1e-10:
            break
        z = fvp(p, obs, old).numpy()
        alpha = rdotr / (p @ z)
        x += alpha * p
        r -= alpha * z
        new = r @ r
        p, rdotr = r + new / rdotr * p, new
    shs = 0.5 * x @ fvp(x, obs, old).numpy()
    full = x / np.sqrt(max(shs, 1e-20) / model.max_kl)
    fraction = 1.0
    for _ in range(LINE_SEARCH_STEPS):
        assign(theta0 + fraction * full)
        trial = losses(obs, actions, old, old_nlp, advs).numpy()
        if np.all(np.isfinite(trial)) and trial[1] <= KL_SLACK * model.max_kl and trial[0] >= before[0]:
            break
        fraction *= 0.5
    else:
        assign(theta0)
    value_epochs(obs, returns, vf_idx)
    model.policy.sync()


def trpo(repeats: int) -> None:
    import tensorflow as tf

    from algos.hyperparameters import shipped_entry
    from algos.trpo.model import TRPOModel
    from common.nn.tf_util import assign_flat, flatten_grads

    entry = shipped_entry("trpo", env_id="CartPole-v1")
    settings = {k: entry[k] for k in ("max_kl", "cg_iters", "cg_damping", "fvp_subsample", "vf_stepsize")}
    rng = np.random.default_rng(0)
    n, mb = 1024, entry["vf_batch_size"]
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    acts, advs = rng.integers(0, 2, n), rng.normal(size=n).astype(np.float32)
    ret = rng.normal(size=n).astype(np.float32)
    idx = np.concatenate([rng.permutation(n) for _ in range(entry["vf_iters"])]).reshape(-1, mb).astype(np.int32)
    for jit in (False, True):
        model = TRPOModel(OBS, ACT, seed=0, **settings)
        model._train = model.compile_update(model._train_graph, jit)
        cpu = time.process_time()
        model.train(obs, acts, advs, ret, idx)
        first = time.process_time() - cpu
        ms = median_ms(lambda m=model: m.train(obs, acts, advs, ret, idx), repeats)
        print(f"trpo update, {n} samples, fused (one tf.function call), XLA {'on ' if jit else 'off'}: "
              f"first call {first:.2f} s CPU, then {ms:.2f} ms")
    model = TRPOModel(OBS, ACT, seed=0, **settings)

    def prepare(o: tf.Tensor, a: tf.Tensor, adv: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        old = model.policy.policy_params(o)
        nlp = model.policy.pdtype.tf_neglogp(old, a)
        with tf.GradientTape() as tape:
            losses = model._losses(o, a, old, nlp, adv, None)
            surrogate = losses[0]
        return old, nlp, flatten_grads(tape.gradient(surrogate, model.pi_vars), model.pi_vars), losses

    fns = (tf.function(prepare), tf.function(lambda v, o, old: model._fvp(v, o, old, None)),
           tf.function(lambda *a: model._losses(*a, None)),
           tf.function(lambda flat: assign_flat(model.pi_vars, flat)), tf.function(model._value_epochs))
    ms = median_ms(lambda: python_driven_trpo_update(model, obs, acts, advs, ret, idx, fns), repeats)
    print(f"trpo update, {n} samples, Python-driven CG and line search (a call per product/trial): {ms:.2f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args()
    from common.nn.tf_util import configure_threads

    configure_threads()
    a2c(args.repeats)
    ppo2(args.repeats)
    trpo(max(args.repeats // 10, 5))


if __name__ == "__main__":
    main()
