"""Small TensorFlow helpers: thread settings, seeding, a variable-based Adam, gradient clipping and flat-gradient tools."""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from common.env_vars import TF_THREADS, env_text
from common.errors import ConfigError

_THREADS_SET = False

# jit_compile="auto": XLA when the run has at least this many gradient steps. bench/on_policy_update.py (ppo2,
# CartPole entry): XLA's first call costs ~2 s of CPU more (2.59 vs 0.57 s) and each later update of 20
# gradient steps 4.2 ms less (5.70 vs 9.92 ms), so it pays after ~9,600 gradient steps. deepq's CartPole block
# and ddpg's and td3's fused updates (bench/deepq_block.py, bench/ddpg_floor.py) repay their 0.4-1 s of
# compilation sooner; the same bound is kept for all four.
XLA_MIN_GRADIENT_STEPS = 10_000


def configure_threads(intra_op: int | None = None, inter_op: int | None = None) -> None:
    """Set TF's thread pools once per process (env RUNNER_TF_THREADS overrides, e.g. "1")."""
    global _THREADS_SET
    if _THREADS_SET:
        return
    env = env_text(TF_THREADS)
    if env:
        intra_op = inter_op = int(env)
    try:
        if intra_op is not None:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op)
        if inter_op is not None:
            tf.config.threading.set_inter_op_parallelism_threads(inter_op)
    except RuntimeError:  # TF already initialised: settings can no longer change
        pass
    _THREADS_SET = True


def xla_pays(setting: bool | str, gradient_steps: int) -> bool:
    """The ``jit_compile`` setting as a bool: "auto" -> whether the run's ``gradient_steps`` (all updates of
    this process) repay XLA's compilation."""
    if setting == "auto":
        return gradient_steps >= XLA_MIN_GRADIENT_STEPS
    if isinstance(setting, bool):
        return setting
    raise ConfigError(f"jit_compile must be true, false or \"auto\", got {setting!r}")


def seed_everything(seed: int | None) -> None:
    """Seed Python's ``random``, numpy's global state and TF's global seed."""
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed % (2**32))
    tf.random.set_seed(seed)


class FlatStateOptimizer(tf.Module):
    """An optimizer on a fixed list of variables whose state vectors are flat (``flatten_grads``'s layout):
    ``apply_flat`` computes the step on all the variables' gradients concatenated, a handful of ops instead of
    a dozen per variable (most of what a small network's update costs, ``bench/on_policy_update.py``), and
    checkpoints keep one array per variable. Subclasses define ``apply_flat``, ``state_arrays`` and
    ``load_state_arrays`` with the helpers below; usable inside one tf.function."""

    def __init__(self, variables, name: str) -> None:
        super().__init__(name=name)
        self.vars = list(variables)
        self.sizes = [int(np.prod(v.shape)) for v in self.vars]

    def _flat_variable(self, fill: float) -> tf.Variable:
        """A state vector over all the variables, every entry ``fill``."""
        return tf.Variable(tf.fill([sum(self.sizes)], fill), trainable=False)

    def _subtract(self, flat_step: tf.Tensor) -> None:
        """``var -= step`` for every variable, the step given flat."""
        for var, part in zip(self.vars, unflatten_grads(flat_step, self.vars)):
            var.assign_sub(part)

    def _per_variable(self, state: tf.Variable, prefix: str) -> dict[str, np.ndarray]:
        """A state vector as ``{prefix}{i}`` arrays shaped like the variables."""
        parts = np.split(state.numpy(), np.cumsum(self.sizes)[:-1])
        return {f"{prefix}{i}": p.reshape(v.shape) for i, (p, v) in enumerate(zip(parts, self.vars))}

    def _load_per_variable(self, state: tf.Variable, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Set a state vector from the ``{prefix}{i}`` arrays ``_per_variable`` wrote."""
        state.assign(np.concatenate([np.asarray(arrays[f"{prefix}{i}"], np.float32).ravel()
                                     for i in range(len(self.vars))]))

    def apply(self, grads: Sequence[tf.Tensor | None], lr: float | tf.Tensor | tf.Variable) -> None:
        """One step with gradients ``grads`` (same order as the variables)."""
        self.apply_flat(flatten_grads(grads, self.vars), lr)

    def apply_flat(self, flat_grad: tf.Tensor, lr: float | tf.Tensor | tf.Variable) -> None:
        """One step with the gradients of all the variables as one flat vector."""
        raise NotImplementedError


class Adam(FlatStateOptimizer):
    """Adam on a fixed list of variables (``FlatStateOptimizer``: moments as two flat vectors, the same
    elementwise arithmetic as per variable). ``apply(grads, lr)`` takes the learning rate as a tensor so that
    schedules do not retrace."""

    def __init__(self, variables, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-5):
        super().__init__(variables, name="adam")
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.m, self.v = self._flat_variable(0.0), self._flat_variable(0.0)
        self.t = tf.Variable(0.0, trainable=False)

    def apply_flat(self, flat_grad: tf.Tensor, lr: float | tf.Tensor | tf.Variable) -> None:
        """One Adam step with the gradients of all the variables as one flat vector."""
        t = self.t.assign_add(1.0)
        lr_t = lr * tf.sqrt(1.0 - tf.pow(self.beta2, t)) / (1.0 - tf.pow(self.beta1, t))
        m = self.m.assign(self.beta1 * self.m + (1.0 - self.beta1) * flat_grad)
        v = self.v.assign(self.beta2 * self.v + (1.0 - self.beta2) * tf.square(flat_grad))
        self._subtract(lr_t * m / (tf.sqrt(v) + self.epsilon))

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Optimizer state as named numpy arrays, one m and one v per variable (for checkpoints)."""
        return {"t": np.asarray(self.t.numpy()), **self._per_variable(self.m, "m"), **self._per_variable(self.v, "v")}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore the state written by ``state_arrays``."""
        self.t.assign(float(arrays["t"]))
        self._load_per_variable(self.m, arrays, "m")
        self._load_per_variable(self.v, arrays, "v")


class RMSProp(FlatStateOptimizer):
    """RMSProp over one flat vector ``ms`` (``FlatStateOptimizer``): ``ms <- decay * ms + (1 - decay) * g^2``,
    then with ``style="tf1"`` (TF1 and baselines' a2c) ``ms`` starts at 1 and ``var <- var - lr * g /
    sqrt(ms + epsilon)``; with ``style="pytorch"`` (torch.optim.RMSprop, stable-baselines3's A2C) ``ms`` starts
    at 0 and ``var <- var - lr * g / (sqrt(ms) + epsilon)``."""

    STYLES = ("tf1", "pytorch")

    def __init__(self, variables, decay: float = 0.99, epsilon: float = 1e-5, style: str = "tf1"):
        super().__init__(variables, name="rmsprop")
        if style not in self.STYLES:
            raise ConfigError(f"rmsprop must be one of {', '.join(self.STYLES)}, got {style!r}")
        self.decay, self.epsilon, self.style = float(decay), float(epsilon), style
        self.ms = self._flat_variable(1.0 if style == "tf1" else 0.0)

    def apply_flat(self, flat_grad: tf.Tensor, lr: float | tf.Tensor | tf.Variable) -> None:
        """One RMSProp step with the gradients of all the variables as one flat vector."""
        ms = self.ms.assign(self.decay * self.ms + (1.0 - self.decay) * tf.square(flat_grad))
        if self.style == "tf1":
            self._subtract(lr * flat_grad / tf.sqrt(ms + self.epsilon))
        else:
            self._subtract(lr * flat_grad / (tf.sqrt(ms) + self.epsilon))

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Optimizer state as named numpy arrays, one per variable (for checkpoints)."""
        return self._per_variable(self.ms, "ms")

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore the state written by ``state_arrays``."""
        self._load_per_variable(self.ms, arrays, "ms")


def conjugate_gradient(matvec: Callable[[tf.Tensor], tf.Tensor], b: tf.Tensor, iters: int,
                       residual_tol: float = 1e-10) -> tf.Tensor:
    """Approximate solution x of ``A x = b`` for a symmetric positive definite A given as ``matvec(p) = A p``:
    at most ``iters`` conjugate-gradient steps, fewer once the squared residual is below ``residual_tol``
    (TF ops: runs eagerly or inside a tf.function)."""

    def unconverged(i: tf.Tensor, x: tf.Tensor, r: tf.Tensor, p: tf.Tensor, rdotr: tf.Tensor) -> tf.Tensor:
        return (i < iters) & tf.logical_not(rdotr < residual_tol)

    def step(i: tf.Tensor, x: tf.Tensor, r: tf.Tensor, p: tf.Tensor,
             rdotr: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        z = matvec(p)
        alpha = rdotr / tf.tensordot(p, z, 1)
        x = x + alpha * p
        r = r - alpha * z
        new_rdotr = tf.tensordot(r, r, 1)
        return i + 1, x, r, r + (new_rdotr / rdotr) * p, new_rdotr

    _, x, _, _, _ = tf.while_loop(unconverged, step, (tf.constant(0), tf.zeros_like(b), b, b, tf.tensordot(b, b, 1)))
    return x


def clip_by_global_norm(grads: Sequence[tf.Tensor], max_norm: float | None) -> Sequence[tf.Tensor]:
    """``grads`` scaled together so that their global norm is at most ``max_norm`` (``tf.clip_by_global_norm``);
    None or 0 leaves them as they are."""
    if not max_norm:
        return grads
    clipped, _ = tf.clip_by_global_norm(grads, float(max_norm))
    return clipped


def clip_flat_by_norm(flat: tf.Tensor, max_norm: float | None) -> tf.Tensor:
    """A flat gradient scaled so that its norm is at most ``max_norm`` (``clip_by_global_norm`` on the
    gradients it concatenates, up to rounding); None or 0 leaves it as it is."""
    if not max_norm:
        return flat
    norm = tf.sqrt(tf.reduce_sum(tf.square(flat)))
    return flat * (float(max_norm) / tf.maximum(norm, float(max_norm)))


def flatten_grads(grads: Sequence[tf.Tensor | tf.Variable | None], variables: Sequence[tf.Variable]) -> tf.Tensor:
    """Concatenate gradients into one flat vector (None -> zeros)."""
    return tf.concat(
        [tf.reshape(g if g is not None else tf.zeros_like(v), [-1]) for g, v in zip(grads, variables)], axis=0
    )


def unflatten_grads(flat: tf.Tensor, variables: Sequence[tf.Variable]) -> list[tf.Tensor]:
    """Split a flat vector back into tensors shaped like ``variables``."""
    sizes = [int(np.prod(v.shape)) for v in variables]
    parts = tf.split(flat, sizes)
    return [tf.reshape(p, v.shape) for p, v in zip(parts, variables)]


def assign_flat(variables: Sequence[tf.Variable], flat: tf.Tensor) -> None:
    """Set ``variables`` from one flat vector (the layout of ``flatten_grads``)."""
    for var, part in zip(variables, unflatten_grads(flat, variables)):
        var.assign(part)


def module_variables(module: tf.Module) -> dict[str, tf.Variable]:
    """Variables of a tf.Module keyed by their attribute path (stable names for model files)."""
    out = {}
    for path, var in module._flatten(predicate=lambda v: isinstance(v, tf.Variable), with_path=True):
        name = "/".join(str(p) for p in path)
        out[name] = var
    return out
