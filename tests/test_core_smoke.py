"""The foundation's promises, end to end."""
import numpy as np

import nbaccel as nb
from oracle import check, gradcheck, random_array


def test_grad_of_square_sum():
    x = nb.randn(3, 4, requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * np.asarray(x.detach()), rtol=1e-6)


def test_numpy_interop_and_namespace():
    t = np.exp(nb.ones(3))
    assert isinstance(t, nb.Tensor)
    assert nb.ones(3).__array_namespace__() is nb


def test_oracle_add_exp():
    a, b = random_array((3, 4), "float32"), random_array((4,), "float32")
    check(lambda x, y: (x + y).exp(), lambda x, y: np.exp(x + y), a, b)


def test_gradcheck_composite():
    gradcheck(lambda x: (x.exp() * x).sigmoid(), random_array((2, 3), "float64"))
