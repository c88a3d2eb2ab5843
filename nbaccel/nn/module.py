"""``Module``: the base class of layers (parameters, buffers, submodules, state_dict, train/eval).

>>> import nbaccel as nb
>>> lin = nb.nn.Linear(3, 2)
>>> [n for n, _ in lin.named_parameters()]
['weight', 'bias']
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np

from ..convert import asarray

from ..tensor import Parameter, Tensor
from .. import autograd, dtypes as D
from ..parameter_holder import ParameterHolder

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _indent(text: str, n: int = 2) -> str:
    lines = text.split("\n")
    return "\n".join([lines[0]] + [" " * n + line for line in lines[1:]])


def _as_state(value):
    """A state_dict entry as a Tensor; state that is not a Tensor but copies itself in place
    (``__nbaccel_state__``: a ``nbaccel.quant.QuantizedTensor``) passes as it is."""
    if isinstance(value, Tensor) or getattr(value, "__nbaccel_state__", False):
        return value
    return asarray(value)


class Module(ParameterHolder):   # the compiler knows a module by this type (parameter_holder.py)
    """Base class for layers. Assigning a Parameter, a Module or (via ``register_buffer``) a
    buffer to an attribute registers it; ``__call__`` runs ``forward``."""

    training: bool
    # whether a raw NumPy array among the positional inputs is refused with PyTorch's TypeError:
    # nbaccel.nn's layers refuse it (PyTorch's call a torch function on it, which does); a
    # class whose forward is its own (a user's model), Identity and the containers pass it on
    _takes_tensors = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_takes_tensors" not in cls.__dict__:
            owner = next(c for c in cls.__mro__ if "forward" in c.__dict__ or c is Module)
            cls._takes_tensors = owner.__dict__.get(
                "_takes_tensors", owner.__module__.startswith("nbaccel.nn."))

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent"] = set()
        d["_modules"] = OrderedDict()

    # -- registration ---------------------------------------------------------------------
    def _check_ready(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def _forget(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            self.__dict__[store].pop(name, None)
        self.__dict__.pop(name, None)
        self._non_persistent.discard(name)

    def register_parameter(self, name: str, param: Parameter | None):
        """Add a parameter (None reserves the name, as for ``bias=False``)."""
        self._check_ready("parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (nbaccel.nn.Parameter or None required)")
        if "." in name or not name:
            raise KeyError(f"parameter name can't contain '.' or be empty, got {name!r}")
        self._forget(name)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True):
        """Add a tensor that is state but not a parameter (saved in state_dict if persistent)."""
        self._check_ready("buffers")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(Tensor or None required)")
        self._forget(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: "Module | None"):
        """Add a submodule."""
        self._check_ready("child modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._forget(name)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self.add_module(name, value)
        elif "_parameters" in d and name in d["_parameters"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(nbaccel.nn.Parameter or None expected)")
            d["_parameters"][name] = None
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (Module or None expected)")
            d["_modules"][name] = None
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, {}):
                del self.__dict__[store][name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # -- running ----------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required "
                                  "\"forward\" function")

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_forward")
        if compiled is not None:
            return compiled(*args, **kwargs)
        if self._takes_tensors:
            for a in args:
                if type(a) is np.ndarray:
                    raise TypeError(f"{type(self).__name__}: argument 'input' must be Tensor, not "
                                    "numpy.ndarray (as in PyTorch, a layer takes tensors: "
                                    "convert it with torch.from_numpy(x) or torch.as_tensor(x))")
        return self.forward(*args, **kwargs)

    def compile(self, **kwargs):
        """Compile this module's forward in place (like ``torch.nn.Module.compile``); keyword
        arguments are those of ``nbaccel.compile``. The compiled function is ``self.compiled``."""
        from ..compiler import compile as _compile  # at call time, the public API: the compiler sits above nn
        object.__setattr__(self, "_compiled_forward", None)
        wrapper = _compile(self, **kwargs)
        object.__setattr__(self, "_compiled_forward", wrapper._compiled)
        return self

    @property
    def compiled(self):
        return self.__dict__.get("_compiled_forward")

    # -- traversal ----------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(name, module) for self and every descendant, depth first."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, m in mods:
            for name, t in m.__dict__[store].items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{mprefix}.{name}" if mprefix else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """(qualified name, Parameter) pairs; shared parameters appear once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> "Module":
        m = self
        for part in target.split(".") if target else ():
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no submodule `{part}`")
            m = m._modules[part]
        return m

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first), then on self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes and gradients ------------------------------------------------------------------
    def train(self, mode: bool = True):
        """Training mode (dropout active). Returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self):
        """Evaluation mode (dropout off): ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True):
        """Clear the gradients of every parameter (set them to None, or zero them)."""
        autograd.zero_grads(self.parameters(), set_to_none)

    # -- device and dtype -------------------------------------------------------------------------
    def _convert(self, fn):
        """Apply ``fn`` to every parameter's data in place (references stay valid) and
        replace buffers."""
        with autograd.no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is None:
                        continue
                    new = fn(p.detach())
                    p._data, p.dtype, p.device = new._value(), new.dtype, new.device
                    p._version[0] += 1
                    if p.grad is not None:
                        p.grad = fn(p.grad)
                for name, b in list(m._buffers.items()):
                    if b is not None:
                        m._buffers[name] = fn(b)
        return self

    def to(self, *args, device=None, dtype=None, non_blocking=False):
        """Move / cast parameters and buffers in place; only floating tensors change dtype."""
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, D.DType) or (isinstance(a, str) and a in D._BY_NAME) \
                    or (isinstance(a, type) and a.__module__ == "numpy"):
                dtype = a
            else:
                device = a
        dt = D.dtype(dtype) if dtype is not None else None
        if dt is not None and dt.kind != "f":
            raise TypeError(f"Module.to only accepts floating point dtypes, got {dt}")

        def fn(t):
            if dt is not None and t.dtype.kind == "f":
                t = t.astype(dt)
            return t.to(device) if device is not None else t
        return self._convert(fn)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    def float(self):
        return self.to(dtype="float32")

    def double(self):
        return self.to(dtype="float64")

    def half(self):
        return self.to(dtype="float16")

    def bfloat16(self):
        return self.to(dtype="bfloat16")

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of qualified name -> tensor (parameters and persistent buffers),
        detached unless ``keep_vars``; the tensors share memory with the module."""
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy tensors from ``state_dict`` into this module's parameters and buffers.

        A shape mismatch is always an error naming the key; with ``strict`` missing or
        unexpected keys are too. Returns ``(missing_keys, unexpected_keys)``."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for k, target in own.items():
            if k not in state_dict:
                continue
            src = _as_state(state_dict[k])
            if tuple(src.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {k}: copying a param with shape "
                              f"{tuple(src.shape)} from checkpoint, the shape in current model "
                              f"is {tuple(target.shape)}.")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with autograd.no_grad():
            for k, target in own.items():
                if k in state_dict:
                    target.copy_(_as_state(state_dict[k]))
        return IncompatibleKeys(missing, unexpected)

    # -- printing --------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in its repr (override in subclasses)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = [line for line in self.extra_repr().split("\n") if line]
        children = [f"({name}): " + _indent(repr(m)) for name, m in self._modules.items()]
        if not children and len(extra) <= 1:
            return f"{self._get_name()}({''.join(extra)})"
        return self._get_name() + "(\n  " + "\n  ".join(extra + children) + "\n)"
