"""nbaccel.sparse: 2:4 semi-structured sparsity (see issue 12)."""
