"""Every %%compile and %nbaccel option: good values work, bad ones are a one-line UsageError
that names the valid choices, never a traceback from inside nbaccel."""
import numpy as np
import pytest

pytest.importorskip("IPython")
from IPython import get_ipython  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402
from IPython.testing.globalipapp import start_ipython  # noqa: E402

from nbaccel.compiler.cache import cache  # noqa: E402
from nbaccel.compiler.config import config as nb_config  # noqa: E402
from nbaccel.magics import extension  # noqa: E402

CELL = "y = x * 2.0 + 1.0\n"


@pytest.fixture
def ip(tmp_path, monkeypatch):
    from nbaccel.compiler.runtime import runtime
    drain = lambda: runtime._COMPILER.submit(lambda: None).result(120)   # noqa: E731
    drain()          # background numba compiles of earlier tests write where the env points
    monkeypatch.setitem(nb_config, "cache_dir", str(tmp_path / "cache"))
    cache._reset_session_for_tests()
    monkeypatch.setattr(runtime, "_NUMBA_KERNELS", {})    # kernels reach the disk cache again
    shell = start_ipython() or get_ipython()
    shell.run_line_magic("load_ext", "nbaccel")
    shell.run_line_magic("nbaccel", "reset")
    magics = shell._nbaccel_magics
    config = dict(magics.config_)
    shell.user_ns.update(np=np, x=np.arange(6, dtype=np.float32).reshape(2, 3))
    yield shell
    drain()
    magics.config_.update(config)
    for k in ("y", "rep", "r"):
        shell.user_ns.pop(k, None)
    cache._reset_session_for_tests()


def cell(ip, line, body=CELL):
    return ip.run_cell(f"%%compile {line}\n{body}")


def usage_error(ip, source, capsys):
    """Run ``source``; it must fail with a UsageError shown as one line."""
    capsys.readouterr()
    res = ip.run_cell(source)
    assert isinstance(res.error_in_exec, UsageError), res.error_in_exec
    shown = capsys.readouterr()
    assert "Traceback" not in shown.out + shown.err
    return str(res.error_in_exec)


GOOD = ["", "--mode default", "--mode reduce-overhead", "--mode max-autotune", "--mode=max-autotune",
        "--backend auto", "--backend numba", "--backend numpy", "--backend eager",
        "--device auto", "--device cpu", "--dynamic", "--static", "--fullgraph",
        "--report auto", "--report widget", "--report text", "--report none",
        "-o rep", "--output rep", "--explain", "--mode default --backend numpy --report none --static --fullgraph"]


@pytest.mark.parametrize("line", GOOD)
def test_good_compile_options(ip, line, capsys):
    res = cell(ip, line)
    assert res.success, res.error_in_exec
    np.testing.assert_allclose(ip.user_ns["y"], ip.user_ns["x"] * 2.0 + 1.0, atol=1e-6)
    if line.split()[-1:] == ["rep"]:
        assert ip.user_ns["rep"].name
    if "--explain" in line:
        assert "--- graph" in capsys.readouterr().out


BAD = [
    ("--mode fastest", ["--mode", "default, reduce-overhead, max-autotune", "'fastest'"]),
    ("--mode=", ["--mode", "default, reduce-overhead, max-autotune"]),
    ("--mode", ["--mode needs a value", "default, reduce-overhead, max-autotune"]),
    ("--backend gpu", ["--backend", "auto, numba, numpy, eager"]),
    ("--backend", ["--backend needs a value", "auto, numba, numpy, eager"]),
    ("--device tpu", ["--device", "auto, cpu, cuda", "'tpu'"]),
    ("--device", ["--device needs a value", "auto, cpu, cuda"]),
    ("--report loud", ["--report", "auto, widget, text, none"]),
    ("--report", ["--report needs a value"]),
    ("--bogus", ["unrecognized arguments: --bogus", "--mode {default,reduce-overhead,max-autotune}"]),
    ("-x", ["unrecognized arguments: -x", "--backend {auto,numba,numpy,eager,triton}"]),
    ("--help", ["unrecognized arguments: --help", "--fullgraph"]),
    ("extra words", ["unrecognized arguments: extra words"]),
    ("--fullgraph=yes", ["--fullgraph", "the options are"]),
    ("--dynamic --static", ["--dynamic or --static, not both"]),
    ("-o", ["--output needs a value"]),
    ("-o 1x", ["-o needs a variable name", "'1x'"]),
    ("-o class", ["-o needs a variable name", "'class'"]),
    ('--mode "default', ["cannot read the options", "No closing quotation"]),
]


@pytest.mark.parametrize("line,expected", BAD)
def test_bad_compile_options(ip, line, expected, capsys):
    msg = usage_error(ip, f"%%compile {line}\n{CELL}", capsys)
    assert msg.startswith("%%compile")
    for part in expected:
        assert part in msg, (part, msg)
    assert "y" not in ip.user_ns                     # the cell did not run


def test_cuda_without_a_gpu_is_a_usage_error(ip, capsys):
    from nbaccel.devices import cuda_available
    if cuda_available():
        pytest.skip("a GPU is present")
    msg = usage_error(ip, f"%%compile --device cuda\n{CELL}", capsys)
    assert "--device cuda" in msg


GOOD_LINE = ["", "status", "config", "config mode=max-autotune backend=numpy device=cpu report=none",
             "config recompile_limit=4", "cache", "cache info", "cache clear", "cache clear all",
             "cache clear current", "reset"]


@pytest.mark.parametrize("line", GOOD_LINE)
def test_good_nbaccel_commands(ip, line):
    res = ip.run_cell(f"%nbaccel {line}")
    assert res.success, res.error_in_exec


def test_report_and_explain_after_a_cell(ip, capsys):
    assert cell(ip, "--backend numpy --report none").success
    n = max(ip._nbaccel_magics.by_count)
    for line in ("report", f"report {n}", f"report In[{n}]", "explain"):
        res = ip.run_cell(f"%nbaccel {line}")
        assert res.success, (line, res.error_in_exec)


def test_help_lists_every_command(ip, capsys):
    """`%nbaccel help` and the unknown-command message come from the command table, and the
    table holds every command method of the magic (a method left out of it could not run)."""
    from nbaccel.magics import commands
    capsys.readouterr()
    assert ip.run_cell("%nbaccel help").success
    out = capsys.readouterr().out
    for name, (method, usage, what) in commands.COMMANDS.items():
        assert usage in out and what in out, name
        assert callable(getattr(ip._nbaccel_magics, method)), method
    for name in ("status", "report", "explain", "config", "cache", "cluster", "verify", "reset", "help"):
        assert f"\n  {name}" in out, name
    assert "--backend {" in out and "--verify" in out            # and the %%compile options
    handlers = {m for m in dir(type(ip._nbaccel_magics)) if m.endswith("_cmd") or m == "_status"}
    assert handlers == {method for method, _, _ in commands.COMMANDS.values()}


BAD_LINE = [
    ("bogus", ["unknown command 'bogus'", "status, report [N], explain", "cache [info | clear", "cluster [start",
               "verify [on | off]", "help"]),
    ("help me", ["help takes no arguments"]),
    ("status now", ["status takes no arguments"]),
    ("explain all", ["explain takes no arguments"]),
    ("reset everything", ["reset takes no arguments"]),
    ("report x", ["N must be an execution count"]),
    ("report 1 2", ["at most one argument"]),
    ("report 9999", ["no compiled cell ran as In[9999]"]),
    ("config mode=fastest", ["mode must be one of default, reduce-overhead, max-autotune"]),
    ("config backend=gpu", ["backend must be one of auto, numba, numpy, eager"]),
    ("config device=tpu", ["device must be one of auto, cpu, cuda"]),
    ("config report=loud", ["report must be one of auto, widget, text, none"]),
    ("config recompile_limit=x", ["recompile_limit must be a whole number"]),
    ("config recompile_limit=-1", ["recompile_limit must be a whole number"]),
    ("config colour=red", ["unknown key 'colour'", "mode, backend, device, recompile_limit, report"]),
    ("config mode", ["expected key=value"]),
    ("cache bogus", ["cache clear [all | current | VERSION]"]),
    ("cache clear v9.9.9-none", ["not a cached version", "all, current"]),
    ("cache clear all now", ["cache clear [all | current | VERSION]"]),
]


@pytest.mark.parametrize("line,expected", BAD_LINE)
def test_bad_nbaccel_commands(ip, line, expected, capsys):
    before = dict(ip._nbaccel_magics.config_)
    msg = usage_error(ip, f"%nbaccel {line}", capsys)
    for part in expected:
        assert part in msg, (part, msg)
    assert ip._nbaccel_magics.config_ == before      # a bad config line changes nothing


def test_explain_before_any_cell(ip, capsys):
    assert "no %%compile cell has run yet" in usage_error(ip, "%nbaccel explain", capsys)


def test_config_sets_the_defaults(ip):
    ip.run_line_magic("nbaccel", "config mode=reduce-overhead backend=numpy report=none")
    assert ip._nbaccel_magics.config_["mode"] == "reduce-overhead"
    assert cell(ip, "").success
    assert ip._nbaccel_magics.last[0].cf.backend == "numpy"


def test_cache_command_shows_location_size_entries(ip, capsys, tmp_path):
    assert cell(ip, "--backend numba --report none").success
    ip.run_line_magic("nbaccel", "cache")
    out = capsys.readouterr().out
    assert str(tmp_path / "cache") in out and "limit" in out and "1 kernel" in out
    assert cache.version_name() in out
    ip.run_line_magic("nbaccel", "cache clear current")
    assert "cleared this version" in capsys.readouterr().out
    ip.run_line_magic("nbaccel", "cache")
    assert "0 kernels" in capsys.readouterr().out


def test_the_options_line_is_taken_as_written(ip, monkeypatch):
    """IPython expands {name} and $name in a magic's line unless told not to, copying the whole
    user namespace on every run to do so; no %%compile option takes a variable."""
    expanded = []
    monkeypatch.setattr(type(ip), "var_expand", lambda self, *a, **k: expanded.append(a) or a[0])
    ip.user_ns.update(np=np, x=np.ones(4))
    ip.run_cell("%%compile --report none\n" + CELL).raise_error()
    assert expanded == []
