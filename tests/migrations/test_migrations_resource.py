"""The Alembic scripts are found as resources of the ``migrations`` package, from any
working directory and without alembic.ini (test_wheel_install.py covers a real wheel)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_migrations_are_a_package_resource_found_from_anywhere(tmp_path):
    code = (
        "import migrations, pathlib; from service.db import migrations_dir, head_revision, upgrade_database, Database;"
        "d = migrations_dir(); assert pathlib.Path(d) == pathlib.Path(migrations.__file__).parent, d;"
        "upgrade_database('sqlite:///x.db'); db = Database('sqlite:///x.db');"
        "print(head_revision(), db.current_revision())"
    )
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    head, current = p.stdout.split()
    assert head == current and (tmp_path / "x.db").exists()
    assert not (tmp_path / "alembic.ini").exists() and not (tmp_path / "migrations").exists()
    assert any(Path(REPO, "migrations", "versions").glob(f"{head}_*.py"))
