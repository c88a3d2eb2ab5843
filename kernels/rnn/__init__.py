"""The LSTM time loop on raw arrays (NumPy or CuPy, with their BLAS): ``cpu.lstm_scan_forward``
and ``cpu.lstm_scan_backward``, the implementation of nbaccel's ``lstm_scan`` op and its
derivative when no graph of the derivative is recorded. Nothing here imports nbaccel."""
