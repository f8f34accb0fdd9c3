"""DQN model: online, target and (optionally) averaged policy Q-functions (with optional distributional and
noisy heads), the fused training block, acting and saving."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf
from gymnasium import spaces

from algos.base import Model
from algos.deepq import distributional as dist_heads
from algos.deepq.qfunction import QFunction
from common.errors import ConfigError
from common.files.model_file import ModelFileError
from common.nn.direct_call import DirectCall
from common.nn.distributions import tf_masked_logits
from common.nn.obs_encoding import ObsEncoder
from common.nn.policy_export import PolicyGraph
from common.nn.tf_util import Adam, clip_by_global_norm, module_variables

if TYPE_CHECKING:
    from common.vec_env.base import VecObs

ALGORITHM = "deepq"


def huber(x: tf.Tensor, delta: float = 1.0) -> tf.Tensor:
    """Elementwise Huber loss: quadratic within ``delta`` of 0, linear beyond."""
    a = tf.abs(x)
    return tf.where(a < delta, 0.5 * tf.square(x), delta * (a - 0.5 * delta))


class DQNModel(Model):
    """Online Q-function, target Q-function, policy Q-function and Adam.

    ``train(batches)`` runs every gradient step of a block in ONE ``tf.function`` call (the batches are
    sampled in numpy beforehand, shape ``[steps, batch, ...]``) and returns the TD errors. Acting uses the
    numpy mirror of the network when it has one (mlp), else one TF call per step. Exploration (``act``) acts
    on the online network; the policy (``predict``, evaluation, ``--play``, export) on the policy network:
    the online network itself, or with ``policy_average_steps`` an exponential moving average of its weights.

    Args:
        observation_space, action_space: the env's spaces (action space must be Discrete).
        network, network_kwargs: the network under the Q head.
        hiddens, dueling, layer_norm: the head (see ``QFunction``).
        double_q: pick the next action with the online network, evaluate it with the target network.
        gamma: discount factor.
        max_grad_norm: global gradient-norm clip (None or 0: no clipping).
        seed: weight initialisation seed.
        hyperparameters: recorded in saved files.
        exploration_final_eps: exploration rate used by ``predict(..., deterministic=False)``.
        policy_average_steps: time constant, in gradient steps, of the moving average of the online weights
            that acts as the policy (each gradient step moves it ``1 / policy_average_steps`` of the way to the
            online weights); 0: the policy is the online network.
        jit_compile: compile the training block with XLA (mlp networks only: ppo2's convolutional updates ran
            many times slower under XLA's CPU convolutions). CartPole's block of 128 steps at batch 64:
            0.66 -> 0.51 ms per gradient step (bench/README.md, deepq design measurements).
        distributional: None, "c51" (``num_atoms`` on ``v_min``..``v_max``) or "qr" (``num_quantiles``); see
            ``distributional.py``. Acting, the policy and export take the greedy action of the expected value.
        noisy: factorised noisy layers in the head (``noisy_sigma0``): exploration acts on the online network
            under fresh noise each step; training draws noise per gradient step for the online network (at
            ``obs`` and, for double Q, at ``next_obs``) and the target network; the policy is the mean network.
        adam_epsilon: Adam's epsilon.
    """

    algorithm = ALGORITHM

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, *, network="mlp",
                 network_kwargs: dict | None = None, hiddens=(256,), dueling: bool = True, layer_norm: bool = False,
                 double_q: bool = True, gamma: float = 0.99, max_grad_norm: float | None = 10.0,
                 seed: int | None = None, hyperparameters: dict | None = None, exploration_final_eps: float = 0.0,
                 policy_average_steps: int = 0, jit_compile: bool = False, distributional: str | None = None,
                 num_atoms: int = 51, v_min: float = -10.0, v_max: float = 10.0, num_quantiles: int = 200,
                 noisy: bool = False, noisy_sigma0: float = 0.5, adam_epsilon: float = 1e-8):
        check_action_space(action_space)
        self.observation_space, self.action_space = observation_space, action_space
        self.encoder = ObsEncoder(observation_space)
        self.network, self.network_kwargs = network, dict(network_kwargs or {})
        self.head = {"hiddens": [int(h) for h in hiddens], "dueling": bool(dueling), "layer_norm": bool(layer_norm)}
        self.double_q, self.gamma = bool(double_q), float(gamma)
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.hyperparameters = dict(hyperparameters or {})
        self.eps = float(exploration_final_eps)
        n = int(action_space.n)
        self.dist = dist_heads.make(distributional, num_atoms, v_min, v_max, num_quantiles)
        qargs = dict(network=network, scale_images=self.encoder.is_image, seed=seed, **self.head, **self.network_kwargs,
                     outputs_per_action=self.dist.num_outputs if self.dist else 0,
                     noisy_sigma0=float(noisy_sigma0) if noisy else None)
        self.q = QFunction(self.encoder.shape, n, **qargs)
        self.target_q = QFunction(self.encoder.shape, n, **qargs)
        self.q_vars = list(module_variables(self.q).values())
        self.target_vars = list(module_variables(self.target_q).values())
        if policy_average_steps < 0:
            raise ConfigError(f"deepq: policy_average_steps must be >= 0, got {policy_average_steps}")
        self.policy_average_steps = int(policy_average_steps)
        self.policy_q = QFunction(self.encoder.shape, n, **qargs) if self.policy_average_steps else self.q
        self.policy_vars = list(module_variables(self.policy_q).values())
        self.optimizer = Adam(self.q_vars, epsilon=float(adam_epsilon))
        self.noise_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])  # the training noise's seeds
        self.lr = tf.Variable(5e-4, trainable=False, dtype=tf.float32)
        self.rng = np.random.default_rng(seed)
        self._np_params = self._np_policy_params = self._np_sigmas = None
        self._target_stale = False
        convolutional = bool(getattr(self.q.net, "convs", None))
        self.jit_compile = bool(jit_compile) and self.q.has_numpy_mirror and not convolutional
        self._mirror = self.q.mirror_variables()  # read back by each training call for numpy acting
        shapes = [tuple(int(d) for d in v.shape) for v in self._mirror]
        ends = np.cumsum([int(np.prod(s)) for s in shapes], dtype=int).tolist()
        self._mirror_slices = list(zip([0, *ends[:-1]], ends, shapes))  # each weight's place after the TD errors
        self._train = DirectCall(tf.function(self._train_and_read, reduce_retracing=True, jit_compile=self.jit_compile))
        self._q_tf = tf.function(lambda x, noise=None: self._expected_tf(self.q(x, noise)), reduce_retracing=True)
        self._copy_tf = tf.function(self._copy_graph)
        self._copy_tf()
        self._average_tf = tf.function(self._average_graph)
        if self.policy_q is not self.q:
            for p, v in zip(self.policy_vars, self.q_vars):
                p.assign(v)
        self._policy_q_tf = tf.function(lambda x: self._expected_tf(self.policy_q(x)), reduce_retracing=True)

    def _expected_tf(self, out: tf.Tensor) -> tf.Tensor:
        """Q-values ``[B, A]`` from a Q-function's outputs (expected values of a distributional head)."""
        return out if self.dist is None else self.dist.expected_tf(out)

    def _expected(self, out: np.ndarray) -> np.ndarray:
        """``_expected_tf`` in numpy."""
        return out if self.dist is None else self.dist.expected(out)

    # ------------------------------------------------------------------ training

    def _copy_graph(self):
        for t, v in zip(self.target_vars, self.q_vars):
            t.assign(v)

    def _average_graph(self, rate):
        for p, v in zip(self.policy_vars, self.q_vars):
            p.assign(p + rate * (v - p))

    # AutoGraph rewrites only the loop that calls this: converting these losses, the networks and the optimizer
    # (Python control flow on Python values only) was ~80% of the first call's tracing time, same graph.
    def _graph_noise(self, call: int) -> list | None:
        """Noise for one Q-function call of a gradient step (None without noisy layers): standard normals
        seeded by the model's noise seed, ``call`` and Adam's step count, so a resumed run draws the same."""
        shapes = self.q.noise_shapes()
        if not shapes:
            return None
        seed = tf.stack([tf.constant(self.noise_seed * 4 + call, tf.int64), tf.cast(self.optimizer.t, tf.int64)])
        flat = tf.random.stateless_normal([sum(i + o for i, o in shapes)], seed)
        parts = tf.split(flat, [d for shape in shapes for d in shape])
        return [(parts[2 * j], parts[2 * j + 1]) for j in range(len(shapes))]

    # AutoGraph rewrites only the loop that calls this: converting these losses, the networks and the optimizer
    # (Python control flow on Python values only) was ~80% of the first call's tracing time, same graph.
    @tf.autograph.experimental.do_not_convert
    def _step_graph(self, obs, actions, rewards, next_obs, dones, weights, next_masks=None, discounts=None):
        noise_target, noise_next, noise_obs = (self._graph_noise(call) for call in range(3))
        # bootstrap discount: gamma, or gamma^m of an n-step row; 0 where the episode terminated
        discount = (self.gamma if discounts is None else discounts) * (1.0 - dones)
        out_next = self.target_q(next_obs, noise_target)
        # illegal next actions (next_masks False) take no part in the max of the target
        q_next_target = tf_masked_logits(self._expected_tf(out_next), next_masks)
        if self.double_q:
            online_next = self._expected_tf(self.q(next_obs, noise_next))
            best = tf.argmax(tf_masked_logits(online_next, next_masks), axis=1, output_type=tf.int32)
        else:
            best = tf.argmax(q_next_target, axis=1, output_type=tf.int32)
        if self.dist is None:
            q_next = (tf.gather(q_next_target, best, batch_dims=1) if self.double_q
                      else tf.reduce_max(q_next_target, axis=1))
            target = tf.stop_gradient(rewards + discount * q_next)
        else:
            target = tf.stop_gradient(self.dist.target(tf.gather(out_next, best, batch_dims=1), rewards, discount))
        with tf.GradientTape() as tape:
            q_sel = tf.gather(self.q(obs, noise_obs), tf.cast(actions, tf.int32), batch_dims=1)
            if self.dist is None:
                td = q_sel - target
                loss = tf.reduce_mean(weights * huber(td))
            else:  # the per-transition loss is also the priority
                td = self.dist.loss(q_sel, target)
                loss = tf.reduce_mean(weights * td)
        grads = tape.gradient(loss, self.q_vars)
        self.optimizer.apply(clip_by_global_norm(grads, self.max_grad_norm), self.lr)
        return td, loss

    def _train_graph(self, obs, actions, rewards, next_obs, dones, weights, next_masks=None, discounts=None):
        if rewards.shape[0] == 1:  # one gradient step (``train_freq=1`` entries): the step without a loop around it
            td, loss = self._step_graph(obs[0], actions[0], rewards[0], next_obs[0], dones[0], weights[0],
                                        None if next_masks is None else next_masks[0],
                                        None if discounts is None else discounts[0])
            return td[None], loss
        k = tf.shape(obs)[0]
        tds = tf.TensorArray(tf.float32, size=k)
        total = tf.constant(0.0)
        for i in tf.range(k):
            td, loss = self._step_graph(obs[i], actions[i], rewards[i], next_obs[i], dones[i], weights[i],
                                        None if next_masks is None else next_masks[i],
                                        None if discounts is None else discounts[i])
            tds = tds.write(i, td)
            total += loss
        return tds.stack(), total / tf.cast(k, tf.float32)

    def _train_and_read(self, lr, *args):
        """``_train_graph`` at learning rate ``lr``, then the online network's numpy-mirror weights, as one flat
        float32 tensor: the TD errors, the mean loss and the weights (one output to fetch instead of one per
        array)."""
        self.lr.assign(lr)
        td, loss = self._train_graph(*args)
        weights = [tf.reshape(v.read_value(), [-1]) for v in self._mirror]
        return tf.concat([tf.reshape(td, [-1]), tf.reshape(loss, [1]), *weights], 0)

    def train(self, batch: dict[str, np.ndarray], lr: float) -> tuple[np.ndarray, float]:
        """Gradient steps on batches shaped ``[steps, batch, ...]`` (keys as ``ReplayBuffer.gather``, plus
        optional ``weights``, ``next_masks`` (the action masks of the next observations) and ``discounts``
        (n-step rows' ``gamma^m``)). Returns the TD errors ``[steps, batch]`` (a distributional head: the loss
        of each transition) and the mean loss."""
        weights = batch.get("weights")
        if weights is None:
            weights = np.ones(batch["rewards"].shape, np.float32)
        out = self._train(np.float32(lr), batch["obs"], batch["actions"], batch["rewards"], batch["next_obs"], batch["dones"],
                          weights, batch.get("next_masks"), batch.get("discounts")).numpy()
        k, n = batch["rewards"].shape
        if self.policy_q is not self.q:  # k steps of the average at once: 1 - (1 - 1/N)^k of the way
            self._average_tf(tf.constant(1.0 - (1.0 - 1.0 / self.policy_average_steps) ** k, tf.float32))
        self._np_params = self._np_policy_params = self._np_sigmas = None
        if self._mirror:  # numpy acting reads views of the weights that came back
            weights = out[k * n + 1:]
            self._np_params, sigmas = self.q.mirror_values([weights[a:b].reshape(s) for a, b, s in self._mirror_slices])
            self._np_sigmas = sigmas if self.q.noisy else None
        self._target_stale = True
        return out[:k * n].reshape(k, n), float(out[k * n])

    def update_target(self) -> bool:
        """Copy the online weights to the target network; skipped (False) when nothing changed since last time."""
        if not self._target_stale:
            return False
        self._copy_tf()
        self._target_stale = False
        return True

    # ------------------------------------------------------------------ acting

    def numpy_params(self) -> tuple:
        """The online weights as numpy arrays (``QFunction.numpy_params``), cached: the same object until the
        weights change (training or loading), so callers can tell by identity when to rebuild copies."""
        if self._np_params is None:
            self._np_params = self.q.numpy_params()
        return self._np_params

    def q_values(self, x: np.ndarray, policy: bool = False, noise: list | None = None) -> np.ndarray:
        """Q-values (expected values) of an encoded observation batch from the online network (``policy``: the
        policy network; ``noise``: the online network under that noise, ``QFunction.noise_shapes``); numpy
        mirror when available."""
        if policy and self.policy_q is not self.q:
            if not self.q.has_numpy_mirror:
                return self._policy_q_tf(x).numpy()
            if self._np_policy_params is None:
                self._np_policy_params = self.policy_q.numpy_params()
            return self._expected(self.policy_q.numpy_forward(x, self._np_policy_params))
        if not self.q.has_numpy_mirror:
            return self._q_tf(x, noise).numpy()
        params = self.numpy_params()
        if noise is not None:
            if self._np_sigmas is None:
                self._np_sigmas = self.q.numpy_sigmas()
            params = self.q.with_noise(params, self._np_sigmas, noise)
        return self._expected(self.q.numpy_forward(x, params))

    def act(self, x: np.ndarray, eps: float, rng: np.random.Generator, masks: np.ndarray | None = None,
            policy: bool = False) -> np.ndarray:
        """Epsilon-greedy actions (0-based) for an encoded batch, greedy on the online network (``policy``: the
        policy network); with ``masks`` (bool [N, actions]) both the greedy and the random actions are legal.
        With noisy layers the online network acts under noise drawn from ``rng`` (one draw per call)."""
        noise = None
        if not policy and self.q.noisy:
            noise = [(rng.standard_normal(i, dtype=np.float32), rng.standard_normal(o, dtype=np.float32))
                     for i, o in self.q.noise_shapes()]
        q = self.q_values(x, policy, noise)
        if masks is not None:
            return self._masked_act(q, eps, rng, masks)
        actions = np.argmax(q, axis=1)
        if eps > 0:
            explore = rng.random(len(actions)) < eps
            if explore.any():
                actions = np.where(explore, rng.integers(0, self.q.num_actions, len(actions)), actions)
        return actions

    @staticmethod
    def _masked_act(q: np.ndarray, eps: float, rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
        masks = np.asarray(masks, bool)
        actions = np.argmax(np.where(masks, q, -np.inf), axis=1)
        if eps > 0:
            explore = rng.random(len(actions)) < eps
            if explore.any():  # uniform over the legal actions: the largest of uniform draws on them
                actions = np.where(explore, np.argmax(np.where(masks, rng.random(masks.shape), -1.0), axis=1), actions)
        return actions

    def initial_state(self, batch_size: int) -> None:
        """No recurrent state: always None."""
        return

    def predict_batch(self, obs: VecObs, state: np.ndarray | None = None, episode_start: np.ndarray | None = None,
                      deterministic: bool = True,
                      action_masks: np.ndarray | None = None) -> tuple[np.ndarray, None]:
        """The policy network's actions for a batch of raw observations: ``(actions, None)``; greedy, or
        epsilon-greedy with ``eps``; only actions that ``action_masks`` (bool [N, actions],
        ``common.wrappers.action_mask``) allows."""
        actions = self.act(self.encoder(obs), 0.0 if deterministic else self.eps, self.rng, action_masks,
                           policy=True)
        return actions + int(self.action_space.start), None

    # ------------------------------------------------------------------ saving

    def get_arrays(self) -> dict[str, np.ndarray]:
        """Online, target (and averaged policy) weights and optimizer state as named arrays."""
        arrays = {f"q/{k}": v.numpy() for k, v in module_variables(self.q).items()}
        arrays.update({f"target_q/{k}": v.numpy() for k, v in module_variables(self.target_q).items()})
        if self.policy_q is not self.q:
            arrays.update({f"policy_q/{k}": v.numpy() for k, v in module_variables(self.policy_q).items()})
        arrays.update({f"adam/{k}": v for k, v in self.optimizer.state_arrays().items()})
        return arrays

    def set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what ``get_arrays`` returned (target and policy default to the online weights when absent)."""
        modules = [("q", self.q), ("target_q", self.target_q)]
        if self.policy_q is not self.q:
            modules.append(("policy_q", self.policy_q))
        for prefix, module in modules:
            for k, var in module_variables(module).items():
                key = f"{prefix}/{k}"
                if prefix != "q" and key not in arrays:
                    key = f"q/{k}"
                if key not in arrays or tuple(arrays[key].shape) != tuple(var.shape):
                    raise ModelFileError(f"model file does not fit this Q-network: weight {k!r} is missing "
                                         "or has another shape")
                var.assign(arrays[key])
        if "adam/t" in arrays:
            self.optimizer.load_state_arrays({k[5:]: v for k, v in arrays.items() if k.startswith("adam/")})
        self._np_params = self._np_policy_params = self._np_sigmas = None
        self._target_stale = False

    # ------------------------------------------------------------------ export

    def policy_graph(self) -> PolicyGraph:
        """The greedy policy for ``python -m export``: argmax of the policy network's Q-values (expected values
        of a distributional head; the mean of noisy layers) over the legal actions when given an action mask;
        the Q-values are the extra output."""

        def act(x: tf.Tensor, action_mask: tf.Tensor | None = None) -> dict[str, tf.Tensor]:
            q = self._expected_tf(self.policy_q(x))
            return {"action": tf.argmax(tf_masked_logits(q, action_mask), axis=1), "q_values": q}

        return PolicyGraph(act, self.policy_vars, masked=True)


def check_action_space(space: spaces.Space) -> None:
    """Raise a one-line ConfigError unless ``space`` is Discrete."""
    if not isinstance(space, spaces.Discrete):
        raise ConfigError(f"deepq needs a Discrete action space, but the env has {space}; "
                         "use ddpg or ppo2 for other action spaces")
