"""Mixed precision: ``autocast`` (PyTorch's ``torch.amp.autocast``) and ``GradScaler``.

Inside ``autocast("cpu")`` (bfloat16 by default, as PyTorch on the CPU) the ops that gain from
low precision (matmul, linear, attention, convolutions) take their floating inputs in bfloat16,
and the ops that need the range (losses, ``prod``, ``trace``, the linear-algebra solvers) take
them in float32, as PyTorch's CPU autocast lists do. The casts are ordinary ``astype`` ops, so
autograd runs through them (gradients reach float32 parameters in float32) and a compiled
function traces them like any other op.

>>> import nbaccel as nb
>>> lin = nb.nn.Linear(4, 2)
>>> with nb.autocast("cpu"):
...     y = lin(nb.ones(3, 4))
>>> y.dtype
nbaccel.bfloat16
"""
from __future__ import annotations

import contextlib

from . import autograd, ops
from . import dtypes as D
from . import dispatch

__all__ = ["autocast", "GradScaler", "is_autocast_available"]

# op names (nbaccel's op table); the conv names are those of the convolution family
LOWER = frozenset({"matmul", "linear", "scaled_dot_product_attention", "flash_attention",
                   "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                   "einsum", "tensordot", "bmm", "baddbmm", "addmm"})
FLOAT32 = frozenset({"cross_entropy", "mse_loss", "binary_cross_entropy",
                     "binary_cross_entropy_with_logits", "prod", "trace", "cholesky", "inv",
                     "solve", "pinv", "det", "slogdet", "qr", "eigh", "svd"})


class _Caster:
    """What ``dispatch.apply`` calls for every op while autocast is on."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, op, args):
        name = op.name
        if name in LOWER:
            target = self.dtype
        elif name in FLOAT32:
            target = D.float32
        else:
            return args
        return tuple(self._cast(a, target) for a in args)

    @staticmethod
    def _cast(a, target):
        # float64 stays as it is (PyTorch's autocast leaves it alone too)
        if isinstance(a, dispatch.Tensor) and a.dtype.kind == "f" and a.dtype is not target \
                and a.dtype is not D.float64:
            return a.astype(target)
        return a


def float32_input(x):
    """``x`` as autocast gives it to an op of its float32 list, for functions that are
    compositions rather than ops (``F.nll_loss``): cast to float32 inside autocast."""
    caster = dispatch.AUTOCAST
    return caster._cast(x, D.float32) if caster is not None else x


def is_autocast_available(device_type: str) -> bool:
    return device_type in ("cpu", "cuda")


class autocast(contextlib.ContextDecorator):
    """``autocast(device_type="cpu", dtype=None, enabled=True, cache_enabled=None)``: a
    context manager (and decorator) for mixed precision. ``dtype`` defaults to bfloat16 on the
    CPU and float16 on CUDA. Nesting restores the outer state on exit."""

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True,
                 cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"autocast: device_type must be a string, got {device_type!r}")
        kind = device_type.split(":")[0]
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"autocast: device_type must be 'cpu' or 'cuda', got {device_type!r}")
        self.device_type = kind
        self.fast_dtype = D.dtype(dtype) if dtype is not None else (
            D.bfloat16 if kind == "cpu" else D.float16)
        if self.fast_dtype not in (D.bfloat16, D.float16):
            raise RuntimeError(f"autocast: dtype must be bfloat16 or float16, got {self.fast_dtype}")
        self.enabled = bool(enabled)
        self._prev = []

    def __enter__(self):
        self._prev.append(dispatch.AUTOCAST)
        dispatch.AUTOCAST = _Caster(self.fast_dtype) if self.enabled else None
        return self

    def __exit__(self, *exc):
        dispatch.AUTOCAST = self._prev.pop()
        return False


def is_autocast_enabled(device_type: str | None = None) -> bool:
    return dispatch.AUTOCAST is not None


def get_autocast_dtype(device_type: str = "cpu"):
    c = dispatch.AUTOCAST
    return c.dtype if c is not None else (D.bfloat16 if device_type == "cpu" else D.float16)


class GradScaler:
    """Dynamic loss scaling for float16 training (PyTorch's ``GradScaler``): ``scale(loss)``
    multiplies by the scale, ``step(opt)`` unscales the gradients and skips the step when any
    is inf or NaN, ``update()`` halves the scale after a skipped step and doubles it after
    ``growth_interval`` good ones. With ``enabled=False`` every method passes through."""

    def __init__(self, device: str = "cpu", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda"):
            raise ValueError(f"GradScaler: unknown device {device!r}")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: dict = {}      # id(optimizer) -> {"unscaled": bool, "found_inf": bool}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        return outputs * self._scale

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        st = self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False})
        if st["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        inv = 1.0 / self._scale
        found = False
        with autograd.no_grad():
            for g in optimizer.param_groups:
                for p in g["params"]:
                    if p.grad is None:
                        continue
                    p.grad._assign(p.grad * inv)
                    if not found and not bool(ops.isfinite(p.grad).all()):
                        found = True
        st["unscaled"], st["found_inf"] = True, found

    def step(self, optimizer, *args, **kwargs):
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        st = self._per_optimizer.get(id(optimizer))
        if st is None or not st["unscaled"]:
            self.unscale_(optimizer)
            st = self._per_optimizer[id(optimizer)]
        if st["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        elif any(st["found_inf"] for st in self._per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict):
        if not self._enabled:
            return
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
