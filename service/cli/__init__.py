"""The ``llmduel`` command line.

Each command is registered by a small ``add_*_parser(subparsers)`` function that
lives next to its implementation and imports heavy modules lazily. A handler
returns an exit code; user errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
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
    ("service.cli.annotators", "add_annotator_parser"),
    ("service.cli.campaigns", "add_parsers"),
    ("service.cli.prices", "add_parsers"),
]

# The registrar of each command: ``llmduel COMMAND ...`` registers only its own parser, so that it
# does not import every other command's module (~0.5 s of CPU at each start; a remote ``campaign`` or
# ``annotator`` command then starts without numba and scipy, and a bad campaign file is refused at
# once). ``llmduel`` alone, ``--help``, an unknown command and ``serve`` get the whole parser (``serve``
# sets one BLAS thread before the parser loads numpy: tests/service/cli/test_service_cli.py).
# tests/service/cli/test_light_imports.py checks this against REGISTRARS.
COMMANDS: dict[str, tuple[str, str]] = {
    "oracle": ("service.cli.algorithms", "add_oracle_parser"),
    "simulate": ("service.cli.algorithms", "add_simulate_parser"),
    "db": ("service.cli.service", "add_parsers"),
    "replay": ("service.cli.service", "add_parsers"),
    "fake-provider": ("service.fake_provider", "add_fake_provider_parser"),
    "analyze": ("service.cli.research", "add_parsers"),
    "reproduce": ("service.cli.research", "add_parsers"),
    "annotator": ("service.cli.annotators", "add_annotator_parser"),
    "campaign": ("service.cli.campaigns", "add_parsers"),
    "price": ("service.cli.prices", "add_parsers"),
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``llmduel: error: ...``) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``llmduel`` parser; with ``command`` one of :data:`COMMANDS`, only that command's."""
    parser = _Parser(prog="llmduel", description="Find the best LLM at the least cost by pairwise duels (DCTAS).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    registrars = [COMMANDS[command]] if command in COMMANDS else REGISTRARS
    for module, func in registrars:
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:  # before the parser's registrars load numpy (service.cli.service.one_blas_thread)
        from service.cli.service import one_blas_thread

        one_blas_thread()
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(handler(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handler below, not at exit
        return code
    except CLIError as exc:
        print(f"llmduel: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("llmduel: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``llmduel ... | head``): exit quietly. Point stdout at devnull
        # so that the interpreter's final flush does not raise again (Python docs, "Note on SIGPIPE").
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (RecursionError, MemoryError, UnicodeError, OSError) as exc:
        # Input the command could not take (a file nested too deeply, not text, unreadable):
        # still one line, never a traceback.
        print(f"llmduel: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 2


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or "no detail"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
