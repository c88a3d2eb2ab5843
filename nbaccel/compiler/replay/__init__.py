"""The replay room: what a later call reuses, and whether it runs compiled at all.

``entries.py`` keeps a function's compiled graphs, keyed and explained by ``guards.py``
(recompiles, automatic dynamic shapes, the eager fallback), and ``cheap_path.py`` runs a small
graph as straight-line NumPy. ``guarded.py`` replays a call without tracing when the guards
that ``readset.py`` derives from what ``read_recorder.py`` saw still hold; ``replay.py`` and
``train_step.py`` are the replays of pure functions and of training steps; ``compiled.py`` is
the type of an ``nb.compile`` result, known here without importing ``api``. ``decision.py`` is
the one decision: plain or compiled, per run, from measured runs of the user's own code.

May import: capture, config, runtime, schedule
"""
