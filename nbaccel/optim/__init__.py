"""``nbaccel.optim``: PyTorch's optimisers and learning-rate schedulers, under PyTorch's names.

Each file has one job: ``optimizer.py`` the base class and SGD / Adam / AdamW, ``adaptive.py``
Adadelta / RMSprop / Adagrad (written over the base class), ``lr_scheduler.py`` the schedulers
(``nbaccel.optim.lr_scheduler``, as ``torch.optim.lr_scheduler``). The hyper-parameter table
(``HYPER``, ``LIFTED_KEYS``, ``BRANCH_KEYS``) is what the compiler's training step reads to
lift a learning rate into a graph input (compiler/train_step.py).
"""
from . import lr_scheduler  # noqa: F401
from .adaptive import Adadelta, Adagrad, RMSprop  # noqa: F401
from .optimizer import (BRANCH_KEYS, HYPER, LIFTED_KEYS, SGD, Adam, AdamW, Optimizer,  # noqa: F401
                        ParamGroup)
