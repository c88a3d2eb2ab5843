"""The report room: what a compiled call did, as plain data every view renders.

``report.py`` is ``CompileReport`` (``nbaccel.compiler.CompileReport``); ``triton_status.py``
what ``%nbaccel status`` says about the Triton tier.

May import: config, runtime
"""
