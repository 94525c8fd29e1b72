"""The package as users get it: a wheel built from the checkout (``pip wheel``, not editable)
installed by pip into a fresh virtualenv, then ``llmduel db upgrade`` on a new SQLite file and
``llmduel serve --demo`` answering ``/healthz``, all run from a directory outside the source tree
(nothing is imported from the checkout).

The wheel is installed without its dependencies, which the new environment reads from the test
environment's site-packages (a ``.pth`` line; the editable install there is not processed, so
``service`` can only come from the wheel), with every distribution outside the closure of the
wheel's own ``Requires-Dist`` hidden (:data:`HIDE_UNDECLARED`): what runs there could run after a
real ``pip install .``, without resolving and installing numpy, scipy and numba anew (most of a
minute).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx
import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Run at the start of every interpreter of the new environment (a ``.pth`` line that starts with
# ``import``): modules of distributions outside the closure of the wheel's own ``Requires-Dist``
# (with the extras each requirement names; llmduel's own extras left out) cannot be imported there, as if pip had installed only what the wheel declares.
HIDE_UNDECLARED = """
import importlib.metadata as md, re, sys

def _reqs(name, extras=()):
    out = []
    for r in md.requires(name) or []:
        spec, _, marker = r.partition(";")
        wanted = re.findall(r"extra\\s*==\\s*[\\"']([^\\"']+)", marker)
        if wanted and not set(wanted) & set(extras):
            continue
        m = re.match(r"\\s*([A-Za-z0-9._-]+)\\s*(?:\\[([^\\]]*)\\])?", spec)
        out.append((m.group(1).lower().replace("_", "-"), tuple(x.strip() for x in (m.group(2) or "").split(",") if x.strip())))
    return out

def _closure():
    todo, seen = _reqs("llmduel"), {"llmduel"}
    while todo:
        n, extras = todo.pop()
        if (n, extras) not in seen:
            seen.update({n, (n, extras)})
            try:
                todo += _reqs(n, extras)
            except md.PackageNotFoundError:
                pass
    return seen

class HideUndeclared:
    def __init__(self):
        closure = _closure()
        self.hidden = {top for top, dists in md.packages_distributions().items()
                       if not any(d.lower().replace("_", "-") in closure for d in dists)}

    def find_spec(self, name, path=None, target=None):
        if path is None and name in self.hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (not declared by the wheel)", name=name)
        return None

sys.meta_path.insert(0, HideUndeclared())
"""


# One interpreter of the new environment for three checks (each start there costs the hiding hook's scan):
# where ``service`` comes from, that every module of the wheel imports, and that the bundled price map is there.
EVERY_MODULE = """
import importlib, pkgutil
import algorithms, judges, migrations, service
print(service.__file__, flush=True)
names = [m.name for p in (algorithms, judges, service) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")
         if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
from service.pricing import bundled_map
print(len(bundled_map()))
"""


def _site_packages(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_non_editable_install_migrates_and_serves(tmp_path):
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps", "-w", str(wheels)]
        + [str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("llmduel-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    llmduel = env_dir / "bin" / "llmduel"
    site = Path(_site_packages(py))
    (site / "test_dependencies.pth").write_text(_site_packages(Path(sys.executable)) + "\n")
    (site / "hide_undeclared.py").write_text(HIDE_UNDECLARED)
    (site / "zz_hide_undeclared.pth").write_text("import hide_undeclared\n")  # after the path line
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--disable-pip-version-check"]
        + ["--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        DATABASE_URL=f"sqlite:///{work / 'fresh.db'}",
        LLMDUEL_API_KEY="wheel-test-key",
        LLMDUEL_RESUME_RUNS="0",
        PYTHONUNBUFFERED="1",
    )

    every = subprocess.run(  # every module of the wheel imports with what the wheel declares
        [str(py), "-c", EVERY_MODULE], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    where = every.stdout.splitlines()[0] if every.stdout else ""
    assert where.startswith(str(env_dir)) and "site-packages" in where, (every.stdout, every.stderr[-3000:])
    assert every.returncode == 0, every.stderr[-3000:]
    modules, prices = (int(n) for n in every.stdout.splitlines()[1:])
    assert modules > 100, every.stdout
    assert prices >= 30, every.stdout  # the bundled price map is package data
    hidden = subprocess.run(  # the test environment's extras are out of reach, as after a real install
        [str(py), "-c", "import pytest"], cwd=work, env=env, capture_output=True, text=True, timeout=60
    )
    assert hidden.returncode != 0 and "not declared by the wheel" in hidden.stderr, hidden.stderr

    up = subprocess.run([str(llmduel), "db", "upgrade"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    cur = subprocess.run([str(llmduel), "db", "current"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert cur.returncode == 0 and "(head)" in cur.stdout, (cur.stdout, cur.stderr)  # at the newest migration

    port = _free_port()
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen(
        [str(llmduel), "serve", "--demo", "--port", str(port), "--log-level", "warning"],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        # the fresh environment compiles the numba kernels before it serves: minutes on a loaded machine
        deadline = time.monotonic() + 300
        healthy = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                healthy = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                pass
            if healthy:
                break
            time.sleep(0.3)
        assert healthy, (tmp_path / "serve.log").read_text(errors="replace")[-3000:]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
