"""Settings (service/config.py): read once from the environment, validated, one-line errors;
``llmduel serve`` exits 2 on a bad value; no other service module reads settings from the
environment; a generated key reaches every worker without being written to the environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import REPO, free_port

from service.config import Settings, SettingsError, env_name

BAD_VALUES = [
    ("LLMDUEL_RUN_MAX_FAILURES", "0", "greater than or equal to 1"),
    ("LLMDUEL_AUTO_MIGRATE", "sometimes", "'sqlite', 'always' or 'never'"),
    ("LLMDUEL_PG_HOT_POOL_SIZE", "eight", "valid integer"),
    ("LLMDUEL_RESUME_RUNS", "maybe", "valid boolean"),
    ("LLMDUEL_DUEL_EXPIRY_SECONDS", "inf", "finite"),
    ("LLMDUEL_CALL_TIMEOUT_SECONDS", "-1", "greater than 0"),
    ("LLMDUEL_PG_SYNCHRONOUS_COMMIT", "fast", "'on', 'off'"),
    ("LLMDUEL_PG_IDLE_TRANSACTION_SECONDS", "-1", "greater than or equal to 0"),
    ("LLMDUEL_PG_IDLE_TRANSACTION_SECONDS", "nan", "less than or equal to 86400"),
    ("LLMDUEL_WEB_AUTH", "everyone", "'local', 'key' or 'open'"),
    ("LLMDUEL_LOGIN_HOURS", "0", "greater than 0"),
    ("LLMDUEL_KEEP_ALIVE_SECONDS", "0", "greater than 0"),
    ("LLMDUEL_KEEP_ALIVE_SECONDS", "nan", "less than or equal to 3600"),
    ("LLMDUEL_FORECAST_MAX_DUELS", "100", "greater than or equal to 10000"),
    ("LLMDUEL_PUBLIC_BASE_URL", "example.org", "http://"),
]


def _clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("LLMDUEL_") or name == "DATABASE_URL":
            monkeypatch.delenv(name)


def test_defaults_and_values_from_the_environment(monkeypatch):
    _clean_env(monkeypatch)
    s = Settings.from_env()
    assert s.database_url == "sqlite:///./llmduel.db" and s.api_key is None and s.login_hours == 12.0
    monkeypatch.setenv("DATABASE_URL", "postgres://u@h/db")
    monkeypatch.setenv("LLMDUEL_PG_HOT_POOL_SIZE", "3")
    monkeypatch.setenv("LLMDUEL_RESUME_RUNS", "off")
    monkeypatch.setenv("LLMDUEL_AUTO_MIGRATE", " Always ")
    monkeypatch.setenv("LLMDUEL_WEB_AUTH", "OPEN")
    monkeypatch.setenv("LLMDUEL_RUN_MAX_FAILURES", "")  # empty: the default
    monkeypatch.setenv("LLMDUEL_DEMO", "1")  # not a variable: --demo only
    monkeypatch.setenv("LLMDUEL_PUBLIC_BASE_URL", "https://duels.example.org/")
    s = Settings.from_env()
    assert s.database_url == "postgresql+psycopg://u@h/db"
    assert (s.hot_pool_size, s.resume_runs, s.auto_migrate, s.web_auth) == (3, False, "always", "open")
    assert s.run_max_failures == 20 and s.demo is False
    assert s.public_base_url == "https://duels.example.org"
    # keyword arguments (tests, llmduel serve --demo) win over the environment
    assert Settings.from_env(hot_pool_size=5, demo=True).hot_pool_size == 5


@pytest.mark.parametrize(("name", "value", "message"), BAD_VALUES)
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch, name, value, message):
    _clean_env(monkeypatch)
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as info:
        Settings.from_env()
    text = str(info.value)
    assert "\n" not in text and text.startswith(name + ":") and message in text


def test_the_admin_key_never_shows_in_repr_or_errors(monkeypatch):
    _clean_env(monkeypatch)
    secret = "sk-settings-secret-0123456789"
    monkeypatch.setenv("LLMDUEL_API_KEY", secret)
    s = Settings.from_env()
    assert s.api_key == secret and secret not in repr(s) and secret not in str(s)
    monkeypatch.setenv("LLMDUEL_RUN_MAX_FAILURES", "x")
    with pytest.raises(SettingsError) as info:
        Settings.from_env()
    assert secret not in str(info.value)


def test_env_names_follow_the_documented_table():
    doc = (REPO / "docs" / "service.md").read_text()
    for field in Settings.model_fields:
        if (Settings.model_fields[field].json_schema_extra or {}).get("env") is False:
            continue
        assert f"`{env_name(field)}`" in doc, f"{env_name(field)} is not documented in docs/service.md"


def test_no_service_module_reads_settings_from_the_environment():
    """Only config.py reads settings; the others that touch os.environ read provider API keys
    *named* by a client config (clients/http.py, fake_provider.py, redaction.py, which masks
    their fragments, and campaigns/credentials.py, which checks they are set before any spend)
    or the CLI's own variables on the caller's side (cli/remote.py and the Python client it is built
    on, client.py: LLMDUEL_URL/LLMDUEL_API_KEY; cli/prices.py: LLMDUEL_PRICE_MAP for ``llmduel price``).
    The batch clients (clients/batch.py, cycle/batch_collector.py) read the keys their configs name.
    cli/service.py writes the BLAS thread count of ``llmduel serve`` before numpy loads, reading nothing."""
    allowed = {
        "service/config.py",
        "service/cli/service.py",
        "service/client.py",
        "service/clients/batch.py",
        "service/cycle/batch_collector.py",
        "service/clients/http.py",
        "service/fake_provider.py",
        "service/redaction.py",
        "service/campaigns/credentials.py",
        "service/cli/remote.py",
        "service/cli/prices.py",
    }
    readers = set()
    for path in (REPO / "service").rglob("*.py"):
        text = path.read_text()
        if re.search(r"os\.environ|os\.getenv|getenv\(", text):
            readers.add(path.relative_to(REPO).as_posix())
    assert readers <= allowed, readers - allowed
    for path in (REPO / "service").rglob("*.py"):
        rel = path.relative_to(REPO).as_posix()
        if rel in ("service/config.py", "service/cli/remote.py", "service/client.py"):
            continue
        assert not re.search(r"environ\[?.{0,3}[\"']LLMDUEL_", path.read_text()), rel


def _cli_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMDUEL_") and k != "DATABASE_URL"}
    env.update(extra)
    return env


@pytest.mark.parametrize(("name", "value", "message"), BAD_VALUES[:4])
def test_serve_with_a_bad_setting_prints_one_line_and_exits_2(tmp_path, name, value, message):
    env = _cli_env(DATABASE_URL=f"sqlite:///{tmp_path / 's.db'}", **{name: value})
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(free_port())],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_generated_key_reaches_every_worker_without_the_environment(tmp_path: Path):
    """``llmduel serve --workers 2`` without LLMDUEL_API_KEY: the key printed once works on
    both workers (they get the settings as an argument)."""
    port = free_port()
    log = tmp_path / "serve.log"
    env = _cli_env(DATABASE_URL=f"sqlite:///{tmp_path / 'w.db'}", LLMDUEL_RESUME_RUNS="0")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "2"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        key = None
        while time.monotonic() < deadline:
            m = re.search(r"generated an admin key.*?\n\s+(\S+)", log.read_text())
            if m:
                key = m.group(1)
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            assert proc.poll() is None, log.read_text()
            time.sleep(0.3)
        assert key, log.read_text()
        for _ in range(40):  # fresh connections: the kernel spreads them over both workers
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as c:
                r = c.get("/v1/campaigns")
                assert r.status_code == 200, r.text
            with httpx.Client(base_url=url, headers={"Authorization": "Bearer wrong"}) as c:
                assert c.get("/v1/campaigns").status_code == 401
        assert log.read_text().count("generated an admin key") == 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)
