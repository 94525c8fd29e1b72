"""The ``llmduel`` command line.

Each command is registered by a small ``add_*_parser(subparsers)`` function that
lives next to its implementation and imports heavy modules lazily. A handler
returns an exit code; user errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

from service.cli.args import CLIError

# (module, function) pairs that register sub-commands; missing modules are skipped.
REGISTRARS: list[tuple[str, str]] = [
    ("service.cli.algorithms", "add_oracle_parser"),
    ("service.cli.algorithms", "add_simulate_parser"),
    ("service.cli.service", "add_parsers"),
    ("service.fake_provider", "add_fake_provider_parser"),
    ("service.cli.research", "add_parsers"),
    ("service.cli.campaigns", "add_parsers"),
]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``llmduel: error: ...``) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="llmduel", description="Find the best LLM at the least cost by pairwise duels (DCTAS).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module, func in REGISTRARS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == module or module.startswith(exc.name + ".")):
                continue
            raise
        register: Callable | None = getattr(mod, func, None)
        if register is not None:
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args) or 0)
    except CLIError as exc:
        print(f"llmduel: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("llmduel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
