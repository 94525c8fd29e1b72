"""Commands that only read (``llmduel replay``, ``llmduel db current``) never create a database:
a missing SQLite file is one line naming where they looked, exit 2, and no file appears."""

from __future__ import annotations

import pytest

from service.cli import main

READ_ONLY = [["replay", "1"], ["replay", "1", "--json"], ["db", "current"]]


@pytest.fixture
def no_database_url(monkeypatch, tmp_path):
    for name in ("DATABASE_URL", "LLMDUEL_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_default_database_is_not_created(no_database_url, capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("llmduel: error: database sqlite:///./llmduel.db"), err
    assert str(no_database_url / "llmduel.db") in err and "no such file" in err
    assert list(no_database_url.iterdir()) == []  # no llmduel.db, no journal


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_a_named_missing_file_is_not_created(monkeypatch, tmp_path, capsys, argv):
    target = tmp_path / "sub" / "other.db"
    (tmp_path / "sub").mkdir()
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{target}")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(target) in err
    assert not target.exists()


def test_an_existing_database_is_still_read(db_url, monkeypatch, capsys):
    """On both databases the read-only commands still work when the database exists."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    assert main(["db", "current"]) == 0
    assert "(head)" in capsys.readouterr().out
    assert main(["replay", "999999"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replay:" in err and "no such file" not in err
