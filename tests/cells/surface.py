"""The NumPy surface, measured, and its table in docs/magics.md.

* every public attribute of ``np.ndarray`` (issue 21, item 2): representative calls (positional
  and keyword arguments, ``out=``, in-place forms), run by tests/test_ndarray_surface.py;
* every draw of ``np.random``: the legacy global state, a RandomState and a Generator, seeded,
  with traced parameters, ``out=`` and in-place shuffles (tests/test_numpy_random_surface.py);
* calls of three and more arguments (tests/test_numpy_keyword_surface.py).

Each row runs plainly and under ``%%compile`` and must give the same result, compiled or in a
plain run that says why. ``python -m tests.cells.surface`` prints the tables (markdown) that
docs/magics.md holds; tests/test_numpy_surface_table.py checks that the docs' rows are these
rows and that each row says how the cell runs (captured, a graph break to NumPy's own, or
plainly) as it does.
"""
from __future__ import annotations

from .catalogue import Cell

SETUP = ("import numpy as np\nA = np.arange(12.0).reshape(3, 4) - 5.5\nv = np.array([3.0, 1.0, 2.0, 5.0, 4.0])\n"
         "i = np.arange(6)\nb = A > 0\nz = np.array([1 + 2j, 3 - 1j])\n")

CALLS = {
    "T": ["r = A.T + 0\n"],
    "all": ["r = b.all()\ns = b.all(axis=0)\nt = b.all(1, keepdims=True)\n"],
    "any": ["r = b.any()\ns = b.any(axis=1)\n"],
    "argmax": ["r = A.argmax()\ns = A.argmax(axis=0)\nt = A.argmax(1, keepdims=True)\n"],
    "argmin": ["r = A.argmin()\ns = A.argmin(axis=1)\n"],
    "argpartition": ["r = v.argpartition(2)\n"],
    "argsort": ["r = v.argsort()\ns = A.argsort(axis=0)\nt = v.argsort(kind='stable')\n"],
    "astype": ["r = A.astype(np.float32)\ns = A.astype('int64')\nt = A.astype(dtype=bool, copy=True)\n"],
    "base": ["r = A.base is None\ns = A[1:].base is A\n"],
    "byteswap": ["r = i.byteswap()\ni.byteswap(inplace=True)\n"],
    "choose": ["r = np.array([0, 1, 0]).choose([[1, 2, 3], [4, 5, 6]])\n"],
    "clip": ["r = A.clip(-1, 1)\ns = A.clip(min=0)\nA.clip(-2, 2, out=A)\n"],
    "compress": ["r = v.compress([True, False, True])\ns = A.compress([0, 1, 1], axis=0)\n"],
    "conj": ["r = z.conj()\ns = A.conj()\n"],
    "conjugate": ["r = z.conjugate()\n"],
    "copy": ["r = A.copy()\nr[0, 0] = 99\ns = A.copy(order='F')\n"],
    "ctypes": ["r = A.ctypes.data != 0\n"],
    "cumprod": ["r = v.cumprod()\ns = A.cumprod(axis=1)\n"],
    "cumsum": ["r = v.cumsum()\ns = A.cumsum(axis=0, dtype=np.float32)\nA.cumsum(axis=1, out=A)\n"],
    "data": ["r = bytes(A.data)[:8]\n"],
    "device": ["r = A.device\n"],
    "diagonal": ["r = A.diagonal()\ns = A.diagonal(1)\nt = A.diagonal(offset=-1)\n"],
    "dot": ["r = A.dot(A.T)\ns = v.dot(v)\n"],
    "dtype": ["r = A.dtype\ns = A.dtype.kind\nt = str(i.dtype)\n"],
    "dump": [],                   # writes a file: not a cell-contract example
    "dumps": ["r = len(A.dumps()) > 0\n"],
    "fill": ["A.fill(2.5)\n", "v.fill(0)\nr = v + 1\n"],
    "flags": ["r = A.flags['C_CONTIGUOUS']\ns = A.T.flags.f_contiguous\n"],
    "flat": ["r = list(A.flat)[:3]\ns = A.flat[5]\nA.flat[2] = 10\n"],
    "flatten": ["r = A.flatten()\ns = A.flatten('F')\n"],
    "getfield": ["r = A.getfield(np.float64)\n"],
    "imag": ["r = z.imag\ns = A.imag\n"],
    "item": ["r = A.item(3)\ns = A.item((1, 2))\nt = v[:1].item()\n"],
    "itemsize": ["r = A.itemsize\ns = i.itemsize\n"],
    "mT": ["r = A.mT + 0\n"],
    "max": ["r = A.max()\ns = A.max(axis=0)\nt = A.max(1, keepdims=True)\nu = A.max(initial=100)\n"],
    "mean": ["r = A.mean()\ns = A.mean(axis=1)\nt = i.mean(dtype=np.float32)\n"],
    "min": ["r = A.min()\ns = A.min(axis=(0, 1))\n"],
    "nbytes": ["r = A.nbytes\n"],
    "ndim": ["r = A.ndim\n"],
    "nonzero": ["r = b.nonzero()\ns = v.nonzero()\n"],
    "partition": ["v.partition(2)\nr = v + 0\n", "A.partition(1, axis=1)\n"],
    "prod": ["r = v.prod()\ns = A.prod(axis=0)\n"],
    "put": ["v.put([0, 2], [9.0, 8.0])\n", "A.put(5, -1.0)\n"],
    "ravel": ["r = A.ravel()\ns = A.ravel('F')\n"],
    "real": ["r = z.real\ns = A.real + 0\n"],
    "repeat": ["r = v.repeat(2)\ns = A.repeat(2, axis=1)\nt = A.repeat([1, 2, 0], axis=0)\n"],
    "reshape": ["r = A.reshape(4, 3)\ns = A.reshape((2, -1))\nt = A.reshape(-1, order='F')\n"],
    "resize": ["c = A.copy()\nc.resize((2, 2), refcheck=False)\n"],
    "round": ["r = (A / 3).round(2)\ns = A.round()\n"],
    "searchsorted": ["r = np.sort(v).searchsorted(2.5)\ns = np.sort(v).searchsorted([1, 4], side='right')\n"],
    "setfield": ["c = A.copy()\nc.setfield(1.0, np.float64)\n"],
    "setflags": ["c = A.copy()\nc.setflags(write=False)\nr = c.flags.writeable\n"],
    "shape": ["r = A.shape\ns = A[:, None].shape\n"],
    "size": ["r = A.size\ns = A[0].size\n"],
    "sort": ["v.sort()\n", "A.sort(axis=0)\nr = A + 0\n", "v.sort(kind='stable')\n"],
    "squeeze": ["r = A[None].squeeze()\ns = A[:, None].squeeze(axis=1)\n"],
    "std": ["r = A.std()\ns = A.std(axis=0, ddof=1)\n"],
    "strides": ["r = A.strides\ns = A.T.strides\n"],
    "sum": ["r = A.sum()\ns = A.sum(axis=1)\nt = A.sum(0, keepdims=True)\nu = i.sum(dtype=np.int32)\n",
            "o = np.zeros(4)\nA.sum(axis=0, out=o)\n"],
    "swapaxes": ["r = A.swapaxes(0, 1)\n"],
    "take": ["r = v.take([0, 3])\ns = A.take([1, 0], axis=1)\nt = v.take(7, mode='wrap')\n"],
    "to_device": ["r = A.to_device('cpu') + 0\n"],
    "tobytes": ["r = A.tobytes()\ns = A.T.tobytes()\n"],
    "tofile": [],                 # writes a file
    "tolist": ["r = A.tolist()\ns = v[0].tolist()\n"],
    "trace": ["r = A.trace()\ns = A.trace(1)\n"],
    "transpose": ["r = A.transpose()\ns = A.transpose(1, 0)\nt = A.transpose((1, 0))\n"],
    "var": ["r = A.var()\ns = A.var(axis=1, ddof=1)\n"],
    "view": ["r = A.view()\nr[0, 0] = 50\n", "r = A.view(np.int64)\n"],
}
# __setitem__ with every kind of index
SETITEM = {
    "setitem_int": "A[1] = 7\n", "setitem_neg": "A[-1, -1] = 7\n", "setitem_slice": "A[:, 1:3] = 0\n",
    "setitem_step": "A[::2, ::-1] = 1\n", "setitem_ellipsis": "A[..., 0] = -1\n", "setitem_none": "A[None, 1] = 4\n",
    "setitem_list": "A[[0, 2]] = 3\n", "setitem_int_arrays": "A[np.array([0, 1]), np.array([3, 2])] = 8\n",
    "setitem_bool": "A[A > 0] = 0\n", "setitem_bool_rows": "A[np.array([True, False, True])] = 1\n",
    "setitem_broadcast": "A[:] = np.arange(4)\n", "setitem_aug_fancy": "A[[0, 0, 1]] += 1\n",
    "setitem_aug_mask": "A[A < 0] *= -1\n", "setitem_tuple_mix": "A[1, [0, 3]] = 5\n",
}


# -- np.random --------------------------------------------------------------------------------
RANDOM_SETUP = "import numpy as np\nA = np.arange(1.0, 13.0).reshape(3, 4) / 7\n"
# the arguments each draw takes: shape parameters first, then size
ARGS = {"beta": "2.0, 3.0", "binomial": "5, 0.5", "chisquare": "0.5", "f": "2.0, 3.0", "gamma": "0.5",
        "geometric": "0.5", "hypergeometric": "5, 2, 3", "logseries": "0.5", "negative_binomial": "5, 0.5",
        "noncentral_chisquare": "2.0, 3.0", "noncentral_f": "1.0, 2.0, 3.0", "pareto": "0.5",
        "power": "0.5", "randint": "2, 9", "integers": "2, 9", "random_integers": "2, 9",
        "standard_gamma": "0.5", "standard_t": "0.5", "triangular": "1.0, 2.0, 3.0", "vonmises": "2.0, 3.0",
        "wald": "2.0, 3.0", "weibull": "0.5", "zipf": "2.0"}
SIZE_ONLY = ["exponential", "gumbel", "laplace", "logistic", "lognormal", "normal", "poisson", "random",
             "rayleigh", "standard_cauchy", "standard_exponential", "standard_normal", "uniform"]
LEGACY_ONLY = ["random_sample", "ranf", "sample", "randint", "random_integers"]
GENERATOR_ONLY = ["integers"]
COMMON = sorted(set(ARGS) - set(LEGACY_ONLY) - set(GENERATOR_ONLY)) + SIZE_ONLY


def _draw(name):
    args = ARGS.get(name)
    return f"{name}({args}, size=(3, 4))" if args else f"{name}(size=(3, 4))"


LEGACY = [(n, f"np.random.seed(1)\nr = np.random.{_draw(n)} * A + 1\nafter = np.random.random()\n")
          for n in COMMON + LEGACY_ONLY]
LEGACY += [("rand", "np.random.seed(2)\nr = np.random.rand(3, 4) - A\n"),
           ("randn", "np.random.seed(2)\nr = np.random.randn(3, 4) * A\nafter = np.random.randn()\n"),
           ("bytes", "np.random.seed(2)\nr = np.random.bytes(8)\n"),
           ("choice", "np.random.seed(3)\nr = np.random.choice(A.ravel(), 5) * 2\n"),
           ("choice-p", "np.random.seed(3)\nr = np.random.choice(4, 6, p=A[0] / A[0].sum())\n"),
           ("permutation", "np.random.seed(4)\nr = np.random.permutation(A) + 1\n"),
           ("shuffle", "np.random.seed(4)\nnp.random.shuffle(A)\nr = A * 2\n"),
           ("normal-traced-loc", "np.random.seed(5)\nr = np.random.normal(A, 2.0) - A\n"),
           ("uniform-traced-bounds", "np.random.seed(5)\nr = np.random.uniform(A, A + 1)\n"),
           ("get_state", "np.random.seed(6)\nx = A * 3\nstate = np.random.get_state()[1][:4]\n"),
           ("multivariate_normal", "np.random.seed(7)\n"
            "r = np.random.multivariate_normal(np.zeros(2), np.eye(2), size=3) + 1\n"),
           ("dirichlet", "np.random.seed(7)\nr = np.random.dirichlet([1.0, 2.0, 3.0], size=3) * 2\n"),
           ("multinomial", "np.random.seed(7)\nr = np.random.multinomial(10, [0.2, 0.3, 0.5], size=3)\n"),
           ("RandomState", "rs = np.random.RandomState(8)\nr = rs.normal(size=(3, 4)) * A\n"
            "after = rs.random_sample()\n")]
GENERATOR = [(n, f"rng = np.random.default_rng(1)\nr = rng.{_draw(n)} * A + 1\nafter = rng.random()\n")
             for n in COMMON + GENERATOR_ONLY]
GENERATOR += [("bytes", "rng = np.random.default_rng(2)\nr = rng.bytes(8)\n"),
              ("choice", "rng = np.random.default_rng(3)\nr = rng.choice(A, 2) * 2\n"),
              ("choice-axis", "rng = np.random.default_rng(3)\nr = rng.choice(A, 3, axis=1, replace=False)\n"),
              ("permutation", "rng = np.random.default_rng(4)\nr = rng.permutation(A) + 1\n"),
              ("permuted", "rng = np.random.default_rng(4)\nr = rng.permuted(A, axis=1) - A\n"),
              ("shuffle", "rng = np.random.default_rng(4)\nrng.shuffle(A)\nr = A * 2\n"),
              ("normal-traced-loc", "rng = np.random.default_rng(5)\nr = rng.normal(A, 2.0) - A\n"),
              ("integers-traced-high", "rng = np.random.default_rng(5)\nr = rng.integers(0, (A * 10 + 1).astype(int))\n"),
              ("out", "rng = np.random.default_rng(6)\nbuf = np.empty((3, 4))\n"
               "rng.standard_normal(out=buf)\nr = buf * A\n"),
              ("spawn", "rng = np.random.default_rng(6)\nkids = rng.spawn(2)\nr = kids[1].random(3) + A[0, :3]\n"),
              ("multivariate_normal", "rng = np.random.default_rng(7)\n"
               "r = rng.multivariate_normal(np.zeros(2), np.eye(2), size=3) + 1\n"),
              ("dirichlet", "rng = np.random.default_rng(7)\nr = rng.dirichlet([1.0, 2.0, 3.0], size=3) * 2\n"),
              ("multinomial", "rng = np.random.default_rng(7)\nr = rng.multinomial(10, [0.2, 0.3, 0.5], size=3)\n"),
              ("multivariate_hypergeometric", "rng = np.random.default_rng(7)\n"
               "r = rng.multivariate_hypergeometric([3, 4, 5], 6, size=2)\n"),
              ("bit_generator", "bg = np.random.PCG64(9)\nrng = np.random.Generator(bg)\n"
               "r = rng.random((3, 4)) * A\nafter = bg.random_raw()\n")]


# -- calls of three and more arguments ---------------------------------------------------------
MANY_SETUP = ("import numpy as np\nA = np.arange(1.0, 13.0).reshape(3, 4) / 7\n"
         "B = np.arange(12.0, 0.0, -1).reshape(3, 4) / 5\nM = (np.arange(12) % 3 == 0).reshape(3, 4)\n"
         "C = np.zeros((3, 4))\n")
MANY_ARGS = ["np.clip(A, 0.2, 0.8)", "np.clip(A, a_min=0.2, a_max=None)", "np.where(M, A, B)",
             "np.where(A > 0.5)", "np.einsum('ij,kj->ik', A, B)", "np.einsum('ij,ij,ij->i', A, B, A)",
             "np.concatenate([A, B, A], axis=1)", "np.stack([A, B], axis=-1)", "np.linspace(A[0], B[0], 5)",
             "np.linspace(0, 1, 7, endpoint=False, retstep=True)", "np.arange(1, 10, 2, dtype=np.float32)",
             "np.full((2, 3), 7, dtype=np.int16)", "np.pad(A, ((1, 0), (2, 1)), mode='reflect')",
             "np.pad(A, 1, constant_values=-1)", "np.interp(A, [0, 1, 2], [5, 3, 1])",
             "np.histogram(A, bins=4, range=(0, 2))", "np.percentile(A, [10, 90], axis=0)",
             "np.quantile(A, 0.5, method='nearest')", "np.take_along_axis(A, np.argsort(A, axis=1), axis=1)",
             "np.put_along_axis(C, np.argmax(A, axis=1, keepdims=True), 9.0, axis=1)",
             "np.select([A < 0.5, A > 1], [A, B], default=-1)", "np.piecewise(A, [A < 0.5], [0, 1])",
             "np.tensordot(A, B, axes=([1], [1]))", "np.moveaxis(np.stack([A, B]), 0, -1)",
             "np.swapaxes(A, 0, 1)", "np.roll(A, (1, -1), axis=(0, 1))", "np.tile(A, (2, 1))",
             "np.repeat(A, [1, 2, 0, 1], axis=1)", "np.split(A, [1, 3], axis=1)",
             "np.array_split(A, 3, axis=1)", "np.diff(A, n=2, axis=1, prepend=0)",
             "np.cumsum(A, axis=1, dtype=np.float32)", "np.sum(A, axis=(0, 1), where=M)",
             "np.mean(A, axis=1, where=M)", "np.std(A, axis=0, ddof=1, keepdims=True)",
             "np.average(A, axis=1, weights=B[0])", "np.isclose(A, B, rtol=0.1, atol=0.2)",
             "np.allclose(A, A + 1e-9, equal_nan=True)", "np.round(A, 3, out=C)",
             "np.matmul(A, B.T, out=np.empty((3, 3)))", "np.dot(A, B.T)", "np.outer(A[0], B[1])",
             "np.cross(A[:, :3], B[:, :3], axis=1)", "np.convolve(A[0], B[0], mode='same')",
             "np.correlate(A[0], B[0], 'full')", "np.polyval([1, 2, 3], A)", "np.polyfit(A[0], B[0], 2)",
             "np.trapezoid(A, dx=0.5, axis=1)", "np.meshgrid(A[0], B[:, 0], indexing='ij')",
             "np.searchsorted(np.sort(A[0]), B[0], side='right')", "np.digitize(A, [0.3, 0.9], right=True)",
             "np.bincount(np.arange(6) % 4, weights=A.ravel()[:6], minlength=5)",
             "np.nan_to_num(A / (A - A), nan=0.5, posinf=9)", "np.unique(A.round(), return_index=True, "
             "return_inverse=True)", "np.linalg.norm(A, ord='fro', axis=(0, 1))",
             "np.linalg.norm(A, 2, axis=1, keepdims=True)", "np.linalg.solve(A[:, :3] + np.eye(3), B[:, :3])",
             "np.linalg.lstsq(A, B[:, 0], rcond=None)", "np.linalg.svd(A, full_matrices=False)",
             "np.linalg.eigh(A[:, :3] @ A[:, :3].T, UPLO='U')", "np.fft.fft(A, n=8, axis=0, norm='forward')",
             "np.fft.rfftn(A, s=(4, 6), axes=(0, 1))", "np.fft.irfft(A, 10)", "np.fft.fftfreq(8, d=0.1)",
             "np.apply_along_axis(np.sort, 1, A)", "np.add(A, B, out=(C,), casting='unsafe')",
             "np.multiply(A, 2, out=A)", "np.divide(A, B, out=np.zeros_like(A), where=B > 1)"]


def numpy_rows():
    """(section, label, Cell) for the np.random draws and the calls of many arguments."""
    rows = [("np.random (the legacy state, RandomState)", f"np.random.{n}", Cell(f"legacy-{n}", body, setup=RANDOM_SETUP))
            for n, body in LEGACY]
    rows += [("np.random.Generator", f"Generator.{n}", Cell(f"generator-{n}", body, setup=RANDOM_SETUP))
             for n, body in GENERATOR]
    rows += [("calls of three and more arguments", call, Cell(call[:40], f"r = {call}\n", setup=MANY_SETUP))
             for call in MANY_ARGS]
    return rows


def how(shell) -> str:
    """How the last ``%%compile`` run of ``shell`` went: "compiled" (kernels, no graph break),
    "graph break: <the first reason>" (compiled; part runs as NumPy's own), "NumPy's own on the
    input values" (nothing to compile: no kernel), or "plainly: <why>"."""
    from nbaccel.magics import get_extension
    ext = get_extension(shell)
    if ext.last_fallback is not None:
        return "plainly: " + _short(ext.last_fallback)
    report = ext.last[1]
    if report.fallback:
        return "plainly: " + _short(report.fallback)
    if report.graph_breaks:
        return "graph break: " + _short(report.graph_breaks[0]["reason"])
    if not report.kernels:
        return "NumPy's own on the input values"
    return "compiled"


def kind(how_text: str) -> str:
    """The category of a row's text (what tests/test_numpy_surface_table.py compares)."""
    return how_text.split(":", 1)[0]


def _short(why: str) -> str:
    why = why.split(" (", 1)[-1].rsplit("); the cell ran plainly", 1)[0] if "compiled run failed" in why else why
    return why.replace("|", "\\|").replace("\n", " ")


def numpy_table(results) -> str:
    """Markdown: section headings, then call -> how it runs under %%compile."""
    lines, section = [], None
    for sec, label, cell in numpy_rows():
        if sec != section:
            section = sec
            lines += ["", f"| {sec} | in a compiled cell |", "|---|---|"]
        lines.append(f"| `{label.replace('|', chr(92) + '|')}` | {results[cell.name]} |")
    return "\n".join(lines).lstrip("\n")


def cells():
    out = []
    for name, calls in CALLS.items():
        for k, src in enumerate(calls):
            out.append(Cell(f"{name}_{k}", src, setup=SETUP))
    out += [Cell(k, v, setup=SETUP) for k, v in SETITEM.items()]
    return out


def table(results) -> str:
    """Markdown: attribute -> compiled / plain (with the reason)."""
    lines = ["| ndarray attribute | in a compiled cell |", "|---|---|"]
    for name in CALLS:
        rows = [r for k, r in results.items() if k.rsplit("_", 1)[0] == name]
        if not CALLS[name]:
            lines.append(f"| `{name}` | not measured (writes a file) |")
        elif all(r is None for r in rows):
            lines.append(f"| `{name}` | same as NumPy |")
        else:
            why = next(r for r in rows if r is not None)
            why = why.split(" (", 1)[-1].rsplit("); the cell ran plainly", 1)[0]
            lines.append(f"| `{name}` | same as NumPy; {sum(r is not None for r in rows)} of {len(rows)} calls "
                         f"run the cell plainly: {why} |")
    return "\n".join(lines)


def numpy_results(shell):
    """Each np.random and many-argument row run under %%compile: {cell name: how it ran}."""
    import warnings
    from . import harness
    out = {}
    for _, _, cell in numpy_rows():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            harness.run(shell, cell, compiled=True)
        out[cell.name] = how(shell)
    return out


if __name__ == "__main__":      # pragma: no cover - prints the docs tables
    from . import harness
    sh = harness.get_shell("numpy")
    res = {}
    for c in cells():
        res[c.name] = harness.run(sh, c, compiled=True).fallback
    print(table(res))
    print()
    print(numpy_table(numpy_results(sh)))
