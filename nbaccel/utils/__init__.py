"""``nbaccel.utils``: PyTorch's ``torch.utils`` for what nbaccel has (``data``)."""
from . import data  # noqa: F401
