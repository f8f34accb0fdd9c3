"""Run under `mpiexec -n K`: the gradients ppo2 and ddpg apply are the mean of the per-rank gradients.

Every rank builds the same small models (weights broadcast from rank 0 as learn() does) and trains on
data derived from its rank, so any rank can rebuild every rank's data. mpi_util.allreduce_mean is
wrapped to record what each call received and returned. Checks, failing with AssertionError:
  1. ppo2, one minibatch: rank 0 recomputes each rank's gradient on its own with MPI off; their mean
     equals what the optimizer applied (Adam's first moment after one step is (1 - beta1) * gradient).
  2. ppo2, 2 epochs x 3 minibatches in the one fused tf.function call: exactly 6 allreduces on every
     rank, each returning the mean of what all ranks sent in the same call; weights bit-identical.
  3. ddpg, 4 fused gradient steps: 8 allreduces (critic and actor per step), the same mean property,
     and weights plus return statistics (normalize_returns with Pop-Art) bit-identical.
Prints "grad average ok" on rank 0.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import tensorflow as tf
from gymnasium import spaces

from algos.ddpg.model import DDPGModel
from algos.ppo2.model import PPO2Model
from common.mpi import mpi_util

R, K = mpi_util.rank(), mpi_util.size()
OBS, ACT = spaces.Box(-10.0, 10.0, (4,), np.float32), spaces.Discrete(3)
N = 48
CALLS: list[tuple[np.ndarray, np.ndarray]] = []
_real_allreduce_mean = mpi_util.allreduce_mean


def recording_allreduce_mean(x: np.ndarray) -> np.ndarray:
    out = _real_allreduce_mean(x)
    CALLS.append((np.array(x, copy=True), np.array(out, copy=True)))
    return out


mpi_util.allreduce_mean = recording_allreduce_mean  # the models look it up at call time


def broadcast(model) -> None:
    arrays = model.get_arrays()
    model.set_arrays(dict(zip(arrays, mpi_util.broadcast_arrays(list(arrays.values())))))


def identical_on_all_ranks(arrays: dict) -> bool:
    raw = np.concatenate([np.ascontiguousarray(arrays[k]).reshape(-1).view(np.uint8) for k in sorted(arrays)])
    return all(np.array_equal(raw, other) for other in mpi_util.get_comm().allgather(raw))


def ppo_model(seed: int) -> PPO2Model:
    return PPO2Model(OBS, ACT, network="mlp", network_kwargs={"num_layers": 2, "num_hidden": 16}, seed=seed,
                     max_grad_norm=None, ent_coef=0.01)


def ppo_data(r: int, model: PPO2Model) -> list[np.ndarray]:
    """Rank r's rollout: obs, actions, returns, values and the neglogps of the (initial) policy."""
    rng = np.random.default_rng(100 + r)
    obs = rng.normal(size=(N, 4)).astype(np.float32) * (r + 1)
    actions = rng.integers(0, 3, N).astype(np.int64)
    returns = rng.normal(size=N).astype(np.float32) + r
    values = rng.normal(size=N).astype(np.float32)
    neglogps = model.policy.evaluate(obs, actions)[0].numpy().astype(np.float32)
    return [obs, actions, returns, values, neglogps]


def minibatch_grad(model: PPO2Model, data: list[np.ndarray], idx: np.ndarray) -> np.ndarray:
    grads, _ = model._minibatch_grads(tf.constant(0.2), *[tf.gather(a, idx) for a in data], None, None)  # clip range 0.2
    return np.concatenate([g.numpy().ravel() for g in grads])


def check_mean_property(calls, expected_calls: int, what: str) -> None:
    assert len(calls) == expected_calls, f"{what}: rank {R} made {len(calls)} allreduces, expected {expected_calls}"
    every = mpi_util.get_comm().allgather([c[0] for c in calls])
    for k, (_, out) in enumerate(calls):
        mean = np.mean([per_rank[k] for per_rank in every], axis=0, dtype=np.float64)
        np.testing.assert_allclose(out, mean, rtol=1e-6, atol=1e-7, err_msg=f"{what}: allreduce call {k}")


def check_ppo2() -> None:
    model = ppo_model(seed=R)  # different initial weights per rank until the broadcast
    broadcast(model)
    initial = model.get_arrays()
    data = ppo_data(R, model)
    idx0 = np.random.default_rng(7).permutation(N)[:16].astype(np.int32)
    CALLS.clear()
    model.train(1e-3, 0.2, *data, idx0[None, :])
    check_mean_property(CALLS, 1, "ppo2 one minibatch")
    applied = model.optimizer.m.numpy() / (1.0 - model.optimizer.beta1)  # flat first moment after one step
    if R == 0:  # recompute every rank's gradient separately, MPI off, from the same initial weights
        ref = ppo_model(seed=0)
        ref.use_mpi = False
        ref.set_arrays(initial)
        grads = [minibatch_grad(ref, ppo_data(r, ref), idx0) for r in range(K)]
        expected = np.mean(grads, axis=0)
        assert not np.allclose(grads[0], grads[-1]), "ranks' gradients should differ (different data)"
        np.testing.assert_allclose(applied, expected, rtol=1e-4, atol=1e-6,
                                   err_msg="applied gradient != mean of per-rank gradients")
    CALLS.clear()
    idx = np.stack([np.random.default_rng(10 + e).permutation(N) for e in range(2)]).reshape(6, -1)
    model.train(1e-3, 0.2, *data, idx.astype(np.int32))
    check_mean_property(CALLS, 6, "ppo2 2 epochs x 3 minibatches")
    assert identical_on_all_ranks(model.get_arrays()), "ppo2 weights differ across ranks"


def check_ddpg() -> None:
    box = spaces.Box(-2.0, 2.0, (2,), np.float32)
    model = DDPGModel(OBS, box, network="mlp", network_kwargs={"num_hidden": [16, 16]}, seed=R,
                      normalize_observations=True, normalize_returns=True, popart=True)
    broadcast(model)
    rng = np.random.default_rng(200 + R)
    model.update_obs_stats(rng.normal(size=(20, 4)) * (R + 1))
    steps, batch = 4, 8
    data = {"obs": rng.normal(size=(steps, batch, 4)), "actions": rng.uniform(-1, 1, (steps, batch, 2)),
            "rewards": rng.normal(size=(steps, batch)) * (R + 1), "next_obs": rng.normal(size=(steps, batch, 4)),
            "dones": (rng.random((steps, batch)) < 0.2)}
    data = {k: v.astype(np.float32) for k, v in data.items()}
    CALLS.clear()
    model.train(data)
    check_mean_property(CALLS, 2 * steps, "ddpg 4 gradient steps")
    assert identical_on_all_ranks(model.get_arrays()), "ddpg weights or statistics differ across ranks"


if __name__ == "__main__":
    with mpi_util.abort_on_failure():
        assert K > 1, "run under mpiexec -n 2 (or more)"
        check_ppo2()
        check_ddpg()
        if R == 0:
            print("grad average ok", flush=True)
