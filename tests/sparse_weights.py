"""2:4 weights for the sparse kernels' tests."""
import numpy as np

PAIRS = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def every_pair_pattern(cols):
    """(6, cols) float32 2:4 weights whose rows cycle through all 6 kept-position pairs of a
    group, each kept value distinct (1 + g and -0.5 - g in group g)."""
    w = np.zeros((6, cols), np.float32)
    for r in range(6):
        for g in range(cols // 4):
            a, b = PAIRS[(r + g) % 6]
            w[r, 4 * g + a] = 1 + g
            w[r, 4 * g + b] = -0.5 - g
    return w
