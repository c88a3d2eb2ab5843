"""Everyday notebook cells (each with the setup cells it depends on).

Each entry is a :class:`Cell`: ``setup`` runs plainly before the cell (in both runs); ``source``
is run once plainly and once under ``%%compile``; the namespaces, stdout and exceptions must
match. ``needs`` names modules (or engine features) without which the cell is skipped.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cell:
    name: str
    source: str
    setup: str = "import numpy as np\n"
    needs: tuple = ()


NP = "import numpy as np\n"
RNG = NP + "rng = np.random.default_rng(0)\nx = rng.standard_normal(1000)\ny = rng.standard_normal(1000)\n"
MPL = NP + "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
MAT = NP + "rng = np.random.default_rng(1)\na = rng.standard_normal((6, 6))\nb = rng.standard_normal(6)\n"

CELLS = [
    # -- imports and bindings ------------------------------------------------------------------
    Cell("import_inside", "import numpy as np\nimport math\nv = np.arange(10) * math.pi\n", setup=""),
    Cell("import_pyplot_alias", "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
         "fig = plt.figure()\nplt.close(fig)\n", needs=("matplotlib",)),
    Cell("from_import", "from numpy import exp, linspace\nfrom math import sqrt as msqrt\n"
         "t = exp(linspace(0, 1, 5)) * msqrt(2)\n"),
    Cell("import_submodule", "import os.path\nimport numpy.linalg\nn = numpy.linalg.norm(np.ones(4))\n"
         "base = os.path.basename('/a/b.txt')\n"),
    Cell("def_and_call", "def sq(v):\n    return v * v\nr = sq(np.arange(5.0))\n"),
    Cell("class_def", "class Acc:\n    def __init__(self):\n        self.total = 0.0\n"
         "    def add(self, v):\n        self.total += float(v)\nacc = Acc()\nacc.add(np.ones(3).sum())\n"
         "tot = acc.total\n"),
    Cell("annotated_and_aug", "k: int = 3\nz = np.zeros(4)\nz += k\nz *= 2\ncount: float\n"),
    Cell("walrus", "vals = np.arange(6.0)\nif (s := vals.sum()) > 10:\n    big = True\n"),
    Cell("for_target", "acc = np.zeros(3)\nfor i, v in enumerate([1.0, 2.0, 3.0]):\n    acc[i] = v * 2\n"),
    Cell("with_target", "import io\nwith io.StringIO() as buf:\n    buf.write('hello')\n    text = buf.getvalue()\n"),
    Cell("except_as", "try:\n    np.linalg.inv(np.zeros((2, 2)))\nexcept np.linalg.LinAlgError as err:\n"
         "    msg = str(err)\n"),
    Cell("global_stmt", "global counter\ncounter = 5\n"),
    Cell("read_then_assign", "x = x + 1\n", setup=NP + "x = np.arange(4.0)\n"),
    Cell("conditional_bound", "if x.sum() > 1e9:\n    flag = 'huge'\nelse:\n    other = 1\n", setup=RNG),
    Cell("conditional_keeps_old", "if x.sum() > 1e9:\n    flag = 'huge'\n", setup=RNG + "flag = 'old'\n"),
    Cell("del_names", "del x, y\n", setup=RNG),
    Cell("del_after_use", "tmp = x * 2\nmean = tmp.mean()\ndel tmp\n", setup=RNG),
    Cell("del_conditional", "if x.size > 10:\n    del y\n", setup=RNG),
    Cell("comprehension", "sq = [i * i for i in range(5)]\narrs = [np.full(2, i) for i in range(3)]\n"),
    Cell("lambda_map", "f = lambda v: v * 3\nout = f(np.arange(3))\n"),
    Cell("tuple_unpack", "q, r = divmod(np.arange(10), 3)\nlo, hi = x.min(), x.max()\n", setup=RNG),
    # -- printing -------------------------------------------------------------------------------
    Cell("print_several", "print(x.max(), x.min())\nprint('mean', x.mean(), 'std', x.std())\n", setup=RNG),
    Cell("print_array", "a = np.arange(10)\nb = a ** 2\nprint(a)\nprint(b)\n", setup=NP),
    Cell("fstring_format", "m = x.mean()\nprint(f'{m:.4f} {x.std():.3e} {x.size}')\n"
         "s = '{:.2f}'.format(m)\n", setup=RNG),
    Cell("fstring_float32", "h = x[:4].astype(np.float32) * 0.1\nm = h.mean()\nprint(f'{m} {h[0]}')\n"
         "txt = f'{m!r} {h.max():.3f} {h}'\n", setup=RNG),
    Cell("loop_prints", "for i in range(3):\n    v = np.sqrt(np.arange(4.0) + i)\n    print(i, v.sum())\n"),
    Cell("trailing_expr", "z = x[:5] * 2\nz.sum()\n", setup=RNG),
    Cell("repr_scalar", "m = x.max()\nrepr(m), type(m).__name__\n", setup=RNG),
    # -- iteration and Python conversion ----------------------------------------------------------
    Cell("iterate_result", "total = 0.0\nfor v in np.arange(5.0) * 2:\n    total += v\n"),
    Cell("len_and_float", "n = len(x)\nf = float(x.sum())\ni = int(np.argmax(x))\nlst = (x[:3] * 2).tolist()\n", setup=RNG),
    Cell("list_of_results", "res = []\nfor k in range(3):\n    res.append(np.sin(x[:4] * k))\n", setup=RNG),
    Cell("dict_of_results", "stats = {'mean': x.mean(), 'max': x.max()}\nkeys = sorted(stats)\n", setup=RNG),
    Cell("sorted_builtin", "vals = sorted(np.array([3.0, 1.0, 2.0]) * 2)\nbig = max(x[:5])\n", setup=RNG),
    Cell("bytes_buffer", "b = bytes(np.arange(4, dtype=np.uint8) * 2)\nmv = memoryview(np.ones(3) * 2).tolist()\n"),
    # -- plotting --------------------------------------------------------------------------------
    Cell("plot_line", "t = np.linspace(0, 2 * np.pi, 264)\ny = np.sin(t) * np.exp(-t / 4)\n"
         "fig, ax = plt.subplots()\nline, = ax.plot(t, y)\nyd = line.get_ydata()\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    Cell("plot_hist_scatter", "rng = np.random.default_rng(3)\nd = rng.normal(size=500)\n"
         "fig, ax = plt.subplots()\ncounts, edges, _ = ax.hist(d * 2 + 1, bins=20)\n"
         "ax.scatter(d[:50], d[:50] ** 2)\nax.set_title(f'mean {d.mean():.2f}')\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    Cell("plot_imshow", "g = np.linspace(-1, 1, 32)\nX, Y = np.meshgrid(g, g)\nZ = np.exp(-(X ** 2 + Y ** 2))\n"
         "fig, ax = plt.subplots()\nim = ax.imshow(Z)\narr = im.get_array()\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    # -- dtypes nbaccel does not trace -------------------------------------------------------------
    Cell("masked_array", "m = np.ma.masked_where(x > 0.5, x)\nmm = m.mean()\nfilled = m.filled(0.0)\n", setup=RNG),
    Cell("masked_input", "mean = mx.mean()\nmx2 = mx * 2\n",
         setup=NP + "mx = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])\n"),
    Cell("datetime64", "d = np.arange('2024-01-01', '2024-01-08', dtype='datetime64[D]')\n"
         "span = d[-1] - d[0]\nwk = d + np.timedelta64(7, 'D')\n"),
    Cell("object_and_str", "names = np.array(['a', 'bb', 'ccc'])\nlens = np.char.str_len(names)\n"
         "obj = np.array([1, 'x', None], dtype=object)\nfirst = obj[0]\n"),
    Cell("datetime_input", "later = days + np.timedelta64(1, 'D')\nn = len(days)\n",
         setup=NP + "days = np.array(['2024-01-01', '2024-02-01'], dtype='datetime64[D]')\n"),
    Cell("structured_array", "rec = np.zeros(3, dtype=[('a', 'f8'), ('b', 'i4')])\nrec['a'] = [1, 2, 3]\n"
         "sa = rec['a'].sum()\n"),
    Cell("matrix_subclass", "mm = np.asmatrix(np.eye(2)) * 3\n"),
    # -- ufunc methods and functions without an op -----------------------------------------------
    Cell("ufunc_outer", "o = np.multiply.outer(np.arange(4), np.arange(3))\nad = np.add.outer(x[:3], x[:2])\n", setup=RNG),
    Cell("ufunc_accumulate", "run_max = np.maximum.accumulate(x[:20])\ncs = np.add.accumulate(np.arange(5))\n", setup=RNG),
    Cell("ufunc_reduce_at", "r = np.add.reduce(x[:10])\nra = np.add.reduceat(np.arange(8), [0, 4, 6])\n"
         "z = np.zeros(5)\nnp.add.at(z, [0, 1, 1], 1.0)\n", setup=RNG),
    Cell("nan_functions", "v = x.copy()\nv[::7] = np.nan\nnm = np.nanmean(v)\nns = np.nanstd(v)\n"
         "nx = np.nanmax(v)\nnsum = np.nansum(v)\n", setup=RNG),
    Cell("np_block_poly", "blk = np.block([[np.eye(2), np.zeros((2, 2))], [np.ones((2, 2)), np.eye(2)]])\n"
         "p = np.polynomial.Polynomial([1, 2, 3])\npv = p(np.linspace(0, 1, 5))\nfit = np.polyfit(x[:20], y[:20], 2)\n",
         setup=RNG),
    Cell("histogram_unique", "h, e = np.histogram(x, bins=10)\nu, c = np.unique(np.round(x[:50]), return_counts=True)\n", setup=RNG),
    Cell("vectorize", "def step(v):\n    if v > 0:\n        return v * 2\n    return -v\nvf = np.vectorize(step)\n"
         "out = vf(x)\n", setup=RNG),
    Cell("frompyfunc_apply", "f = np.frompyfunc(lambda a, b: a + b, 2, 1)\nr = f(np.arange(3), 1)\n"
         "rows = np.apply_along_axis(lambda r: r.max() - r.min(), 1, x.reshape(100, 10))\n", setup=RNG),
    # -- boolean masks ----------------------------------------------------------------------------
    Cell("mask_write_scalar", "theta = x.copy()\ntheta[theta > 1] = 1.0\ntheta[theta < -1] = -1.0\n", setup=RNG),
    Cell("mask_write_aug", "v = x * 1.0\nv[v < 0] += 10\nv[v > 5] *= 0.5\n", setup=RNG),
    Cell("mask_write_from_other", "c = x.copy()\nm = y > 0\nc[m] = y[m]\n", setup=RNG),
    Cell("mask_read", "pos = x[x > 0]\nnpos = pos.size\nmean_pos = pos.mean()\n", setup=RNG),
    Cell("mask_write_input", "x[x < 0] = 0\n", setup=RNG),
    # -- numerics -----------------------------------------------------------------------------------
    Cell("softmax", "s = a - a.max(axis=1, keepdims=True)\np = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)\n", setup=MAT),
    Cell("linalg_solve", "sol = np.linalg.solve(a, b)\ninv = np.linalg.inv(a)\ndet = np.linalg.det(a)\n", setup=MAT),
    Cell("linalg_eig_real", "sym = a @ a.T\nw, v = np.linalg.eigh(sym)\nnrm = np.linalg.norm(v, axis=0)\n", setup=MAT),
    Cell("random_draws", "np.random.seed(42)\nr1 = np.random.rand(5)\nr2 = np.random.randn(3, 2) * 2\n"
         "g = np.random.default_rng(7)\nr3 = g.integers(0, 10, 6)\nr4 = g.normal(size=4) + 1\n"),
    Cell("random_choice_shuffle", "g = np.random.default_rng(5)\nidx = np.arange(10)\ng.shuffle(idx)\n"
         "pick = g.choice(idx, 3, replace=False)\n"),
    Cell("integer_math", "i = np.arange(20)\nev = i[i % 2 == 0]\nsq = (i ** 2) // 3\nbig = i.astype(np.int32) * 1000\n"),
    Cell("uint8_image", "img = np.arange(64, dtype=np.uint8).reshape(8, 8)\ninv = 255 - img\ntot = img.sum()\n"
         "mean = img.mean()\n", needs=("uint64",)),
    Cell("cumsum_diff", "c = np.cumsum(x[:10])\nd = np.diff(c)\nclose = np.allclose(d, x[1:10])\n", setup=RNG),
    Cell("broadcast_distances", "P = rng.standard_normal((20, 3))\nC = rng.standard_normal((4, 3))\n"
         "D = np.sqrt(((P[:, None, :] - C[None, :, :]) ** 2).sum(-1))\nlab = D.argmin(axis=1)\n", setup=RNG),
    Cell("python_scalars", "s = 3\nf = s * 2.5\nv = np.float32(2) * 3\nw = np.int64(7) // 2\n"),
    Cell("scalar_types_kept", "m = x.max()\nk = x.argmax()\nb = bool(x.any())\nt = type(m).__name__\n", setup=RNG),
    Cell("where_clip", "c = np.clip(x, -1, 1)\nw = np.where(x > 0, x, 0.0)\n", setup=RNG),
    Cell("stack_concat", "s = np.stack([x[:3], y[:3]])\ncc = np.concatenate([x[:2], y[:2]])\nsp = np.split(np.arange(6), 3)\n", setup=RNG),
    Cell("inplace_input", "x *= 2\nx += 1\n", setup=RNG),
    Cell("float32_chain", "a32 = x.astype(np.float32)\nr = np.tanh(a32 * 0.5) + 1\n", setup=RNG),
    Cell("nested_global", "counter = 0\ndef inc():\n    global counter\n    counter += 1\ninc()\ninc()\n"
         "print(counter)\n"),
    Cell("read_old_after_branch", "if x.sum() > 1e9:\n    flag = 'huge'\nprint(flag)\n", setup=RNG + "flag = 'old'\n"),
    Cell("mask_rows_2d", "M = rng.standard_normal((6, 3))\nM[M[:, 0] > 0] = 0.0\nkeep = M[:, 1] * 2\n", setup=RNG),
    Cell("closure_over_input", "def shifted(v):\n    return v + x[:3]\nr = shifted(np.ones(3))\n", setup=RNG),
    Cell("pandas_roundtrip", "import pandas as pd\ndf = pd.DataFrame({'a': x[:5] * 2, 'b': np.arange(5)})\n"
         "col = df['a'].to_numpy()\nback = df.values.sum(axis=0)\n", setup=RNG, needs=("pandas",)),
    Cell("pandas_series_stats", "import pandas as pd\ns = pd.Series(np.cumsum(x[:20]))\nroll = s.rolling(3).mean()\n"
         "desc = float(roll.max())\n", setup=RNG, needs=("pandas",)),
    Cell("scipy_special", "from scipy import special\ng = special.gamma(np.linspace(1, 3, 5))\n",
         needs=("scipy",)),
    # -- exceptions -----------------------------------------------------------------------------------
    Cell("error_shape", "z = np.ones(3) + np.ones(4)\n"),
    Cell("error_name", "v = undefined_name + 1\n"),
    Cell("error_after_side_effect", "print('before')\nq = np.arange(3)\nq[5] = 1\n"),
    Cell("error_zero_div", "v = 1 / 0\n"),
    Cell("error_unbound_branch", "if x.sum() > 1e9:\n    flag2 = 'huge'\nprint(flag2)\n", setup=RNG),
    # -- complex (engine dtypes) ---------------------------------------------------------------------
    Cell("complex_mesh", "xs = np.linspace(-2, 1, 40)\nys = np.linspace(-1, 1, 30)\nX, Y = np.meshgrid(xs, ys)\n"
         "C = X + 1j * Y\nZ = np.zeros_like(C)\nfor _ in range(10):\n    Z = Z * Z + C\nmag = np.abs(Z)\n",
         needs=("complex",)),
    Cell("complex_linalg", "ev = np.linalg.eigvals(a)\nre = ev.real\nim = ev.imag\nang = np.angle(ev)\n",
         setup=MAT, needs=("complex",)),
    Cell("fft_spectrum", "t = np.linspace(0, 1, 64, endpoint=False)\nsig = np.sin(2 * np.pi * 5 * t)\n"
         "spec = np.abs(np.fft.rfft(sig))\npeak = int(spec.argmax())\n", needs=("complex",)),
]
