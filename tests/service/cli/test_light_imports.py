"""The command line starts light: a remote command (``campaign create``, ``list``, ``watch``, the
annotator's commands) and a campaign file's checks import neither numba nor the policy kernels,
whose import costs about a second of CPU; the simulator and the server import them when they
run a policy. A fresh interpreter per check, so nothing imported by another test counts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

HEAVY = ("numba", "algorithms._kernels", "algorithms.policies", "scipy.special")


@pytest.mark.parametrize(
    "modules",
    [
        ("service.cli.remote", "service.cli.campaign_admin", "service.schemas"),
        ("algorithms", "algorithms.vocabulary", "algorithms.instance", "judges.llm"),
    ],
)
def test_light_modules_do_not_load_the_kernels(modules):
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"print(','.join(h for h in {HEAVY!r} if h in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{modules} imported {out.stdout.strip()}"


def test_the_public_names_still_load_on_use():
    code = (
        "import sys, algorithms\n"
        "assert 'algorithms.policies' not in sys.modules\n"
        "from algorithms import make_policy, Instance, beta, ALGORITHMS\n"
        "assert ALGORITHMS[0] == 'dctas-pc' and callable(make_policy) and beta(10, 0.1, 3) > 0\n"
        "try:\n    algorithms.nothing_here\nexcept AttributeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "has no attribute 'nothing_here'" in out.stdout


def test_each_command_registers_alone_and_all_of_them_make_the_whole_parser():
    """``llmduel COMMAND`` builds only COMMAND's parser (service.cli.COMMANDS): each maps to the
    registrar that adds it, and they are every command of the whole parser but ``serve``."""
    from service.cli import COMMANDS, build_parser

    def commands(parser) -> set[str]:
        return set(parser._subparsers._group_actions[0].choices)

    whole = commands(build_parser())
    assert set(COMMANDS) == whole - {"serve"}
    for command in COMMANDS:
        assert command in commands(build_parser(command)), command
    for other in ("--help", "no-such-command", "serve"):
        assert commands(build_parser(other)) == whole, other
