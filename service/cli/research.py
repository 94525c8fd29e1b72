"""CLI registration for ``llmduel reproduce synthetic|realworld`` and ``llmduel analyze``.

``add_parsers(subparsers)`` is called by :mod:`service.cli`. Handlers return an exit
code; bad input raises :class:`service.cli.args.CLIError` (one line on stderr,
exit code 2). Heavy modules are imported lazily inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys

from algorithms.vocabulary import Algorithm
from service.cli.args import CLIError, delta_value, open_unit_interval, whole_number

__all__ = ["add_parsers", "cmd_reproduce_synthetic", "cmd_reproduce_realworld", "cmd_analyze"]

# the paper's five, then llmduel's default (reported beside them, marked "not from the paper")
ALGOS = (Algorithm.DCTAS, Algorithm.TAS, Algorithm.CRR, Algorithm.DCTAC, Algorithm.DPCA, Algorithm.DCTAS_PC)


def _ks(text: str) -> list[int]:
    """``1-19``, ``4`` or ``1,4,10``."""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                out.extend(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ks must look like 1-19 or 1,4,10, got {text!r}") from None
    if not out or any(k < 1 for k in out):
        raise argparse.ArgumentTypeError(f"--ks must list integers >= 1, got {text!r}")
    return sorted(set(out))


def _algos(text: str) -> list[str]:
    xs = [x.strip().lower() for x in text.split(",") if x.strip()]
    bad = [x for x in xs if x not in ALGOS]
    if not xs or bad:
        raise argparse.ArgumentTypeError(f"--algorithms must be a comma list of {', '.join(ALGOS)}")
    return xs


def _common(p: argparse.ArgumentParser, trials: int, out: str) -> None:
    p.add_argument(
        "--trials",
        type=whole_number("--trials"),
        default=trials,
        help=f"independent trials per data point (default {trials})",
    )
    p.add_argument(
        "--jobs",
        type=whole_number("--jobs", allow_zero=True),
        default=1,
        help="worker processes (0 = all cores; default 1)",
    )
    p.add_argument("--out", default=out, help=f"output directory (default {out})")
    p.add_argument(
        "--seed", type=whole_number("--seed", allow_zero=True), default=0, help="base random seed (default 0)"
    )
    p.add_argument(
        "--algorithms",
        type=_algos,
        default=list(ALGOS),
        help="comma-separated subset of dctas,tas,crr,dctac,dpca (default all)",
    )


def _check_out(path: str) -> None:
    import os

    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"--out {path} exists and is not a directory")


def cmd_reproduce_synthetic(args: argparse.Namespace) -> int:
    from algorithms.research.reproduce import run_synthetic

    _check_out(args.out)
    try:
        run_synthetic(
            args.out,
            trials=args.trials,
            jobs=args.jobs,
            ks=args.ks,
            algorithms=args.algorithms,
            delta=args.delta,
            seed=args.seed,
        )
    except OSError as e:
        raise CLIError(f"cannot write results: {e.strerror or e}") from None
    print(f"results in {args.out}")
    return 0


def cmd_reproduce_realworld(args: argparse.Namespace) -> int:
    from algorithms.research.instances import builtin_instance_names
    from algorithms.research.reproduce import run_realworld

    _check_out(args.out)
    names = args.instances or None
    known = builtin_instance_names()
    if names:
        bad = [n for n in names if n not in known]
        if bad:
            raise CLIError(f"unknown instance(s) {', '.join(bad)}; choose from {', '.join(known)}")
    kw = {} if names is None else {"instances": names}
    try:
        run_realworld(
            args.out,
            trials=args.trials,
            jobs=args.jobs,
            algorithms=args.algorithms,
            delta=args.delta,
            seed=args.seed,
            cap_factor=args.cap_factor,
            chunk=args.chunk,
            **kw,
        )
    except OSError as e:
        raise CLIError(f"cannot write results: {e.strerror or e}") from None
    print(f"results in {args.out}")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from algorithms.research.analyze import AnalyzeError, analyze_source, format_report

    try:
        rep = analyze_source(
            args.source,
            tie_policy=args.tie_policy,
            min_comparisons=args.min_comparisons,
            include=args.include,
            exclude=args.exclude,
            anony_only=args.anony_only,
            fmt=args.format,
            ci_level=args.ci_level,
        )
    except AnalyzeError as e:
        raise CLIError(str(e)) from None
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(rep))
    return 0


_delta = delta_value
_level = open_unit_interval("--ci-level")


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 1, got {text!r}") from None
    if not v > 1:
        raise argparse.ArgumentTypeError(f"expected a number > 1, got {text}")
    return v


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``reproduce`` (with ``synthetic`` and ``realworld``) and ``analyze``."""
    rp = subparsers.add_parser(
        "reproduce",
        help="rerun the paper's experiments (Section 5)",
        description="Rerun the paper's experiments; outputs go to --out.",
    )
    rsub = rp.add_subparsers(dest="experiment", metavar="EXPERIMENT")

    def _need_experiment(args: argparse.Namespace) -> int:
        raise CLIError("reproduce needs an experiment: synthetic or realworld")

    rp.set_defaults(handler=_need_experiment)

    s = rsub.add_parser(
        "synthetic",
        help="Section 5.1: cost vs k, pull fractions at k = 4",
        description="k = 1..19, the paper's five algorithms and dctas-pc (not from the paper), delta = 0.01; writes results.csv/json, "
        "cost_vs_k.png/svg and pull_fractions.md.",
    )
    _common(s, 500, "out/synthetic")
    s.add_argument("--ks", type=_ks, default=list(range(1, 20)), help="values of k (default 1-19)")
    s.add_argument("--delta", type=_delta, default=0.01, help="confidence parameter (default 0.01)")
    s.set_defaults(handler=cmd_reproduce_synthetic)

    r = rsub.add_parser(
        "realworld",
        help="Section 5.2: Tables 2 and 3 on the real-world instances",
        description="delta = 1e-10, 100 trials, mean cost with 99.7% CIs; entries over "
        "--cap-factor x DCTAS are left out. Writes results.csv/json, table2.md, "
        "table3.md.",
    )
    _common(r, 100, "out/realworld")
    r.add_argument(
        "--instances",
        type=lambda t: [x.strip() for x in t.split(",") if x.strip()],
        default=None,
        help="comma-separated builtin instances (default: image,text,vision,search-no-gemini,search,genai-image)",
    )
    r.add_argument("--delta", type=_delta, default=1e-10, help="confidence parameter (default 1e-10)")
    r.add_argument(
        "--cap-factor",
        type=_positive_float,
        default=10.0,
        help="leave out entries costing more than this times DCTAS (default 10)",
    )
    r.add_argument(
        "--chunk",
        type=whole_number("--chunk"),
        default=10,
        help="trials per chunk for the early left-out decision (default 10)",
    )
    r.set_defaults(handler=cmd_reproduce_realworld)

    a = subparsers.add_parser(
        "analyze",
        help="preference matrix, Bradley-Terry ratings and assumptions of an instance or a battle log",
        description="SOURCE: instance JSON, builtin instance name, or a FastChat/LMArena "
        "battle log (CSV, JSON array or JSONL with model_a, model_b, winner).",
    )
    a.add_argument("source", metavar="SOURCE")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.add_argument(
        "--tie-policy",
        choices=("drop", "half"),
        default="drop",
        help="ties and both-bad votes: drop them or count half a win each (default drop)",
    )
    a.add_argument(
        "--min-comparisons",
        type=whole_number("--min-comparisons"),
        default=1,
        help="a pair counts as compared with at least this many comparisons (default 1)",
    )
    a.add_argument("--include", default=None, metavar="REGEX", help="keep only models matching REGEX")
    a.add_argument("--exclude", default=None, metavar="REGEX", help="drop models matching REGEX")
    a.add_argument("--anony-only", action="store_true", help="use only anonymous battles (anony = true)")
    a.add_argument(
        "--format",
        choices=("csv", "json", "jsonl"),
        default=None,
        help="log format (default: guessed from the content)",
    )
    a.add_argument("--ci-level", type=_level, default=0.95, help="Bradley-Terry CI level (default 0.95)")
    a.set_defaults(handler=cmd_analyze)
