"""``llmduel serve --demo``: a newcomer's first run, on a fresh SQLite file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import httpx
from conftest import free_port


def test_serve_demo_generates_a_key_and_runs_the_demo_campaign(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("LLMDUEL_API_KEY", "DATABASE_URL")}
    env["PYTHONUNBUFFERED"] = "1"
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from service.cli import main; sys.exit(main())",
                "serve",
                "--demo",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        key = view = None
        while time.monotonic() < deadline and proc.poll() is None:
            text = log.read_text(errors="replace")
            m = re.search(r"generated an admin key.*?\n\s+(\S+)", text)
            if m and "campaign 1 created" in text:
                key = m.group(1)
                try:  # the demo starts before uvicorn listens
                    r = httpx.get(
                        f"http://127.0.0.1:{port}/v1/campaigns/1", headers={"Authorization": f"Bearer {key}"}, timeout=5
                    )
                except httpx.ConnectError:
                    time.sleep(0.3)
                    continue
                # dctas-pc may certify the demo before its first progress line
                progressed = "campaign 1: running" in text or "certified winner" in text
                if r.status_code == 200 and r.json()["duels"] > 0 and progressed:
                    view = r.json()
                    break
            time.sleep(0.3)
        text = log.read_text(errors="replace")
        assert proc.poll() is None, text
        assert key and view, text
        assert (tmp_path / "llmduel.db").exists()  # the default SQLite file, migrated at start
        assert view["name"].startswith("demo") and [m["cost"] for m in view["models"]] == [4.0, 1.0, 1.0]
        assert view["judge"]["kind"] == "simulated" and view["run"]["active"] or view["status"] != "running"
        assert f"http://127.0.0.1:{port}/campaigns/1" in text
        # The generated key is the only admin key: a wrong one is refused.
        r = httpx.get(f"http://127.0.0.1:{port}/v1/campaigns/1", headers={"Authorization": "Bearer nope"})
        assert r.status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    text = log.read_text(errors="replace")
    # uvicorn shuts down gracefully, then re-raises SIGTERM: -15 is a clean exit.
    assert proc.returncode in (0, -15), text
    assert "Traceback" not in text, text
    assert text.count("generated an admin key") == 1


BLAS_PROBE = """
import os, sys
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.pop(var, None)
seen = {}

class Watch:  # records the BLAS settings at the moment numpy starts loading
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not seen:
            seen.update((v, os.environ.get(v)) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"))
        return None

sys.meta_path.insert(0, Watch())
from service.cli import main
code = main(["serve", "--workers", "0"])  # refused after the parser is built (which loads numpy)
print(code, "numpy" in sys.modules, seen)
"""


def test_serve_sets_one_blas_thread_before_numpy_loads():
    """OpenBLAS reads its thread count when numpy loads; the parser loads numpy before ``cmd_serve`` runs,
    so ``llmduel serve`` must set it first (with the machine's threads a small solve took 0.2 s, not 0.3 ms)."""
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "2 True {'OPENBLAS_NUM_THREADS': '1', 'OMP_NUM_THREADS': '1'}", out.stderr
