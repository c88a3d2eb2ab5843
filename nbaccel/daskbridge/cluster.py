"""``%nbaccel cluster start | connect | stop | status``: Dask's own LocalCluster and Client.

``start``/``connect``/``scale``/``stop`` are also the Python API (``from nbaccel.daskbridge import
cluster``); ``status()`` returns what ``%nbaccel cluster`` shows, readable as text and as a table
in a notebook.

nbaccel runs no scheduler of its own. ``start`` makes a ``distributed.LocalCluster`` of worker
processes and a ``Client`` (which becomes Dask's default, so every ``compute`` uses it);
``connect`` joins a running scheduler, with a timeout. A client made by the user is used as it is.
Before the first compiled call on a cluster, each worker is asked whether it can import nbaccel.
"""
from __future__ import annotations

import sys

from .worker import ping

_state = {"cluster": None, "client": None}
_checked: set = set()


class ClusterError(RuntimeError):
    """A cluster command failed; the message says why and what to do."""


def current_client():
    """Dask's default distributed client, or None (no import of distributed if it is not loaded)."""
    mod = sys.modules.get("distributed")
    if mod is None:
        return None
    try:
        return mod.default_client()
    except ValueError:
        return None


def start(workers=None, threads=1, memory_limit="auto"):
    """A LocalCluster of ``workers`` processes (default: one per core) and its Client."""
    import os
    from distributed import Client, LocalCluster
    stop()
    n = workers or max(os.cpu_count() or 1, 1)
    cluster = LocalCluster(n_workers=n, threads_per_worker=threads, processes=True,
                           dashboard_address=":0", memory_limit=memory_limit)
    client = Client(cluster)
    _state.update(cluster=cluster, client=client)
    check_workers(client)
    return client


def connect(address, timeout=10.0):
    """A Client of the scheduler at ``address``; a clear error if it does not answer in time."""
    from distributed import Client
    stop()
    try:
        client = Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError) as e:
        raise ClusterError(f"no Dask scheduler answered at {address} within {timeout:g} s "
                           f"({type(e).__name__}); check the address (tcp://host:8786) and that the "
                           "scheduler runs, or start a local one with %nbaccel cluster start") from None
    _state.update(client=client)
    check_workers(client)
    return client


def stop():
    """Close the client and the cluster this module started (a user's own client stays)."""
    client, cluster = _state["client"], _state["cluster"]
    _state.update(client=None, cluster=None)
    if client is not None:
        client.close()
    if cluster is not None:
        try:
            cluster.close()
        except (KeyError, RuntimeError, OSError, TimeoutError):
            # distributed's close can race a worker that already left (KeyError on its address);
            # the processes are gone either way: the cluster is stopped
            pass


def check_workers(client):
    """Raise a ClusterError naming each worker that cannot import nbaccel (checked once per
    set of workers)."""
    workers = tuple(sorted(client.scheduler_info().get("workers", {})))
    key = (id(client), workers)
    if key in _checked or not workers:
        return
    answers = client.run(ping, on_error="return")
    missing = [w for w, a in sorted(answers.items()) if a is not True]
    if missing:
        raise ClusterError(f"nbaccel cannot run on Dask worker{'s' * (len(missing) > 1)} "
                           f"{', '.join(missing)}: it is not importable there. Install it on every "
                           "worker (pip install 'nbaccel[dask]', the same version as here), or run "
                           "the cell without %%compile")
    _checked.add(key)


def scale(workers):
    """Scale the LocalCluster that ``start`` made to ``workers`` processes and wait until exactly
    that many are connected (a retired worker has left the scheduler when this returns)."""
    import time
    client, cluster = _state["client"], _state["cluster"]
    if cluster is None:
        raise ClusterError("no LocalCluster of nbaccel's to scale: start one with %nbaccel cluster start")
    cluster.scale(workers)
    client.wait_for_workers(workers)
    while len(client.scheduler_info().get("workers", {})) > workers:
        time.sleep(0.05)
    check_workers(client)
    return status(client)


class ClusterStatus:
    """What ``%nbaccel cluster`` shows: the scheduler, its workers (threads, memory limit) and
    the dashboard; a line of text as ``repr`` and a table in a notebook (``_repr_html_``)."""

    def __init__(self, client, kind):
        info = client.scheduler_info()
        self.kind = kind
        self.address = client.scheduler.address
        self.dashboard = client.dashboard_link
        self.workers = [(addr, w.get("nthreads", 0), w.get("memory_limit") or 0)
                        for addr, w in sorted(info.get("workers", {}).items())]

    @property
    def threads(self):
        return sum(t for _, t, _ in self.workers)

    def __repr__(self):
        n, t = len(self.workers), self.threads
        return (f"Dask {self.kind} at {self.address}: {n} worker{'s' * (n != 1)}, "
                f"{t} thread{'s' * (t != 1)}; dashboard {self.dashboard}")

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))

    def _repr_html_(self):
        import html
        rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{t}</td><td>{_gib(m)}</td></tr>"
                       for a, t, m in self.workers)
        return (f"<div><b>Dask {html.escape(self.kind)}</b> at <code>{html.escape(self.address)}</code> · "
                f"<a href='{html.escape(self.dashboard)}' target='_blank'>dashboard</a>"
                "<table><tr><th>worker</th><th>threads</th><th>memory limit</th></tr>"
                f"{rows}</table></div>")


def _gib(n):
    return f"{n / 2**30:.1f} GiB" if n else "none"


def status(client=None):
    """The cluster in use (a :class:`ClusterStatus`), or None with no distributed client."""
    client = client or _state["client"] or current_client()
    if client is None:
        return None
    return ClusterStatus(client, "LocalCluster" if _state["cluster"] is not None else "cluster")


def describe(client=None) -> str:
    st = status(client)
    if st is None:
        return "no Dask cluster: Dask's default scheduler (threads) runs the graphs"
    return repr(st)
