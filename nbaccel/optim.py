"""Optimisers: SGD, Adam, AdamW (PyTorch's update rules and state_dict format).

Updates run under ``no_grad`` and write into each Parameter in place (so references held by
modules stay valid), using nbaccel ops only, so a traced training step captures them too.
Adam's step count is a 0-d tensor for the same reason: the bias corrections stay graph ops
instead of changing Python constants (which would force a recompile every step).

>>> import nbaccel as nb
>>> w = nb.nn.Parameter(nb.ones(3))
>>> opt = nb.optim.SGD([w], lr=0.1)
>>> (w * w).sum().backward(); opt.step()
>>> w
Parameter containing:
tensor([0.8, 0.8, 0.8], requires_grad=True)
"""
from __future__ import annotations

import copy

from . import autograd
from .tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer:
    """Base class: ``param_groups`` (dicts of hyper-parameters with a ``params`` list),
    per-parameter ``state``, ``zero_grad``, ``state_dict`` / ``load_state_dict``."""

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict):
        """Add a group of parameters with its own hyper-parameters (defaults fill the rest)."""
        group = dict(group)
        ps = group["params"]
        group["params"] = [ps] if isinstance(ps, Tensor) else list(ps)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        """Clear gradients: set them to None (the default) or zero them in place."""
        autograd.zero_grads((p for g in self.param_groups for p in g["params"]), set_to_none)

    def step(self, closure=None):
        raise NotImplementedError

    def _closure(self, closure):
        if closure is None:
            return None
        with autograd.enable_grad():
            return closure()

    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``;
        parameters are numbered in group order, as PyTorch does."""
        index, groups = {}, []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in g["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict):
        """Restore hyper-parameters and state (tensors are copied to each parameter's device,
        and floating state to its dtype)."""
        state_dict = copy.deepcopy(state_dict)
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        by_index = {i: p for g, s in zip(groups, saved) for i, p in zip(s["params"], g["params"])}
        self.state = {}
        for i, st in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {k: self._cast(v, p, k) for k, v in st.items()}
        for g, s in zip(groups, saved):
            g.update({k: v for k, v in s.items() if k != "params"})

    @staticmethod
    def _cast(v, p, key):
        if not isinstance(v, Tensor):
            return v
        if key != "step" and v.dtype.kind == "f":
            v = v.astype(p.dtype)
        return v.to(p.device)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join(lines) + "\n)"


def _check(cond, msg):
    if not cond:
        raise ValueError(msg)


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and (L2) weight decay:
    ``buf = momentum * buf + (1 - dampening) * g``; ``p -= lr * (g + momentum * buf if
    nesterov else buf)``."""

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False):
        _check(lr >= 0, f"Invalid learning rate: {lr}")
        _check(momentum >= 0, f"Invalid momentum value: {momentum}")
        _check(weight_decay >= 0, f"Invalid weight_decay value: {weight_decay}")
        _check(not nesterov or (momentum > 0 and dampening == 0),
               "Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def step(self, closure=None):
        """One update of every parameter that has a gradient. Returns the closure's loss."""
        loss = self._closure(closure)
        with autograd.no_grad():
            for g in self.param_groups:
                lr, mom, damp, wd = g["lr"], g["momentum"], g["dampening"], g["weight_decay"]
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    d = -p.grad if g["maximize"] else p.grad
                    if wd:
                        d = d + wd * p
                    if mom:
                        st = self.state.setdefault(p, {})
                        buf = st.get("momentum_buffer")
                        if buf is None:
                            buf = st["momentum_buffer"] = d.detach().clone()
                        else:
                            buf._assign(buf * mom + d * (1 - damp))
                        d = d + mom * buf if g["nesterov"] else buf
                    p._assign(p - lr * d)
        return loss


class Adam(Optimizer):
    """Adam (Kingma & Ba); ``weight_decay`` is an L2 term added to the gradient. See AdamW
    for decoupled weight decay."""

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False):
        _check(lr >= 0, f"Invalid learning rate: {lr}")
        _check(eps >= 0, f"Invalid epsilon value: {eps}")
        _check(0 <= betas[0] < 1, f"Invalid beta parameter at index 0: {betas[0]}")
        _check(0 <= betas[1] < 1, f"Invalid beta parameter at index 1: {betas[1]}")
        _check(weight_decay >= 0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _init_state(self, p, amsgrad):
        from . import ops
        st = {"step": ops.zeros((), dtype="float32", device=p.device),
              "exp_avg": ops.zeros_like(p), "exp_avg_sq": ops.zeros_like(p)}
        if amsgrad:
            st["max_exp_avg_sq"] = ops.zeros_like(p)
        return st

    def step(self, closure=None):
        """One update of every parameter that has a gradient. Returns the closure's loss."""
        from . import ops
        loss = self._closure(closure)
        with autograd.no_grad():
            for g in self.param_groups:
                lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if g["maximize"] else p.grad
                    st = self.state.get(p)
                    if st is None:
                        st = self.state[p] = self._init_state(p, g["amsgrad"])
                    step = st["step"]._assign(st["step"] + 1)
                    if wd and self._decoupled:
                        p._assign(p * (1 - lr * wd))
                    elif wd:
                        grad = grad + wd * p
                    m = st["exp_avg"]._assign(st["exp_avg"] * b1 + grad * (1 - b1))
                    v = st["exp_avg_sq"]._assign(st["exp_avg_sq"] * b2 + grad * grad * (1 - b2))
                    if g["amsgrad"]:
                        v = st["max_exp_avg_sq"]._assign(ops.maximum(st["max_exp_avg_sq"], v))
                    # float64 parameters get float64 bias corrections
                    t = step.astype(p.dtype) if p.dtype.itemsize > 4 else step
                    bc1 = 1 - b1 ** t
                    bc2_sqrt = ops.sqrt(1 - b2 ** t)
                    denom = ops.sqrt(v) / bc2_sqrt + eps
                    p._assign(p - (lr / bc1) * m / denom)
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam update. Defaults as PyTorch (lr=1e-3, weight_decay=1e-2)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
