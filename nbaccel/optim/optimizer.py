"""The optimiser base class and SGD, Adam, AdamW (PyTorch's update rules and state_dict format).

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

import numpy as np

from .. import autograd, ops
from ..devices import array_module
from ..ops import kernel_modules
from ..dispatch import active_trace
from ..tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "RMSprop", "Adagrad", "lr_scheduler"]

# The Python numbers an update reads, each a function of its param group. Eagerly they stay
# Python numbers; inside a traced step each becomes a 0-d tensor input of the graph (see
# ``Optimizer._scalar``), so a replayed step reads the group's current value, never a stale
# constant. Derived values (1 - beta1, ...) are computed in Python first, as eagerly, so that
# compiled and eager updates round identically.
HYPER = {
    "lr": lambda g: g["lr"],
    "momentum": lambda g: g["momentum"],
    "1-dampening": lambda g: 1 - g["dampening"],
    "weight_decay": lambda g: g["weight_decay"],
    "beta1": lambda g: g["betas"][0],
    "beta2": lambda g: g["betas"][1],
    "1-beta1": lambda g: 1 - g["betas"][0],
    "1-beta2": lambda g: 1 - g["betas"][1],
    "eps": lambda g: g["eps"],
    "1-lr*weight_decay": lambda g: 1 - g["lr"] * g["weight_decay"],
    # Adadelta, RMSprop, Adagrad (adaptive.py)
    "rho": lambda g: g["rho"],
    "1-rho": lambda g: 1 - g["rho"],
    "alpha": lambda g: g["alpha"],
    "1-alpha": lambda g: 1 - g["alpha"],
    "lr_decay": lambda g: g["lr_decay"],
}
# the group keys those values come from. A replayed step needs no guard on the values of these
# (they are graph inputs), only on the truthiness of BRANCH_KEYS (``if momentum:``); every other
# key (nesterov, maximize, amsgrad, ...) is guarded by value
LIFTED_KEYS = frozenset({"lr", "momentum", "dampening", "weight_decay", "betas", "eps",
                         "rho", "alpha", "lr_decay"})
BRANCH_KEYS = frozenset({"momentum", "weight_decay"})


class ParamGroup(dict):
    """A param group (a dict, as in PyTorch). Keys that code *outside* the optimizer reads while
    a step is traced are remembered in ``read_in_trace``: their values became constants of the
    graph, so a replayed step guards on them by value."""

    def _note(self, k):
        if active_trace() is not None:
            self.__dict__.setdefault("read_in_trace", set()).add(k)

    def __getitem__(self, k):
        self._note(k)
        return dict.__getitem__(self, k)

    def get(self, k, default=None):
        self._note(k)
        return dict.get(self, k, default)

    def items(self):
        for k in self:
            self._note(k)
        return dict.items(self)

    def values(self):
        for k in self:
            self._note(k)
        return dict.values(self)


class Optimizer:
    """Base class: ``param_groups`` (dicts of hyper-parameters with a ``params`` list),
    per-parameter ``state``, ``zero_grad``, ``state_dict`` / ``load_state_dict``."""

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}
        # (group index, name, dtype, device) -> 0-d tensor: hyper-parameters of traced steps
        self._hyper_tensors: dict[tuple, Tensor] = {}
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
        group = ParamGroup(group)
        ps = dict.__getitem__(group, "params")
        group["params"] = [ps] if isinstance(ps, Tensor) else list(ps)
        for p in dict.__getitem__(group, "params"):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in dict.__getitem__(g, "params")}
        if any(id(p) in seen for p in dict.__getitem__(group, "params")):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        """Clear gradients: set them to None (the default) or zero them in place."""
        autograd.zero_grads((p for g in self.param_groups for p in dict.__getitem__(g, "params")),
                            set_to_none)

    def _groups(self):
        """(index, a plain copy of the group): the optimizer's own reads are not user reads."""
        return [(i, dict(g)) for i, g in enumerate(self.param_groups)]

    def _scalars(self, gi, g, p):
        """``s(name)``: the hyper-parameter ``name`` of group ``g`` for parameter ``p``: a Python
        number eagerly, a 0-d tensor of p's dtype (a graph input) inside a traced step."""
        if active_trace() is None:
            return lambda name: HYPER[name](g)

        def traced(name):
            key = (gi, name, p.dtype.name, str(p.device))
            t = self._hyper_tensors.get(key)
            if t is None:      # made concretely (not recorded): it is an input of the graph
                data = array_module(p.device).zeros((), dtype=p.dtype.np)
                t = self._hyper_tensors[key] = Tensor._wrap(data, p.dtype, p.device)
            t._data[()] = HYPER[name](g)     # its value now; a replay refreshes it the same way
            return t
        return traced

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
            for gi, g in self._groups():
                mom, wd = g["momentum"], g["weight_decay"]
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    if _eager_data_ok(p):
                        try:
                            self._update_data(p, g)
                            continue
                        except _Fallback:       # (raised before anything is written)
                            pass
                    s = self._scalars(gi, g, p)
                    d = -p.grad if g["maximize"] else p.grad
                    if wd:
                        d = d + s("weight_decay") * p
                    if mom:
                        st = self.state.setdefault(p, {})
                        buf = st.get("momentum_buffer")
                        if buf is None:
                            buf = st["momentum_buffer"] = d.detach().clone()
                        else:
                            buf._assign(buf * s("momentum") + d * s("1-dampening"))
                        d = d + s("momentum") * buf if g["nesterov"] else buf
                    p._assign(p - s("lr") * d)
        return loss


    def _update_data(self, p, g):
        """The same update as the op path above, op for op (so it rounds identically), on the
        arrays: in place where the op path writes a fresh result and copies it in."""
        xp = array_module(p.device)
        P, d = p._data, p.grad._data
        mom, damp, wd = g["momentum"], g["dampening"], g["weight_decay"]
        if g["maximize"]:
            d = xp.negative(d)
        if wd:
            d = d + xp.multiply(wd, P)
        if mom:
            st = self.state.setdefault(p, {})
            buf = st.get("momentum_buffer")
            if buf is None:
                buf = st["momentum_buffer"] = Tensor._wrap(xp.array(d, copy=True), p.dtype, p.device)
            else:
                B = _data_of(buf, p)
                t = xp.multiply(d, 1 - damp)
                xp.multiply(B, mom, out=B)
                xp.add(B, t, out=B)
                buf._version[0] += 1
            d = d + xp.multiply(mom, buf._data) if g["nesterov"] else buf._data
        xp.subtract(P, xp.multiply(g["lr"], d), out=P)
        p._version[0] += 1


def _eager_data_ok(p):
    """May an eager update run on the arrays? (not traced; float32/float64 throughout)"""
    gr = p.grad
    return (p._node is None and gr._node is None and active_trace() is None
            and p.dtype.name in ("float32", "float64") and gr.dtype is p.dtype
            and gr._data.shape == p._data.shape)


def _data_of(t, p):
    if t._node is not None or t.dtype is not p.dtype or t._data.shape != p._data.shape:
        raise _Fallback
    return t._data


class _Fallback(Exception):
    """State that the array path cannot take (never raised for state this module made)."""


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
        st = {"step": ops.zeros((), dtype="float32", device=p.device),
              "exp_avg": ops.zeros_like(p), "exp_avg_sq": ops.zeros_like(p)}
        if amsgrad:
            st["max_exp_avg_sq"] = ops.zeros_like(p)
        return st

    def step(self, closure=None):
        """One update of every parameter that has a gradient. Returns the closure's loss."""
        loss = self._closure(closure)
        with autograd.no_grad():
            for gi, g in self._groups():
                wd = g["weight_decay"]
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    st = self.state.get(p)
                    if st is None:
                        st = self.state[p] = self._init_state(p, g["amsgrad"])
                    if _eager_data_ok(p):
                        try:
                            self._update_data(p, g, st)
                            continue
                        except _Fallback:       # (raised before anything is written)
                            pass
                    grad = -p.grad if g["maximize"] else p.grad
                    s = self._scalars(gi, g, p)
                    step = st["step"]._assign(st["step"] + 1)
                    if wd and self._decoupled:
                        p._assign(p * s("1-lr*weight_decay"))
                    elif wd:
                        grad = grad + s("weight_decay") * p
                    m = st["exp_avg"]._assign(st["exp_avg"] * s("beta1") + grad * s("1-beta1"))
                    v = st["exp_avg_sq"]._assign(st["exp_avg_sq"] * s("beta2") + grad * grad * s("1-beta2"))
                    if g["amsgrad"]:
                        v = st["max_exp_avg_sq"]._assign(ops.maximum(st["max_exp_avg_sq"], v))
                    # float64 parameters get float64 bias corrections
                    t = step.astype(p.dtype) if p.dtype.itemsize > 4 else step
                    bc1 = 1 - s("beta1") ** t
                    bc2_sqrt = ops.sqrt(1 - s("beta2") ** t)
                    denom = ops.sqrt(v) / bc2_sqrt + s("eps")
                    p._assign(p - (s("lr") / bc1) * m / denom)
        return loss


    def _update_data(self, p, g, st):
        """The op path's update, op for op, on the arrays (in place; see SGD._update_data)."""
        xp = array_module(p.device)
        P, G = p._data, p.grad._data
        lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
        M, V = _data_of(st["exp_avg"], p), _data_of(st["exp_avg_sq"], p)
        MX = _data_of(st["max_exp_avg_sq"], p) if g["amsgrad"] else None
        step = st["step"]._assign(st["step"] + 1)          # 0-d values: the op path itself
        if MX is None and self._fused_update(p, g, st, step, P, G, M, V):
            return
        if g["maximize"]:
            G = xp.negative(G)
        if wd and self._decoupled:
            xp.multiply(P, 1 - lr * wd, out=P)
        elif wd:
            G = G + xp.multiply(wd, P)
        t = xp.multiply(G, 1 - b1)
        xp.multiply(M, b1, out=M)
        xp.add(M, t, out=M)
        t = xp.multiply(G, G)
        xp.multiply(t, 1 - b2, out=t)
        xp.multiply(V, b2, out=V)
        xp.add(V, t, out=V)
        st["exp_avg"]._version[0] += 1
        st["exp_avg_sq"]._version[0] += 1
        if MX is not None:
            xp.maximum(MX, V, out=MX)
            st["max_exp_avg_sq"]._version[0] += 1
            V = MX
        tt = step.astype(p.dtype) if p.dtype.itemsize > 4 else step
        bc1 = 1 - b1 ** tt
        bc2_sqrt = ops.sqrt(1 - b2 ** tt)._data
        denom = xp.sqrt(V)
        xp.divide(denom, bc2_sqrt, out=denom)
        xp.add(denom, eps, out=denom)
        u = xp.multiply((lr / bc1)._data, M)
        xp.divide(u, denom, out=u)
        xp.subtract(P, u, out=P)
        p._version[0] += 1


    def _fused_update(self, p, g, st, step, P, G, M, V):
        """The update as one pass over the parameter (``nbaccel_kernels.fused.adam_update``,
        the fused/foreach path of issue 36) when the kernels are loaded and the arrays are
        contiguous NumPy ones of one float dtype; False (nothing written) otherwise. Every
        operation rounds as the array path below does (the same order, the parameter's dtype,
        the bias corrections from the same ops), so the two give the same bits."""
        if type(P) is not np.ndarray or P.dtype not in _FUSED_DTYPES:
            return False
        for a in (G, M, V):
            if type(a) is not np.ndarray or a.dtype is not P.dtype or a.shape != P.shape:
                return False
        if not (P.flags.c_contiguous and G.flags.c_contiguous and M.flags.c_contiguous
                and V.flags.c_contiguous):
            return False
        k = kernel_modules.eager_kernels("fused")
        if k is None:
            return False
        lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
        # the bias corrections as the array path's ops compute them (the same ufuncs on the
        # step's 0-d array, Python numbers taking its dtype), without 6 op dispatches a
        # parameter (they cost more than the update of a small parameter itself)
        tt = step._data.astype(P.dtype) if P.dtype.itemsize > 4 else step._data
        ft = tt.dtype.type
        bc1 = ft(1) - np.power(ft(b1), tt)
        bc2_sqrt = np.sqrt(ft(1) - np.power(ft(b2), tt))
        sc = np.array([wd, b1, 1 - b1, b2, 1 - b2, bc2_sqrt, eps, ft(lr) / bc1, 1 - lr * wd],
                      P.dtype)
        k.adam_update(P.reshape(-1), G.reshape(-1), M.reshape(-1), V.reshape(-1), sc, bool(wd),
                      bool(self._decoupled), bool(g["maximize"]))
        st["exp_avg"]._version[0] += 1
        st["exp_avg_sq"]._version[0] += 1
        p._version[0] += 1
        return True


_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam update. Defaults as PyTorch (lr=1e-3, weight_decay=1e-2)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
