"""Fixtures for the real-browser tests: a JupyterLab server and headless Chromium.

The server runs from this interpreter (so its kernel imports this checkout) in a
temporary root holding a copy of the notebook under test, with its own settings,
workspace and runtime dirs so nothing from the user's Jupyter setup leaks in. The
browser is the system Chromium (Debian's /usr/bin/chromium) driven by Python
Playwright: no browser download, ever.

Outside CI a missing Chromium or Playwright skips the tests; under CI (CI=true) it
fails them, so the check can never silently stop running.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
INSTALL_HINT = "install it with `sudo apt-get install chromium` (or `make chromium` as root)"


def require(ok: bool, what: str) -> None:
    """Skip (locally) or fail loudly (under CI) when a browser-test prerequisite is missing."""
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser test prerequisite missing under CI: {what}", pytrace=False)
    pytest.skip(f"browser test skipped: {what}")


def chromium_executable() -> str | None:
    """The system Chromium: $NBACCEL_CHROMIUM, /usr/bin/chromium, or chromium on PATH."""
    for cand in (os.environ.get("NBACCEL_CHROMIUM"), "/usr/bin/chromium",
                 shutil.which("chromium"), shutil.which("chromium-browser")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    url: str
    token: str
    root: Path
    proc: subprocess.Popen
    log: Path

    def open_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?token={self.token}"

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def _write_settings(settings: Path) -> None:
    # no news / update toasts over the widget in screenshots
    notif = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notif.parent.mkdir(parents=True, exist_ok=True)
    notif.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))


def _wait_ready(server: LabServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    req = urllib.request.Request(f"{server.url}/api/status",
                                 headers={"Authorization": f"token {server.token}"})
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {server.proc.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(req, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer /api/status within {timeout:.0f} s:\n{server.log_tail()}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server and its kernels: the process group we started, by its id."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, PermissionError):
        return
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def start_lab(notebook: Path, workdir: Path, timeout: float = 60.0) -> LabServer:
    """Start `jupyter lab` on a free port, serving an output-free copy of `notebook` (alone:
    it must not need files from its folder), and return once /api/status answers."""
    root = workdir / "root"
    root.mkdir(parents=True, exist_ok=True)
    # a copy without saved outputs, so every widget on the page comes from this run
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    nb.get("metadata", {}).pop("widgets", None)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    (root / notebook.name).write_text(json.dumps(nb, indent=1), encoding="utf-8")
    for sub in ("settings", "workspaces", "runtime", "config"):
        (workdir / sub).mkdir(exist_ok=True)
    _write_settings(workdir / "settings")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ)
    env.update({
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        "JUPYTERLAB_SETTINGS_DIR": str(workdir / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(workdir / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"),
        "JUPYTER_CONFIG_DIR": str(workdir / "config"),
    })
    env.pop("NBACCEL_STABLE_OUTPUT", None)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.token={token}",
           "--LabApp.expose_app_in_browser=True", "--allow-root",
           f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0"]
    log = workdir / "jupyter-lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = LabServer(f"http://127.0.0.1:{port}", token, root, proc, log)
    try:
        _wait_ready(server, timeout)
    except BaseException:
        _stop(proc)
        raise
    return server


@pytest.fixture(scope="module")
def lab_server(request, tmp_path_factory):
    """A running JupyterLab serving `request.module.NOTEBOOK`; always stopped afterwards."""
    notebook = Path(getattr(request.module, "NOTEBOOK"))
    require(notebook.is_file(), f"notebook {notebook} not found")
    server = start_lab(notebook, tmp_path_factory.mktemp("jupyterlab"))
    try:
        yield server
    finally:
        _stop(server.proc)


@pytest.fixture(scope="module")
def chromium():
    """A headless system Chromium launched through Playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "Python Playwright is not installed (pip install playwright; "
                       "no `playwright install` needed)")
    exe = chromium_executable()
    require(exe is not None, f"Chromium not found at /usr/bin/chromium; {INSTALL_HINT}")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium):
    """A fresh page (1200×900) per test, with browser console errors collected."""
    context = chromium.new_context(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
    pg = context.new_page()
    pg.console_errors = []
    pg.on("console", lambda m: m.type == "error" and pg.console_errors.append(m.text))
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))
    try:
        yield pg
    finally:
        context.close()
