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

# Commands that talk to a server and need no mathematics: ``llmduel campaign ...`` registers only
# its own parser, so it starts without importing numba and scipy (a second or more of CPU) and a
# bad campaign file is refused at once.
LIGHT_COMMANDS: dict[str, tuple[str, str]] = {
    "campaign": ("service.cli.campaigns", "add_parsers"),
    "annotator": ("service.cli.annotators", "add_annotator_parser"),
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``llmduel: error: ...``) and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``llmduel`` parser; with ``command`` one of :data:`LIGHT_COMMANDS`, only that command's."""
    parser = _Parser(prog="llmduel", description="Find the best LLM at the least cost by pairwise duels (DCTAS).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    registrars = [LIGHT_COMMANDS[command]] if command in LIGHT_COMMANDS else REGISTRARS
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
