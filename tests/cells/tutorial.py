"""More everyday cells, in the style of NumPy tutorials and exercise sets (issue 21): random
draws, plotting, in-place methods, helpers defined in one cell and reused in the next, %timeit
and other magics in cells, star imports, structured dtypes, string and datetime arrays.

Each :class:`~tests.cells.catalogue.Cell` is run plainly and under ``%%compile`` (and again with
``--verify``) by tests/test_cell_contract.py.
"""
from __future__ import annotations

from .catalogue import Cell

NP = "import numpy as np\n"
RNG = NP + "rng = np.random.default_rng(0)\nx = rng.standard_normal(200)\ny = rng.standard_normal(200)\n"
IMG = NP + "rng = np.random.default_rng(2)\nimg = rng.random((16, 16))\n"
MPL = NP + "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.close('all')\n"
HELPERS = RNG + ("def normalize(v):\n    return (v - v.mean()) / v.std()\n"
                 "def moving_average(v, n=3):\n    c = np.cumsum(v)\n    c[n:] = c[n:] - c[:-n]\n    return c[n - 1:] / n\n"
                 "class Standardizer:\n    def fit(self, v):\n        self.mu, self.sd = v.mean(), v.std()\n        return self\n"
                 "    def transform(self, v):\n        return (v - self.mu) / self.sd\n")
REC = NP + "people = np.array([('ann', 31, 1.62), ('bob', 45, 1.80), ('cy', 27, 1.75)],\n" \
           "                  dtype=[('name', 'U8'), ('age', 'i4'), ('height', 'f8')])\n"


def _exercises():
    """The 100-NumPy-exercises kind: one small idea per cell."""
    src = {
        "ex_zeros_fifth": "Z = np.zeros(10)\nZ[4] = 1\n",
        "ex_arange_reverse": "Z = np.arange(10, 50)\nR = Z[::-1]\n",
        "ex_reshape_3x3": "Z = np.arange(9).reshape(3, 3)\n",
        "ex_nonzero_indices": "nz = np.nonzero([1, 2, 0, 0, 4, 0])\n",
        "ex_identity": "Z = np.eye(3)\nI = np.identity(4)\n",
        "ex_random_minmax": "Z = np.random.default_rng(3).random((10, 10))\nZmin, Zmax = Z.min(), Z.max()\n",
        "ex_border_ones": "Z = np.ones((6, 6))\nZ[1:-1, 1:-1] = 0\n",
        "ex_pad_border": "Z = np.ones((4, 4))\nP = np.pad(Z, pad_width=1, mode='constant', constant_values=0)\n",
        "ex_nan_rules": "a = 0 * np.nan\nb = np.nan == np.nan\nc = np.inf > np.nan\nd = np.nan - np.nan\ne = 0.3 == 3 * 0.1\n",
        "ex_diag_below": "Z = np.diag(1 + np.arange(4), k=-1)\n",
        "ex_checkerboard": "Z = np.zeros((8, 8), dtype=int)\nZ[1::2, ::2] = 1\nZ[::2, 1::2] = 1\n",
        "ex_unravel": "idx = np.unravel_index(99, (6, 7, 8))\n",
        "ex_tile_checker": "Z = np.tile(np.array([[0, 1], [1, 0]]), (4, 4))\n",
        "ex_normalize_matrix": "Z = np.random.default_rng(4).random((5, 5))\nZ = (Z - np.mean(Z)) / np.std(Z)\n",
        "ex_matmul_shapes": "Z = np.ones((5, 3)) @ np.ones((3, 2))\n",
        "ex_negate_range": "Z = np.arange(11)\nZ[(3 < Z) & (Z < 8)] *= -1\n",
        "ex_sum_builtin": "s1 = sum(range(5), -1)\nfrom numpy import sum as npsum\ns2 = npsum(range(5), -1)\n",
        "ex_int_powers": "Z = np.arange(5)\na = Z ** Z\nb = 2 << Z >> 2\nc = Z < -Z\nd = 1j * Z\ne = Z / 1 / 1\n",
        "ex_round_away": "Z = np.random.default_rng(5).uniform(-10, +10, 10)\nR = np.copysign(np.ceil(np.abs(Z)), Z)\n",
        "ex_intersect": "Z1 = np.random.default_rng(6).integers(0, 10, 10)\nZ2 = np.random.default_rng(7).integers(0, 10, 10)\n"
                        "common = np.intersect1d(Z1, Z2)\n",
        "ex_dates_today": "yesterday = np.datetime64('2024-03-01') - np.timedelta64(1)\n"
                          "days = np.arange('2016-07', '2016-08', dtype='datetime64[D]')\n",
        "ex_inplace_ops": "A = np.ones(3) * 1\nB = np.ones(3) * 2\nnp.add(A, B, out=B)\nnp.divide(A, 2, out=A)\n"
                          "np.negative(A, out=A)\nnp.multiply(A, B, out=A)\n",
        "ex_integer_part": "Z = np.random.default_rng(8).uniform(0, 10, 10)\na = Z - Z % 1\nb = Z // 1\nc = np.floor(Z)\n"
                           "d = Z.astype(int)\ne = np.trunc(Z)\n",
        "ex_row_range": "Z = np.zeros((5, 5))\nZ += np.arange(5)\n",
        "ex_fromiter": "Z = np.fromiter((i * i for i in range(10)), dtype=float, count=-1)\n",
        "ex_linspace_open": "Z = np.linspace(0, 1, 11, endpoint=False)[1:]\n",
        "ex_sort_random": "Z = np.random.default_rng(9).random(10)\nZ.sort()\n",
        "ex_small_sum": "Z = np.arange(10)\nt = np.add.reduce(Z)\n",
        "ex_equal_arrays": "A = np.random.default_rng(10).integers(0, 2, 5)\nB = np.random.default_rng(11).integers(0, 2, 5)\n"
                           "same = np.allclose(A, B)\nequal = np.array_equal(A, B)\n",
        "ex_readonly": "Z = np.zeros(10)\nZ.flags.writeable = False\ntry:\n    Z[0] = 1\nexcept ValueError as e:\n    msg = str(e)\n",
        "ex_cartesian_polar": "Z = np.random.default_rng(12).random((10, 2))\nX, Y = Z[:, 0], Z[:, 1]\n"
                              "R = np.sqrt(X ** 2 + Y ** 2)\nT = np.arctan2(Y, X)\n",
        "ex_replace_max": "Z = np.random.default_rng(13).random(10)\nZ[Z.argmax()] = 0\n",
        "ex_structured_grid": "Z = np.zeros((5, 5), [('x', float), ('y', float)])\n"
                              "Z['x'], Z['y'] = np.meshgrid(np.linspace(0, 1, 5), np.linspace(0, 1, 5))\n",
        "ex_cauchy": "X = np.arange(8)\nY = X + 0.5\nC = 1.0 / np.subtract.outer(X, Y)\nd = np.linalg.det(C)\n",
        "ex_type_limits": "i8 = np.iinfo(np.int8).max\nf32 = np.finfo(np.float32).eps\nf64 = np.finfo(np.float64).max\n",
        "ex_closest_value": "Z = np.arange(100)\nv = np.random.default_rng(14).uniform(0, 100)\nindex = (np.abs(Z - v)).argmin()\n",
        "ex_point_distances": "Z = np.random.default_rng(15).random((10, 2))\nX, Y = np.atleast_2d(Z[:, 0], Z[:, 1])\n"
                              "D = np.sqrt((X - X.T) ** 2 + (Y - Y.T) ** 2)\n",
        "ex_float_to_int_inplace": "Z = (np.random.default_rng(16).random(10) * 100).astype(np.float32)\nY = Z.view(np.int32)\n"
                                   "Y[:] = Z\n",
        "ex_ndenumerate": "Z = np.arange(9).reshape(3, 3)\npairs = [(idx, int(v)) for idx, v in np.ndenumerate(Z)]\n"
                          "pos = [p for p in np.ndindex(2, 2)]\n",
        "ex_gaussian": "X, Y = np.meshgrid(np.linspace(-1, 1, 10), np.linspace(-1, 1, 10))\nD = np.sqrt(X * X + Y * Y)\n"
                       "G = np.exp(-((D - 0.0) ** 2 / (2.0 * 1.0 ** 2)))\n",
        "ex_place_random": "n = 10\np = 3\nZ = np.zeros((n, n))\nnp.put(Z, np.random.default_rng(17).choice(range(n * n), p, replace=False), 1)\n",
        "ex_subtract_row_mean": "X = np.random.default_rng(18).random((5, 10))\nY = X - X.mean(axis=1, keepdims=True)\n",
        "ex_sort_by_column": "Z = np.random.default_rng(19).integers(0, 10, (3, 3))\nS = Z[Z[:, 1].argsort()]\n",
        "ex_null_columns": "Z = np.random.default_rng(20).integers(0, 3, (3, 10))\nnull = (~Z.any(axis=0)).any()\n",
        "ex_nearest_value": "Z = np.random.default_rng(21).uniform(0, 1, 10)\nz = 0.5\nm = Z.flat[np.abs(Z - z).argmin()]\n",
        "ex_iterator_sum": "A = np.arange(3).reshape(3, 1)\nB = np.arange(3).reshape(1, 3)\nit = np.nditer([A, B, None])\n"
                           "for a, b, c in it:\n    c[...] = a + b\nres = it.operands[2]\n",
        "ex_bincount_add": "Z = np.ones(10)\nI = np.random.default_rng(22).integers(0, len(Z), 20)\nZ += np.bincount(I, minlength=len(Z))\n",
        "ex_accumulate_index": "X = [1, 2, 3, 4, 5, 6]\nI = [1, 3, 9, 3, 4, 1]\nF = np.bincount(I, X)\n",
        "ex_unique_colors": "w, h = 16, 16\nI = np.random.default_rng(23).integers(0, 2, (h, w, 3)).astype(np.ubyte)\n"
                            "F = I[..., 0] * (256 * 256) + I[..., 1] * 256 + I[..., 2]\nn = len(np.unique(F))\n",
        "ex_sum_last_two": "A = np.random.default_rng(24).integers(0, 10, (3, 4, 3, 4))\ns = A.sum(axis=(-2, -1))\n",
        "ex_diagonal_dot": "A = np.random.default_rng(25).uniform(0, 1, (5, 5))\nB = np.random.default_rng(26).uniform(0, 1, (5, 5))\n"
                           "d1 = np.diag(np.dot(A, B))\nd2 = np.sum(A * B.T, axis=1)\nd3 = np.einsum('ij,ji->i', A, B)\n",
        "ex_interleave_zeros": "Z = np.array([1, 2, 3, 4, 5])\nnz = 3\nZ0 = np.zeros(len(Z) + (len(Z) - 1) * nz)\nZ0[::nz + 1] = Z\n",
        "ex_broadcast_3d": "A = np.ones((5, 5, 3))\nB = 2 * np.ones((5, 5))\nC = A * B[:, :, None]\n",
        "ex_swap_rows": "A = np.arange(25).reshape(5, 5)\nA[[0, 1]] = A[[1, 0]]\n",
        "ex_negate_bool": "Z = np.random.default_rng(27).integers(0, 2, 10)\nnb = np.logical_not(Z > 0, out=np.empty(10, bool))\n"
                          "Zf = np.random.default_rng(28).uniform(-1.0, 1.0, 10)\nnf = np.negative(Zf, out=Zf)\n",
        "ex_rolling_windows": "Z = np.arange(10)\nW = np.lib.stride_tricks.sliding_window_view(Z, 3)\nm = W.mean(axis=1)\n",
        "ex_rank": "Z = np.random.default_rng(29).uniform(0, 1, (6, 6))\nU, S, V = np.linalg.svd(Z)\nrank = np.sum(S > 1e-10)\n",
        "ex_most_frequent": "Z = np.random.default_rng(30).integers(0, 10, 50)\nmf = np.bincount(Z).argmax()\n",
        "ex_outer_kron": "K = np.kron(np.eye(2), np.ones((2, 2)))\nO = np.outer(np.arange(3), np.arange(4))\n",
        "ex_percentile": "Z = np.random.default_rng(31).normal(size=100)\nq = np.percentile(Z, [25, 50, 75])\nmed = np.median(Z)\n",
        "ex_argpartition": "Z = np.arange(10000)\nnp.random.default_rng(32).shuffle(Z)\nn = 5\nbest = Z[np.argsort(Z)[-n:]]\n"
                           "top = np.sort(Z[np.argpartition(-Z, n)[:n]])\n",
        "ex_any_nan_rows": "Z = np.random.default_rng(33).random((5, 3))\nZ[1, 2] = np.nan\nrows = np.isnan(Z).any(axis=1)\n",
        "ex_cumprod_int": "c = np.cumprod(np.arange(1, 8))\nf = np.prod(np.arange(1, 6, dtype=np.int32))\n",
        "ex_triu_tril": "A = np.arange(16.0).reshape(4, 4)\nU = np.triu(A)\nL = np.tril(A, -1)\ntr = np.trace(A)\n",
        "ex_meshgrid_ij": "X, Y = np.meshgrid(np.arange(3), np.arange(2), indexing='ij')\nS = X + 10 * Y\n",
        "ex_roll_flip": "Z = np.arange(8)\nr = np.roll(Z, 3)\nf = np.flip(Z.reshape(2, 4), axis=1)\nrot = np.rot90(Z.reshape(2, 4))\n",
        "ex_searchsorted": "edges = np.array([0.0, 0.5, 1.0, 1.5])\nv = np.array([0.1, 0.7, 1.2, 0.5])\n"
                           "bins = np.searchsorted(edges, v)\ndig = np.digitize(v, edges)\n",
        "ex_isin_setdiff": "a = np.arange(10)\nb = np.array([2, 3, 11])\nm = np.isin(a, b)\nd = np.setdiff1d(a, b)\nu = np.union1d(a[:3], b)\n",
        "ex_argwhere": "Z = np.arange(12).reshape(3, 4)\nw = np.argwhere(Z % 5 == 0)\nfl = np.flatnonzero(Z > 8)\n",
        "ex_count_nonzero": "Z = np.random.default_rng(34).integers(0, 3, (4, 4))\nc = np.count_nonzero(Z)\nca = np.count_nonzero(Z, axis=0)\n",
        "ex_lexsort": "surnames = np.array(['b', 'a', 'c'])\nfirst = np.array(['x', 'y', 'x'])\nind = np.lexsort((first, surnames))\n",
        "ex_cov_corr": "X = np.random.default_rng(35).normal(size=(3, 50))\ncv = np.cov(X)\ncr = np.corrcoef(X)\n",
        "ex_interp": "xp = np.array([0.0, 1.0, 2.0])\nfp = np.array([0.0, 10.0, 0.0])\nyi = np.interp(np.linspace(0, 2, 7), xp, fp)\n",
        "ex_convolve": "s = np.convolve(np.arange(5.0), np.ones(3) / 3, mode='valid')\nco = np.correlate([1, 2, 3], [0, 1, 0.5])\n",
        "ex_gradient_trapz": "t = np.linspace(0, 1, 21)\nf = t ** 2\ng = np.gradient(f, t)\narea = np.trapezoid(f, t)\n",
        "ex_round_decimals": "Z = np.array([1.2345, 2.5, 3.5, -0.5])\nr = np.round(Z, 2)\nri = np.rint(Z)\nar = np.around(Z)\n",
        "ex_array_split": "parts = np.array_split(np.arange(10), 3)\nh = np.hsplit(np.arange(12).reshape(2, 6), 3)\n",
        "ex_insert_delete": "a = np.arange(6)\nb = np.insert(a, 2, 99)\nc = np.delete(a, [0, 3])\nd = np.append(a, [7, 8])\n",
        "ex_where_three": "Z = np.arange(-3, 4)\nr = np.where(Z < 0, -1, np.where(Z > 0, 1, 0))\ns = np.sign(Z)\n",
        "ex_select": "Z = np.arange(10)\nr = np.select([Z < 3, Z > 6], [Z * 10, -Z], default=0)\n",
        "ex_take_put_along": "A = np.array([[10, 30, 20], [60, 40, 50]])\ni = np.argsort(A, axis=1)\ns = np.take_along_axis(A, i, axis=1)\n"
                             "np.put_along_axis(A, i[:, :1], 0, axis=1)\n",
        "ex_einsum_batch": "A = np.random.default_rng(36).random((4, 2, 3))\nB = np.random.default_rng(37).random((4, 3, 2))\n"
                           "C = np.einsum('bij,bjk->bik', A, B)\nD = A @ B\n",
        "ex_tensordot": "a = np.arange(24.0).reshape(2, 3, 4)\nb = np.arange(12.0).reshape(4, 3)\nt = np.tensordot(a, b, axes=([2, 1], [0, 1]))\n",
        "ex_linalg_lstsq": "A = np.vstack([np.arange(5.0), np.ones(5)]).T\ny = np.array([1.0, 3.1, 4.9, 7.2, 9.0])\n"
                           "coef, res, rank, sv = np.linalg.lstsq(A, y, rcond=None)\n",
        "ex_qr_cholesky": "M = np.random.default_rng(38).random((4, 4))\nS = M @ M.T + 4 * np.eye(4)\nq, r = np.linalg.qr(M)\n"
                          "L = np.linalg.cholesky(S)\nok = np.allclose(L @ L.T, S)\n",
        "ex_matrix_power": "A = np.array([[1, 1], [1, 0]])\nfib = np.linalg.matrix_power(A, 10)\n",
        "ex_logspace_geomspace": "l = np.logspace(0, 3, 4)\ng = np.geomspace(1, 1000, 4)\n",
        "ex_full_like_empty": "a = np.arange(6).reshape(2, 3)\nf = np.full_like(a, 7)\nz = np.zeros_like(a, dtype=float)\no = np.ones_like(a)\n",
        "ex_broadcast_to": "b = np.broadcast_to(np.arange(3), (4, 3))\ns = b.sum(axis=0)\nsh = np.broadcast_shapes((4, 1), (1, 3))\n",
        "ex_expand_squeeze": "a = np.arange(6).reshape(2, 3)\ne = np.expand_dims(a, 0)\nsq = np.squeeze(e)\nmv = np.moveaxis(e, 0, -1)\n",
        "ex_hstack_vstack": "a = np.arange(3)\nh = np.hstack([a, a])\nv = np.vstack([a, a])\nd = np.dstack([a, a])\nc = np.column_stack([a, a])\n",
        "ex_bool_ops": "a = np.array([True, False, True])\nb = np.array([False, False, True])\nx1 = a & b\nx2 = a | b\nx3 = a ^ b\nx4 = ~a\n",
        "ex_bit_ops": "a = np.arange(8, dtype=np.int32)\ns = a << 2\nr = a >> 1\nm = a & 3\nx = np.bitwise_xor(a, 5)\n",
        "ex_mod_divmod": "a = np.arange(-5, 6)\nm = a % 3\nf = np.fmod(a, 3)\nq, r = np.divmod(a, 4)\n",
        "ex_hypot_deg": "h = np.hypot(3.0, np.arange(5.0))\nd = np.degrees(np.pi / np.arange(1, 5))\nr = np.radians(180.0)\n",
        "ex_logs": "v = np.array([1.0, 10.0, 100.0])\nl = np.log(v)\nl2 = np.log2(v)\nl10 = np.log10(v)\nl1p = np.log1p(v)\nex = np.expm1(l)\n",
        "ex_minimum_maximum": "a = np.array([1.0, np.nan, 3.0])\nb = np.array([2.0, 2.0, np.nan])\nmx = np.maximum(a, b)\nmn = np.fmin(a, b)\n",
        "ex_isclose_finite": "a = np.array([1.0, np.inf, np.nan, -np.inf])\nf = np.isfinite(a)\ni = np.isinf(a)\nc = np.isclose(a, 1.0)\n"
                             "n = np.nan_to_num(a)\n",
        "ex_cumulative_2d": "A = np.arange(12).reshape(3, 4)\nc0 = A.cumsum(axis=0)\nc1 = A.cumprod(axis=1)\n",
        "ex_std_var_ddof": "A = np.random.default_rng(39).normal(size=(4, 5))\ns = A.std(axis=0, ddof=1)\nv = np.var(A, axis=1)\n",
        "ex_argmin_axis": "A = np.random.default_rng(40).random((4, 5))\nam = A.argmin(axis=0)\nax = np.argmax(A, axis=1)\n"
                          "u = np.unravel_index(A.argmax(), A.shape)\n",
        "ex_ptp_clip_inplace": "A = np.random.default_rng(41).normal(size=10)\nr = np.ptp(A)\nnp.clip(A, -0.5, 0.5, out=A)\n",
        "ex_astype_casts": "f = np.array([1.7, -2.2, 3.9])\ni = f.astype(np.int64)\nu = np.array([300, 2]).astype(np.uint8)\n"
                           "b = f.astype(bool)\nf16 = f.astype(np.float16)\n",
        "ex_promotion": "a = np.arange(3, dtype=np.int8) + 200\nb = np.arange(3, dtype=np.float32) * 2.0\n"
                        "c = np.arange(3, dtype=np.int32) / 2\nd = np.uint8(250) + np.arange(2, dtype=np.uint8)\n",
        "ex_copy_vs_view": "a = np.arange(6)\nv = a[1:4]\nv[0] = 100\nc = a[1:4].copy()\nc[1] = -1\nshares = np.shares_memory(a, v)\n",
        "ex_fancy_2d": "A = np.arange(20).reshape(4, 5)\nr = A[[0, 2], 1:3]\nc = A[:, [4, 0]]\nix = A[np.ix_([1, 3], [0, 2])]\n",
        "ex_ellipsis_newaxis": "A = np.arange(24).reshape(2, 3, 4)\nl = A[..., -1]\nn = A[:, np.newaxis, :, 0]\n",
        "ex_negative_step": "A = np.arange(10)\nr = A[8:2:-2]\nA[::3] = 0\n",
    }
    return [Cell(k, v) for k, v in src.items()]


CELLS = _exercises() + [
    # -- random draws (bit-identical to NumPy for the same seed) ---------------------------------
    Cell("rng_normal_stats", "rng = np.random.default_rng(42)\ns = rng.normal(5, 2, 1000)\nm, sd = s.mean(), s.std()\n"
         "frac = np.mean(np.abs(s - 5) < 2)\n"),
    Cell("rng_uniform_hist", "rng = np.random.default_rng(1)\nu = rng.uniform(0, 1, 500)\ncounts, _ = np.histogram(u, bins=5)\n"),
    Cell("rng_choice_weights", "rng = np.random.default_rng(2)\nfaces = rng.choice(6, size=60, p=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1]) + 1\n"
         "freq = np.bincount(faces, minlength=7)[1:]\n"),
    Cell("rng_permutation", "rng = np.random.default_rng(3)\nperm = rng.permutation(10)\ninv = np.argsort(perm)\n"),
    Cell("legacy_seed_draws", "np.random.seed(0)\na = np.random.rand(3, 2)\nb = np.random.randint(0, 5, 4)\nc = np.random.normal(size=2)\n"),
    Cell("legacy_shuffle_inplace", "np.random.seed(1)\narr = np.arange(10)\nnp.random.shuffle(arr)\n"),
    Cell("random_walk", "rng = np.random.default_rng(4)\nsteps = rng.choice([-1, 1], size=200)\nwalk = np.cumsum(steps)\n"
         "first_10 = np.argmax(np.abs(walk) >= 10) if (np.abs(walk) >= 10).any() else -1\n"),
    Cell("monte_carlo_pi", "rng = np.random.default_rng(5)\npts = rng.random((2000, 2))\ninside = (pts ** 2).sum(axis=1) <= 1\n"
         "pi_est = 4 * inside.mean()\n"),
    Cell("bootstrap_mean", "rng = np.random.default_rng(6)\ndata = rng.exponential(2.0, 100)\n"
         "boots = np.array([rng.choice(data, data.size).mean() for _ in range(50)])\nci = np.percentile(boots, [2.5, 97.5])\n"),
    Cell("rng_input_generator", "b = g.normal(size=3)\nc = g.integers(0, 100, 2)\n", setup=NP + "g = np.random.default_rng(9)\n"),
    Cell("random_state_object", "rs = np.random.RandomState(12)\nv = rs.randn(4)\nw = rs.randint(0, 3, 3)\n"),
    # -- helpers defined in one cell, reused in the next ---------------------------------------------
    Cell("helper_normalize", "z = normalize(x)\nzm, zs = z.mean(), z.std()\n", setup=HELPERS),
    Cell("helper_moving_average", "ma = moving_average(x, 5)\nn = ma.size\n", setup=HELPERS),
    Cell("helper_class_fit", "st = Standardizer().fit(x)\nzt = st.transform(y)\nmu = st.mu\n", setup=HELPERS),
    Cell("helper_defined_here_used_later", "def scale(v, k=2.0):\n    return v * k\nsx = scale(x[:5])\nsy = scale(y[:5], k=-1)\n",
         setup=RNG),
    Cell("helper_lambda_table", "ops = {'sq': lambda v: v ** 2, 'abs': np.abs}\nres = {k: f(x[:3]) for k, f in ops.items()}\n",
         setup=RNG),
    Cell("helper_recursive", "def power_iter(A, v, n):\n    if n == 0:\n        return v\n    w = A @ v\n    return power_iter(A, w / np.linalg.norm(w), n - 1)\n"
         "A = np.array([[2.0, 1.0], [1.0, 3.0]])\nev = power_iter(A, np.ones(2), 20)\n"),
    Cell("helper_generator", "def batches(v, n):\n    for i in range(0, len(v), n):\n        yield v[i:i + n]\n"
         "sums = [b.sum() for b in batches(x[:20], 5)]\n", setup=RNG),
    Cell("helper_decorator", "import functools\ndef twice(fn):\n    @functools.wraps(fn)\n    def w(v):\n        return fn(fn(v))\n    return w\n"
         "@twice\ndef inc(v):\n    return v + 1\nr = inc(np.zeros(3))\nname = inc.__name__\n"),
    Cell("helper_dataclass", "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: float\n    y: float\n"
         "    def norm(self):\n        return np.hypot(self.x, self.y)\np = Point(3.0, 4.0)\nn = p.norm()\n"),
    Cell("helper_closure_counter", "def make_counter():\n    n = [0]\n    def tick(v):\n        n[0] += 1\n        return v * n[0]\n    return tick\n"
         "tick = make_counter()\na1 = tick(np.ones(2))\na2 = tick(np.ones(2))\n"),
    Cell("helper_default_array", "def shift(v, by=np.arange(3.0)):\n    return v + by\nr = shift(np.ones(3))\n"),
    Cell("helper_kwarg_f", "def apply(z, f=np.square, n=2):\n    for _ in range(n):\n        z = f(z)\n    return z\n"
         "r1 = apply(np.linspace(0, 1, 4), f=np.sqrt)\nr2 = apply(np.arange(3.0), n=1)\n"),
    # -- in-place methods and writes ------------------------------------------------------------------
    Cell("inplace_sort_rows", "M = np.array([[3, 1, 2], [9, 7, 8]])\nM.sort(axis=1)\nfirst = M[:, 0]\n"),
    Cell("inplace_fill_reuse", "buf = np.empty(5)\nbuf.fill(3.5)\ntotal = buf.sum()\n"),
    Cell("inplace_partition", "v = np.array([7, 2, 9, 4, 1, 8])\nv.partition(2)\nlow = np.sort(v[:3])\n"),
    Cell("inplace_put_take", "v = np.zeros(6)\nv.put([1, 4], [5.0, 6.0])\nt = v.take([1, 4])\n"),
    Cell("inplace_byteswap", "v = np.arange(3, dtype=np.int32)\nw = v.byteswap()\nv.byteswap(inplace=True)\n"),
    Cell("inplace_flat_write", "Z = np.zeros((3, 3))\nZ.flat[::4] = 1.0\ntr = np.trace(Z)\n"),
    Cell("inplace_input_sort", "x.sort()\nlo = x[0]\n", setup=RNG),
    Cell("inplace_input_fill", "x.fill(0)\n", setup=RNG),
    Cell("inplace_resize_plain", "r = np.arange(4.0)\nr.resize((2, 3), refcheck=False)\n"),
    Cell("inplace_strides_info", "A = np.arange(12.0).reshape(3, 4)\nst = A.strides\nts = A.T.strides\nisz = A.itemsize\n"),
    Cell("inplace_view_dtype", "f = np.array([1.0, 2.0], dtype=np.float32)\nbits = f.view(np.uint32)\nback = bits.view(np.float32)\n"),
    Cell("inplace_repeat_axis", "A = np.arange(4).reshape(2, 2)\nr0 = A.repeat(2, axis=0)\nr1 = A.repeat([1, 3], axis=1)\n"),
    Cell("inplace_item", "A = np.arange(6.0).reshape(2, 3)\nv = A.item(4)\nw = A.item((1, 0))\n"),
    Cell("setitem_kinds", "A = np.zeros((4, 4))\nA[0] = 1\nA[1, 1:3] = 2\nA[[2, 3], [0, 3]] = 3\nA[A == 0] = -1\nA[..., 2] += 0.5\n"),
    Cell("setitem_broadcast_row", "A = np.zeros((3, 4))\nA[:] = np.arange(4)\nA[:, 0] = [7, 8, 9]\n"),
    Cell("setitem_list_global", "acc.append(np.tanh(x[:3]))\nacc.append(x[:2].sum())\n", setup=RNG + "acc = []\n"),
    Cell("setitem_dict_global", "store['m'] = x.mean()\nstore['v'] = x[:4] * 2\n", setup=RNG + "store = {}\n"),
    # -- magics in cells -------------------------------------------------------------------------------
    Cell("magic_timeit_quiet", "v = np.arange(1000.0)\nres = %timeit -o -q -n1 -r1 v.sum()\nruns = len(res.all_runs)\n"),
    Cell("magic_shell_echo", "n = np.arange(4).sum()\nout = !echo {n}\nlines = list(out)\n"),
    Cell("magic_get_ipython_ev", "k = np.arange(3.0)\nval = get_ipython().ev('k.sum() * 2')\n"),
    Cell("star_import_numpy", "from numpy import *\nq = sqrt(arange(4.0))\nm = mean(q)\n", setup=""),
    Cell("star_import_math", "from math import *\nv = sqrt(2.0) * pi\narr = np.full(3, e)\n"),
    # -- structured, string and datetime arrays ---------------------------------------------------------
    Cell("rec_field_stats", "ages = people['age']\nmean_age = ages.mean()\ntall = people[people['height'] > 1.7]['name']\n", setup=REC),
    Cell("rec_sort_by_field", "by_age = np.sort(people, order='age')\noldest = by_age[-1]['name']\n", setup=REC),
    Cell("rec_update_field", "people['age'] += 1\nbmi = 70 / people['height'] ** 2\n", setup=REC),
    Cell("recarray_access", "r = people.view(np.recarray)\nh = r.height * 100\n", setup=REC),
    Cell("strings_upper_split", "s = np.array(['alpha beta', 'gamma', 'delta eps'])\nup = np.char.upper(s)\n"
         "parts = np.char.split(s)\nlens = np.char.str_len(s)\n"),
    Cell("strings_compare_sort", "names = np.array(['cy', 'ann', 'bob'])\nsrt = np.sort(names)\nidx = np.argsort(names)\n"
         "eq = names == 'bob'\n"),
    Cell("strings_join_replace", "s = np.array(['a-b', 'c-d'])\nr = np.char.replace(s, '-', '+')\nj = np.char.add(s, '!')\n"),
    Cell("datetime_ranges", "d = np.arange('2024-01', '2024-06', dtype='datetime64[M]')\ndays = (d[1:] - d[:-1]).astype(int)\n"),
    Cell("datetime_busday", "start = np.datetime64('2024-03-01')\nend = np.datetime64('2024-03-31')\n"
         "n = np.busday_count(start, end)\nnxt = np.busday_offset(start, 5, roll='forward')\n"),
    Cell("datetime_series", "t = np.datetime64('2024-01-01T00:00') + np.arange(6) * np.timedelta64(30, 'm')\n"
         "hours = (t - t[0]) / np.timedelta64(1, 'h')\n"),
    Cell("timedelta_math", "td = np.array([1, 2, 3], dtype='timedelta64[D]')\nwk = td * 7\ntot = td.sum()\nf = td / np.timedelta64(1, 'D')\n"),
    # -- plotting -------------------------------------------------------------------------------------------
    Cell("plot_subplots_grid", "fig, axes = plt.subplots(2, 2)\nfor i, ax in enumerate(axes.flat):\n"
         "    ax.plot(np.arange(5) * i)\nn = len(fig.axes)\nplt.close(fig)\ndel fig, axes, ax\n", setup=MPL, needs=("matplotlib",)),
    Cell("plot_bar_errorbar", "vals = np.array([3.0, 5.0, 2.0])\nerr = vals * 0.1\nfig, ax = plt.subplots()\n"
         "bars = ax.bar(np.arange(3), vals, yerr=err)\nh = [b.get_height() for b in bars]\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    Cell("plot_contour", "g = np.linspace(-2, 2, 30)\nX, Y = np.meshgrid(g, g)\nZ = np.exp(-X ** 2 - Y ** 2)\n"
         "fig, ax = plt.subplots()\ncs = ax.contour(X, Y, Z, levels=5)\nnl = len(cs.levels)\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    Cell("plot_pyplot_state", "plt.figure()\nplt.plot(np.sin(np.linspace(0, 3, 20)))\nplt.title('sin')\n"
         "t = plt.gca().get_title()\nplt.close('all')\n", setup=MPL, needs=("matplotlib",)),
    Cell("plot_fill_between", "t = np.linspace(0, 1, 50)\nfig, ax = plt.subplots()\n"
         "poly = ax.fill_between(t, np.sin(t), np.cos(t), alpha=0.3)\nlim = ax.get_xlim()\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    Cell("plot_scatter_colors", "rng = np.random.default_rng(8)\np = rng.random((30, 2))\nc = p.sum(axis=1)\n"
         "fig, ax = plt.subplots()\nsc = ax.scatter(p[:, 0], p[:, 1], c=c)\noff = sc.get_offsets().shape\nplt.close(fig)\n",
         setup=MPL, needs=("matplotlib",)),
    # -- image-style arrays -----------------------------------------------------------------------------------
    Cell("img_normalize_clip", "lo, hi = np.percentile(img, [5, 95])\nout = np.clip((img - lo) / (hi - lo), 0, 1)\n", setup=IMG),
    Cell("img_blur_box", "pad = np.pad(img, 1, mode='edge')\nblur = sum(pad[i:i + 16, j:j + 16] for i in range(3) for j in range(3)) / 9\n",
         setup=IMG),
    Cell("img_threshold_count", "mask = img > img.mean()\ncount = int(mask.sum())\nimg2 = np.where(mask, 1.0, 0.0)\n", setup=IMG),
    Cell("img_rgb_gray", "rgb = np.stack([img, img ** 2, np.sqrt(img)], axis=-1)\ngray = rgb @ np.array([0.299, 0.587, 0.114])\n",
         setup=IMG),
    Cell("img_downsample", "small = img.reshape(8, 2, 8, 2).mean(axis=(1, 3))\nup = np.kron(small, np.ones((2, 2)))\n", setup=IMG),
    Cell("img_uint8_roundtrip", "u8 = (img * 255).astype(np.uint8)\nback = u8.astype(np.float64) / 255\nerr = np.abs(back - img).max()\n",
         setup=IMG, needs=("uint64",)),
    Cell("img_flip_rot_inplace", "img[:] = img[::-1]\nrot = np.rot90(img, 2)\n", setup=IMG),
    # -- small numerical methods ---------------------------------------------------------------------------------
    Cell("newton_sqrt", "v = np.array([2.0, 9.0, 10.0])\ng = v / 2\nfor _ in range(20):\n    g = 0.5 * (g + v / g)\n"
         "err = np.abs(g - np.sqrt(v)).max()\n"),
    Cell("gradient_descent", "rng = np.random.default_rng(10)\nX = rng.normal(size=(50, 3))\nw_true = np.array([1.0, -2.0, 0.5])\n"
         "yv = X @ w_true\nw = np.zeros(3)\nfor _ in range(100):\n    w -= 0.1 * X.T @ (X @ w - yv) / len(yv)\n"),
    Cell("kmeans_step", "rng = np.random.default_rng(11)\nP = rng.normal(size=(60, 2))\nC = P[:3].copy()\nfor _ in range(5):\n"
         "    lab = np.argmin(((P[:, None] - C[None]) ** 2).sum(-1), axis=1)\n"
         "    C = np.array([P[lab == k].mean(0) if (lab == k).any() else C[k] for k in range(3)])\n"),
    Cell("euler_ode", "dt = 0.01\nt = np.arange(0, 1, dt)\nyv = np.empty_like(t)\nyv[0] = 1.0\nfor i in range(1, len(t)):\n"
         "    yv[i] = yv[i - 1] - dt * yv[i - 1]\nerr = abs(yv[-1] - np.exp(-t[-1]))\n"),
    Cell("softmax_cross_entropy", "rng = np.random.default_rng(12)\nlogits = rng.normal(size=(8, 4))\nlabels = rng.integers(0, 4, 8)\n"
         "p = np.exp(logits - logits.max(1, keepdims=True))\np /= p.sum(1, keepdims=True)\n"
         "loss = -np.log(p[np.arange(8), labels]).mean()\n"),
    Cell("game_of_life", "Z = np.zeros((8, 8), dtype=int)\nZ[1, 2] = Z[2, 3] = Z[3, 1] = Z[3, 2] = Z[3, 3] = 1\nfor _ in range(4):\n"
         "    N = sum(np.roll(np.roll(Z, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if (i, j) != (0, 0))\n"
         "    Z = ((N == 3) | ((Z == 1) & (N == 2))).astype(int)\nalive = Z.sum()\n"),
    Cell("mandelbrot_counts", "xs, ys = np.meshgrid(np.linspace(-2, 0.5, 40), np.linspace(-1, 1, 30))\nc = xs + 1j * ys\n"
         "z = np.zeros_like(c)\nn = np.zeros(c.shape, int)\nfor k in range(20):\n    z = z * z + c\n    n[np.abs(z) < 2] += 1\n",
         needs=("complex",)),
    Cell("polyfit_eval", "t = np.linspace(0, 1, 20)\nyv = 3 * t ** 2 - t + 0.5\nc = np.polyfit(t, yv, 2)\nfit = np.polyval(c, t)\n"
         "r = np.roots([1, -3, 2])\n"),
    Cell("linear_regression_lstsq", "rng = np.random.default_rng(13)\nX = np.c_[np.ones(30), rng.normal(size=30)]\n"
         "yv = X @ [2.0, 0.5] + rng.normal(scale=0.1, size=30)\nbeta = np.linalg.lstsq(X, yv, rcond=None)[0]\n"),
    Cell("pairwise_cosine", "rng = np.random.default_rng(14)\nV = rng.normal(size=(6, 4))\nVn = V / np.linalg.norm(V, axis=1, keepdims=True)\n"
         "S = Vn @ Vn.T\nnp.fill_diagonal(S, 0)\nbest = S.argmax(axis=1)\n"),
    Cell("one_hot_encode", "labels = np.array([0, 2, 1, 2])\noh = np.eye(3)[labels]\nback = oh.argmax(1)\n"),
    Cell("running_stats_loop", "mean = 0.0\nM2 = 0.0\nfor i, v in enumerate(x[:50], 1):\n    d = v - mean\n    mean += d / i\n"
         "    M2 += d * (v - mean)\nvar = M2 / 49\n", setup=RNG),
    Cell("cumulative_max_drawdown", "prices = 100 + np.cumsum(x[:60])\npeak = np.maximum.accumulate(prices)\n"
         "dd = (prices - peak) / peak\nworst = dd.min()\n", setup=RNG),
    Cell("histogram2d_density", "H, xe, ye = np.histogram2d(x, y, bins=4)\ndens = H / H.sum()\n", setup=RNG),
    Cell("quantile_bins", "q = np.quantile(x, [0, 0.25, 0.5, 0.75, 1])\nlab = np.digitize(x, q[1:-1])\ncnt = np.bincount(lab)\n", setup=RNG),
    Cell("zscore_outliers", "z = (x - x.mean()) / x.std()\nout_idx = np.where(np.abs(z) > 2)[0]\nclean = x[np.abs(z) <= 2]\n", setup=RNG),
    Cell("cumsum_groupby", "keys = np.array([0, 1, 0, 2, 1, 0])\nvals = np.arange(6.0)\nsums = np.bincount(keys, weights=vals)\n"
         "order = np.argsort(keys, kind='stable')\n"),
    # -- printing and display -------------------------------------------------------------------------------------
    Cell("print_options_local", "with np.printoptions(precision=2, suppress=True):\n    print(np.array([1 / 3, 1e-9]))\n"
         "print(np.array([1 / 3]))\n"),
    Cell("print_set_options", "np.set_printoptions(precision=3)\nprint(np.pi * np.ones(2))\nnp.set_printoptions(precision=8)\n"),
    Cell("errstate_block", "with np.errstate(divide='ignore', invalid='ignore'):\n    r = np.array([1.0, 0.0]) / 0.0\n"
         "fin = np.isfinite(r).sum()\n"),
    Cell("print_2d_repr", "A = np.arange(6).reshape(2, 3) / 7\nprint(A)\nprint(repr(A.astype(np.float32)))\ns = str(A[0])\n"),
    Cell("print_format_table", "for name, v in zip(['a', 'b'], x[:2]):\n    print(f'{name:>3}: {v:8.3f}')\n", setup=RNG),
    Cell("trailing_tuple", "m = x.mean()\ns = x.std()\nm, s\n", setup=RNG),
    Cell("trailing_quiet", "z = x[:3] * 2\nz.sum();\n", setup=RNG),
    Cell("array_str_repr", "a = np.array([1.5, 2.25])\nt = np.array2string(a, precision=1)\nr = np.array_repr(a)\n"),
    # -- exceptions in tutorials --------------------------------------------------------------------------------------
    Cell("error_index", "a = np.arange(3)\nv = a[10]\n"),
    Cell("error_reshape", "a = np.arange(6)\nb = a.reshape(4, 2)\n"),
    Cell("error_linalg_singular", "A = np.zeros((2, 2))\ntry:\n    np.linalg.inv(A)\nexcept np.linalg.LinAlgError as err:\n"
         "    msg = str(err)\n"),
    Cell("error_type_mix", "a = np.arange(3)\nv = a + 'x'\n"),
    Cell("error_caught_and_continued", "try:\n    q = np.ones(2) @ np.ones(3)\nexcept ValueError:\n    q = None\nok = q is None\n"),
    # -- sets, sorting, searching ---------------------------------------------------------------------------------------
    Cell("unique_inverse", "v = np.array([3, 1, 3, 2, 1])\nu, inv, cnt = np.unique(v, return_inverse=True, return_counts=True)\n"),
    Cell("sort_kinds_desc", "v = np.array([3.0, 1.0, 2.0, 5.0])\nd = np.sort(v)[::-1]\nst = np.argsort(-v, kind='stable')\n"),
    Cell("top_k_rows", "A = np.arange(20.0).reshape(4, 5) % 7\ntop2 = np.sort(A, axis=1)[:, -2:]\n"),
    # -- dtype handling --------------------------------------------------------------------------------------------------
    Cell("dtype_objects_written_back", "d = x.dtype\nk = x.dtype.kind\nsame = d == np.float64\nnm = d.name\n", setup=RNG),
    Cell("dtype_float16_math", "h = np.arange(5, dtype=np.float16) / 3\ns = h.sum()\nhh = h * h\n"),
    Cell("dtype_int_overflow", "a = np.array([120], dtype=np.int8)\nb = a + np.int8(10)\n"),
    Cell("dtype_bool_sum_mean", "m = x > 0\nn = m.sum()\nfr = m.mean()\nanyall = (m.any(), m.all())\n", setup=RNG),
    Cell("dtype_complex_basic", "z = np.array([1 + 2j, 3 - 1j])\nmag = np.abs(z)\nc = z.conj()\nr = z.real * 2\n",
         needs=("complex",)),
    # -- foreign arrays ----------------------------------------------------------------------------------------------------
    Cell("pandas_ufunc_keeps_series", "import pandas as pd\ns = pd.Series(x[:5])\nr = np.sqrt(np.abs(s))\nk = type(r).__name__\n",
         setup=RNG, needs=("pandas",)),
    Cell("pandas_frame_ops", "import pandas as pd\ndf = pd.DataFrame({'a': x[:4], 'b': y[:4]})\nz = np.exp(df) - 1\n"
         "means = df.mean().to_numpy()\n", setup=RNG, needs=("pandas",)),
    Cell("xarray_roundtrip", "import xarray as xr\nda = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=('a', 'b'))\n"
         "s = np.sin(da)\nm = da.mean('a').values\n", needs=("xarray",)),
    Cell("scipy_sparse_ops", "import scipy.sparse as sp\nS = sp.random(5, 5, density=0.3, random_state=0, format='csr')\n"
         "d = S.toarray().sum()\nt = (S @ np.ones(5)).sum()\n", needs=("scipy",)),
    Cell("masked_stats", "m = np.ma.masked_invalid(np.array([1.0, np.nan, 3.0]))\nmu = m.mean()\nf = m.filled(-1)\n"),
    Cell("matrix_ops", "M = np.matrix([[1.0, 2.0], [3.0, 4.0]])\nP = M * M\nI = M.I\n"),
]
