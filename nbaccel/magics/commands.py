"""The ``%nbaccel`` line magic's commands, as a mixin of
:class:`~nbaccel.magics.extension.NbaccelMagics`, which owns the magic itself and the state the
commands read (its compiled cells, their reports, its config).

:data:`COMMANDS` is the one table of them: the dispatcher, ``%nbaccel help`` and the message
for an unknown command all read it, so a new command cannot be left out of the help."""
from __future__ import annotations

from IPython.core.error import UsageError

from . import options, cache_text
from ..devices import cuda_available
from ..compiler import api as capi
from ..compiler.cache import cache
from ..daskbridge import cluster   # (Dask itself loads with the first cluster command)

MODES = capi.MODES
BACKENDS = capi.BACKENDS


# name -> (method, usage, what it does); the order is the help's
COMMANDS = {
    "status": ("_status", "status", "the compiled cells, backends, devices and the disk cache (the default)"),
    "report": ("_report_cmd", "report [N]", "the report of the last compiled cell, or of In[N]"),
    "explain": ("_explain_cmd", "explain", "the last compiled cell's graph breaks, graph and generated code"),
    "config": ("_config_cmd", "config [key=value ...]",
               "show or set the defaults: mode, backend, device, report, recompile_limit"),
    "cache": ("_cache_cmd", "cache [info | clear [all | current | VERSION]]",
              "the disk cache of compiled kernels: where, how big, which versions; clear it"),
    "cluster": ("_cluster_cmd", "cluster [start [--workers N] [--threads T] | connect ADDRESS "
                "[--timeout S] | stop | status]", "a Dask cluster that compiled cells on Dask arrays run on"),
    "verify": ("_verify_cmd", "verify [on | off]",
               "run every %%compile cell plainly too and compare; alone: the last comparison"),
    "reset": ("_reset_cmd", "reset", "forget every compiled cell and graph (the disk cache stays)"),
    "help": ("_help_cmd", "help", "this list"),
}
# commands that take no arguments
_NO_ARGS = ("status", "explain", "reset", "help")


def commands_help() -> str:
    """The one-line list of ``%nbaccel`` commands (in the message for an unknown command)."""
    return ", ".join(usage for _, usage, _ in COMMANDS.values())


def help_text() -> str:
    """``%nbaccel help``: every command, its usage and what it does."""
    width = max(len(usage) for _, usage, _ in COMMANDS.values() if len(usage) <= 40)
    lines = ["%nbaccel commands:"]
    for _, usage, what in COMMANDS.values():
        if len(usage) > width:
            lines += [f"  {usage}", f"  {'':{width}}  {what}"]
        else:
            lines.append(f"  {usage:{width}}  {what}")
    lines.append("%%compile options: " + options.options_help())
    return "\n".join(lines)


class NbaccelCommands:
    """``%nbaccel <command>``: see :data:`COMMANDS`."""

    def _run_command(self, line):
        """Dispatch ``%nbaccel`` through :data:`COMMANDS` (no arguments: ``status``)."""
        parts = line.split()
        cmd, rest = (parts[0], parts[1:]) if parts else ("status", [])
        if cmd not in COMMANDS:
            raise UsageError(f"%nbaccel: unknown command {cmd!r}; the commands are {commands_help()}")
        if cmd in _NO_ARGS and rest:
            raise UsageError(f"%nbaccel {cmd} takes no arguments, got {' '.join(rest)!r}")
        if cmd == "report" and len(rest) > 1:
            raise UsageError(f"%nbaccel report takes at most one argument (N), got {' '.join(rest)!r}")
        return getattr(self, COMMANDS[cmd][0])(rest)

    def _help_cmd(self, rest):
        print(help_text())

    def _cells(self):
        """One row per compiled cell: its counts, and what its decisions measured
        (compiler/replay/decision.py): the latest ratio against the plain cell and the time saved,
        summed over its kinds of input. No ratio or saving is computed here."""
        by_entry: dict = {}
        for d in getattr(self, "decisions", {}).values():
            by_entry.setdefault(d.cell, []).append(d)
        rows = {}
        for e in self.entries.values():
            if not e.reports:
                continue
            r = e.reports[-1]
            st = e.cf.stats if e.cf.is_built else {}     # (a cell that only ran plainly)
            rows[e.key] = {"name": r.name, "calls": st.get("calls", 0), "compiles": st.get("compiles", 0),
                           "recompiles": st.get("recompiles", 0), "cache_hits": st.get("cache_hits", 0),
                           "tier": r.tier}
        for key, row in rows.items():
            verdicts = [d.verdict() for d in sorted(by_entry.get(key, ()), key=lambda d: d.last_used)]
            if verdicts:
                last = verdicts[-1]
                row.update(calls=sum(v.runs["plain"] + v.runs["compiled"] for v in verdicts),
                           speedup=last.ratio, verdict=last.to_dict(),
                           plain_seconds=last.plain_seconds, compiled_seconds=last.compiled_seconds,
                           compile_seconds=sum(v.compile_seconds for v in verdicts))
                saved = [v.saved_seconds for v in verdicts if v.saved_seconds is not None]
                row["saved_seconds"] = sum(saved) if saved else None
        return list(rows.values())

    def status_info(self):
        """The data `%nbaccel status` shows (a dict; also handy in tests)."""
        import importlib.util
        backends = ["numpy", "eager"] + (["numba"] if importlib.util.find_spec("numba") else [])
        devices = ["cpu"]
        try:
            if cuda_available():
                devices.append("cuda")
        except Exception:  # pragma: no cover - a broken CuPy must not break status
            pass
        try:                 # available / interpreter only / missing, with the reason
            from ..compiler.report.triton_status import triton_status  # lazy: ~50 ms of imports, for %nbaccel status
            import nbaccel_ext
            state, reason = triton_status()
            if state == "available":
                backends.append("triton")
            elif not nbaccel_ext.stable_output():      # machine-specific: not in saved notebooks
                backends.append(f"triton ({state}: {reason})")
        except Exception:  # pragma: no cover - status must not fail
            pass
        try:
            size = cache.size_bytes()
        except OSError:
            size = None
        cache_dir = cache.root_dir()
        try:
            cache.numba_dir(for_write=False)      # runs the trust check if nothing has yet
        except Exception:   # pragma: no cover - status must not fail
            pass
        problem = cache.problem()
        import nbaccel_ext
        if nbaccel_ext.stable_output():     # saved notebooks carry no machine-specific paths
            cache_dir, size = "$NBACCEL_CACHE_DIR", None
        if problem:      # the dashboard shows the directory line: say there that it is not used
            cache_dir = f"{cache_dir} — {problem}"
        return {"cells": self._cells(), "backends": backends, "devices": devices,
                "cache_dir": cache_dir, "cache_bytes": size, "cache_problem": problem}

    def _status(self, rest):
        import nbaccel_ext
        info = self.status_info()
        cells = info.pop("cells")
        info.pop("cache_problem")
        if _in_notebook(self.shell):
            nbaccel_ext.display_dashboard(cells, **info)
        else:
            print(nbaccel_ext.render_dashboard_text(dict(info, cells=cells),
                                                    stable=nbaccel_ext.stable_output()))

    def _report_cmd(self, rest):
        if rest:
            try:
                n = int(rest[0].strip("[]In"))
            except ValueError:
                raise UsageError(f"%nbaccel report: N must be an execution count, got {rest[0]!r}") from None
            if n not in self.by_count:
                raise UsageError(f"%nbaccel report: no compiled cell ran as In[{n}]")
            entry, report = self.by_count[n]
        elif self.last is None:
            raise UsageError("%nbaccel report: no %%compile cell has run yet")
        else:
            entry, report = self.last
        import nbaccel_ext
        d = self._report_dict(report, entry)
        if _in_notebook(self.shell):
            nbaccel_ext.display_report(d)
        else:
            print(nbaccel_ext.render_text(d, stable=nbaccel_ext.stable_output()))

    def _explain_cmd(self, rest):
        if self.last is None:
            raise UsageError("%nbaccel explain: no %%compile cell has run yet")
        print(self._explain_text(self.last[1]))

    def _config_cmd(self, rest):
        if not rest:
            cfg = dict(self.config_, recompile_limit=capi.config["recompile_limit"])
            print("  ".join(f"{k}={v}" for k, v in cfg.items()))
            return
        allowed = {"mode": MODES, "backend": BACKENDS, "device": options.DEVICES, "report": options.REPORTS}
        for item in rest:
            key, sep, val = item.partition("=")
            if not sep:
                raise UsageError(f"%nbaccel config: expected key=value, got {item!r}")
            if key == "recompile_limit":
                if not val.isdigit():
                    raise UsageError(f"%nbaccel config: recompile_limit must be a whole number >= 0, got {val!r}")
                capi.config["recompile_limit"] = int(val)
            elif key in allowed:
                if val not in allowed[key]:
                    raise UsageError(f"%nbaccel config: {key} must be one of {', '.join(allowed[key])}, got {val!r}")
                self.config_[key] = val
            else:
                raise UsageError(f"%nbaccel config: unknown key {key!r} (mode, backend, device, "
                                 "recompile_limit, report)")

    def _cache_cmd(self, rest):
        """`cache` / `cache info`: location, size, entries, versions; `cache clear [all |
        current | VERSION]`: remove every version (the default), this one, or a named one."""
        if not rest or rest == ["info"]:
            print(cache_text.render_info(cache.info()))
            return
        if rest[0] != "clear" or len(rest) > 2:
            raise UsageError(f"%nbaccel cache: expected `cache`, `cache info` or `cache clear [all | current | "
                             f"VERSION]`, got {' '.join(rest)!r}")
        which = rest[1] if len(rest) == 2 else "all"
        names = [v["name"] for v in cache.info()["versions"]]
        if which not in ("all", "current") and which not in names:
            raise UsageError(f"%nbaccel cache clear: {which!r} is not a cached version; choose all, current"
                             + (f" or one of {', '.join(names)}" if names else ""))
        try:
            removed = cache.clear(None if which == "all" else which)
        except (cache.cache_fs.Untrusted, OSError) as e:
            raise UsageError(f"%nbaccel cache clear: not clearing: {e}") from None
        print(cache_text.render_cleared(which, cache.root_dir(), removed))

    def _cluster_cmd(self, rest):
        """`cluster start [--workers N] [--threads T]`, `cluster connect ADDRESS [--timeout S]`,
        `cluster stop`, `cluster` / `cluster status`: Dask's LocalCluster or a running scheduler
        (see nbaccel/daskbridge/cluster.py and docs/dask.md)."""
        sub, args = (rest[0], rest[1:]) if rest else ("status", [])
        flags = dict(zip(args[::2], args[1::2])) if sub == "start" else dict(zip(args[1::2], args[2::2]))
        try:
            if sub == "start":
                unknown = set(flags) - {"--workers", "--threads"}
                if unknown or len(args) % 2:
                    raise UsageError("%nbaccel cluster start [--workers N] [--threads T]")
                cluster.start(workers=_count(flags.get("--workers")), threads=_count(flags.get("--threads")) or 1)
            elif sub == "connect":
                if not args or set(flags) - {"--timeout"}:
                    raise UsageError("%nbaccel cluster connect ADDRESS [--timeout SECONDS]")
                cluster.connect(args[0], timeout=float(flags.get("--timeout", 10)))
            elif sub == "stop":
                cluster.stop()
                print("nbaccel: the Dask cluster is stopped")
                return
            elif sub != "status":
                raise UsageError(f"%nbaccel cluster: expected start, connect, stop or status, got {sub!r}")
        except (cluster.ClusterError, ValueError) as e:
            raise UsageError(f"%nbaccel cluster {sub}: {e}") from None
        print(cluster.describe())

    def _verify_cmd(self, rest):
        """`verify on` / `verify off`: every %%compile cell also runs plainly on copies and is
        compared (as with --verify); `verify`: the last comparison."""
        if rest in (["on"], ["off"]):
            self.verify_all = rest == ["on"]
            print(f"nbaccel: --verify is {'on' if self.verify_all else 'off'} for every %%compile cell")
            return
        if rest:
            raise UsageError(f"%nbaccel verify: expected `verify`, `verify on` or `verify off`, got {' '.join(rest)!r}")
        if self.last_verify is None:
            raise UsageError("%nbaccel verify: no cell has run with --verify yet")
        print(self.last_verify.text())

    def _reset_cmd(self, rest):
        capi.reset()
        self.reset_state()
        print("nbaccel: forgot every compiled cell and graph (the disk cache stays)")


def _count(text):
    if text is None:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"%nbaccel cluster start: expected a whole number >= 1, got {text!r}")
    return int(text)


def _in_notebook(shell) -> bool:
    """A Jupyter kernel (widgets can render) rather than terminal IPython."""
    return getattr(shell, "kernel", None) is not None
