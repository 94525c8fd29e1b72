"""The package as users get it: ``pip install .`` (not editable) into a fresh virtualenv,
then ``llmduel db upgrade`` on a new SQLite file and ``llmduel serve --demo`` answering
``/healthz``, all run from a directory outside the source tree (so nothing is imported
from the checkout). Needs the dependencies in pip's cache or network access.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import venv
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_non_editable_install_migrates_and_serves(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)  # no --system-site-packages: only what the wheel declares
    py = env_dir / "bin" / "python"
    llmduel = env_dir / "bin" / "llmduel"
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO)],
        capture_output=True,
        text=True,
        timeout=900,
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

    where = subprocess.run(
        [str(py), "-c", "import migrations, service; print(service.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.returncode == 0, where.stderr
    assert str(REPO) not in where.stdout and "site-packages" in where.stdout

    up = subprocess.run([str(llmduel), "db", "upgrade"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert up.returncode == 0, up.stderr
    cur = subprocess.run([str(llmduel), "db", "current"], cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert cur.returncode == 0 and "(head)" in cur.stdout, (cur.stdout, cur.stderr)  # at the newest migration
    prices = subprocess.run(  # the bundled price map is package data
        [str(py), "-c", "from service.pricing import bundled_map; print(len(bundled_map()))"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert prices.returncode == 0 and int(prices.stdout) >= 30, (prices.stdout, prices.stderr)

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
        deadline = time.monotonic() + 90
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
