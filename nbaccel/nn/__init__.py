"""``nbaccel.nn``: layers for small networks and transformers, PyTorch-style.

>>> import nbaccel as nb
>>> model = nb.nn.Sequential(nb.nn.Linear(2, 16), nb.nn.GELU(), nb.nn.Linear(16, 1))
>>> sum(p.numel() for p in model.parameters())
65
"""
from ..tensor import Parameter  # noqa: F401
from . import functional, init  # noqa: F401
from .module import Module  # noqa: F401
from .modules import (  # noqa: F401
    CrossEntropyLoss, Dropout, Embedding, Flatten, GELU, Identity, LayerNorm, Linear, LogSoftmax,
    MSELoss, ModuleDict, ModuleList, ReLU, RMSNorm, Sequential, Sigmoid, SiLU, Softmax, Softplus,
    Tanh)
from .attention import MultiheadAttention  # noqa: F401
from .losses import BCELoss, BCEWithLogitsLoss, NLLLoss  # noqa: F401
from . import parallel, utils  # noqa: F401,E402  (clip_grad_norm_, data_parallel, ...)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell  # noqa: F401,E402
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401,E402
                          TransformerEncoder, TransformerEncoderLayer)
from .attention import NonDynamicallyQuantizableLinear as _NDQLinear  # noqa: E402
from . import modules as _modules  # noqa: E402
import types as _types  # noqa: E402
# PyTorch's module path ``torch.nn.modules.linear`` (code names out_proj's class through it)
_modules.linear = _types.SimpleNamespace(Linear=Linear, NonDynamicallyQuantizableLinear=_NDQLinear)
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401,E402
from .pooling import (  # noqa: F401,E402
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
    AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d, LPPool2d, LPPool3d,
    MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, Upsample,
    UpsamplingBilinear2d, UpsamplingNearest2d)
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm  # noqa: F401,E402
from .activation import Dropout2d, Hardtanh, LeakyReLU, ReLU6  # noqa: F401,E402
