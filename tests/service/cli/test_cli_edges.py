"""CLI edge cases: every error is one line on stderr with exit status 2, never a traceback
(instance files that are not UTF-8 or are nested 100,000 deep; ``llmduel replay`` with an
unreachable database, an unmigrated one, or an id beyond what a database holds)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO


def llmduel(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("LLMDUEL_") and k != "DATABASE_URL"}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args], cwd=REPO, env=full, capture_output=True, text=True, timeout=120
    )


def one_line_error(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("instances")
    deep = d / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    deep_obj = d / "deep_obj.json"
    deep_obj.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    latin1 = d / "latin1.json"
    latin1.write_bytes(b'{"names": ["caf\xe9", "b"], "preference": [[0.5, 0.6], [0.4, 0.5]]}')
    return {"deep": deep, "deep_obj": deep_obj, "latin1": latin1, "dir": d}


@pytest.mark.parametrize("command", [["oracle"], ["simulate", "--delta", "0.1"]])
def test_instance_files_that_cannot_be_read(bad_files, command):
    one_line_error(llmduel(*command, str(bad_files["deep"])), "nested too deeply")
    one_line_error(llmduel(*command, str(bad_files["deep_obj"])), "nested too deeply")
    one_line_error(llmduel(*command, str(bad_files["latin1"])), "not UTF-8")
    one_line_error(llmduel(*command, str(bad_files["dir"])), "cannot read instance file")


def test_replay_with_an_unreachable_or_empty_database_or_a_huge_id(tmp_path):
    pg = "postgresql://postgres:secret-pw@127.0.0.1:1/nowhere"
    p = llmduel("replay", "1", DATABASE_URL=pg)
    one_line_error(p, "database postgresql+psycopg://postgres:***@127.0.0.1:1/nowhere")
    assert "secret-pw" not in p.stderr
    # a missing file is named, not created (tests/service/cli/test_cli_read_only.py)
    one_line_error(llmduel("replay", "1", DATABASE_URL=f"sqlite:///{tmp_path}/no/such/dir.db"), "no such file")
    (tmp_path / "empty.db").touch()  # an existing database without the schema
    one_line_error(llmduel("replay", "1", DATABASE_URL=f"sqlite:///{tmp_path}/empty.db"), "no such table")
    for huge in (str(2**63), "9" * 40, "0", "-3"):
        one_line_error(llmduel("replay", huge), "CAMPAIGN_ID must be")
    one_line_error(llmduel("db", "current", DATABASE_URL=pg), "OperationalError")
    one_line_error(llmduel("replay", "1", LLMDUEL_RUN_MAX_FAILURES="zero"), "LLMDUEL_RUN_MAX_FAILURES")


def test_replay_of_a_missing_campaign_on_a_migrated_database(tmp_path):
    url = f"sqlite:///{tmp_path}/m.db"
    assert llmduel("db", "upgrade", DATABASE_URL=url).returncode == 0
    one_line_error(llmduel("replay", str(2**62), DATABASE_URL=url), "not found")
