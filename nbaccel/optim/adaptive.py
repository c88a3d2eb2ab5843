"""Adadelta, RMSprop and Adagrad: PyTorch's update rules, state names and state_dict format.

Like SGD and Adam (``optimizer.py``) the updates are nbaccel ops under ``no_grad`` writing into
each parameter in place, and every hyper-parameter they read goes through ``s(name)``
(``optim.HYPER``): a Python number eagerly, a 0-d graph input inside a traced step, so a
replayed compiled step (either mode) sees a changed ``lr`` without re-tracing.
The step count is a 0-d float32 tensor, as in PyTorch.
"""
from __future__ import annotations

from .. import autograd, ops
from .optimizer import Optimizer, _check

__all__ = ["Adadelta", "RMSprop", "Adagrad"]


def _step_tensor(p):
    return ops.zeros((), dtype="float32", device=p.device)


class _Adaptive(Optimizer):
    """The loop every one of these shares: for each parameter with a gradient, its state
    (made on first use), the gradient (negated for ``maximize``, plus the L2 term)."""

    def step(self, closure=None):
        """One update of every parameter that has a gradient. Returns the closure's loss."""
        loss = self._closure(closure)
        with autograd.no_grad():
            for gi, g in self._groups():
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    st = self.state.get(p)
                    if st is None:
                        st = self.state[p] = self._init_state(p, g)
                    s = self._scalars(gi, g, p)
                    grad = -p.grad if g["maximize"] else p.grad
                    if g["weight_decay"]:
                        grad = grad + s("weight_decay") * p
                    self._update(p, grad, st, g, s)
        return loss


class Adadelta(_Adaptive):
    """Adadelta (Zeiler): ``v = rho v + (1 - rho) g^2``;
    ``d = sqrt(u + eps) / sqrt(v + eps) * g``; ``u = rho u + (1 - rho) d^2``; ``p -= lr d``."""

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        _check(lr >= 0, f"Invalid learning rate: {lr}")
        _check(0.0 <= rho <= 1.0, f"Invalid rho value: {rho}")
        _check(eps >= 0, f"Invalid epsilon value: {eps}")
        _check(weight_decay >= 0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, p, g):
        return {"step": _step_tensor(p), "square_avg": ops.zeros_like(p),
                "acc_delta": ops.zeros_like(p)}

    def _update(self, p, grad, st, g, s):
        st["step"]._assign(st["step"] + 1)
        v = st["square_avg"]._assign(st["square_avg"] * s("rho") + grad * grad * s("1-rho"))
        std = ops.sqrt(v + s("eps"))
        delta = ops.sqrt(st["acc_delta"] + s("eps")) / std * grad
        st["acc_delta"]._assign(st["acc_delta"] * s("rho") + delta * delta * s("1-rho"))
        p._assign(p - s("lr") * delta)


class RMSprop(_Adaptive):
    """RMSprop (Hinton): ``v = alpha v + (1 - alpha) g^2``; centered: ``m`` moves toward g by
    ``1 - alpha`` and the denominator is ``sqrt(v - m^2) + eps``; with momentum
    ``b = momentum b + g / denom``, ``p -= lr b``, else ``p -= lr g / denom``."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        _check(lr >= 0, f"Invalid learning rate: {lr}")
        _check(eps >= 0, f"Invalid epsilon value: {eps}")
        _check(momentum >= 0, f"Invalid momentum value: {momentum}")
        _check(weight_decay >= 0, f"Invalid weight_decay value: {weight_decay}")
        _check(alpha >= 0, f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    def _init_state(self, p, g):
        st = {"step": _step_tensor(p), "square_avg": ops.zeros_like(p)}
        if g["momentum"] > 0:
            st["momentum_buffer"] = ops.zeros_like(p)
        if g["centered"]:
            st["grad_avg"] = ops.zeros_like(p)
        return st

    def _update(self, p, grad, st, g, s):
        st["step"]._assign(st["step"] + 1)
        v = st["square_avg"]._assign(st["square_avg"] * s("alpha") + grad * grad * s("1-alpha"))
        if g["centered"]:
            m = st["grad_avg"]._assign(st["grad_avg"] + (grad - st["grad_avg"]) * s("1-alpha"))
            avg = ops.sqrt(v - m * m) + s("eps")
        else:
            avg = ops.sqrt(v) + s("eps")
        if g["momentum"] > 0:
            buf = st["momentum_buffer"]._assign(st["momentum_buffer"] * s("momentum") + grad / avg)
            p._assign(p - s("lr") * buf)
        else:
            p._assign(p - s("lr") * (grad / avg))


class Adagrad(_Adaptive):
    """Adagrad (Duchi et al.): ``sum += g^2``; ``p -= clr g / (sqrt(sum) + eps)`` with
    ``clr = lr / (1 + (step - 1) lr_decay)``."""

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None):
        _check(lr >= 0, f"Invalid learning rate: {lr}")
        _check(lr_decay >= 0, f"Invalid lr_decay value: {lr_decay}")
        _check(weight_decay >= 0, f"Invalid weight_decay value: {weight_decay}")
        _check(initial_accumulator_value >= 0,
               f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        _check(eps >= 0, f"Invalid epsilon value: {eps}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))
        # PyTorch makes the state at construction (so state_dict() has it before any step)
        for g in self.param_groups:
            for p in dict.__getitem__(g, "params"):
                self.state[p] = self._init_state(p, g)

    def _init_state(self, p, g):
        return {"step": _step_tensor(p),
                "sum": ops.full_like(p, dict.__getitem__(g, "initial_accumulator_value"))}

    def _update(self, p, grad, st, g, s):
        step = st["step"]._assign(st["step"] + 1)
        t = step.astype(p.dtype) if p.dtype.itemsize > 4 else step
        clr = s("lr") / ((t - 1) * s("lr_decay") + 1)
        acc = st["sum"]._assign(st["sum"] + grad * grad)
        p._assign(p - clr * (grad / (ops.sqrt(acc) + s("eps"))))
