"""Resolve an INSTANCE argument: a JSON file path or a built-in name.

Built-in names: ``synthetic`` / ``synthetic:k=K`` (the paper's 3-arm instance
with costs (K, 1, 1)) and the real-world instances shipped with
:mod:`algorithms.research` (``llmduel oracle --help`` lists them).
"""

from __future__ import annotations

from pathlib import Path

from algorithms.instance import Instance, InstanceError, parse_builtin
from algorithms.research.instances import builtin_instance_names, load_builtin_instance

__all__ = ["resolve_instance", "builtin_names"]


def builtin_names() -> list[str]:
    return ["synthetic:k=K", *builtin_instance_names()]


def resolve_instance(spec: str, *, require_condorcet: bool = True) -> Instance:
    """Return the :class:`Instance` named by ``spec`` or raise :class:`InstanceError` with a one-line reason."""
    if not isinstance(spec, str) or not spec.strip():
        raise InstanceError("INSTANCE must be a JSON file path or a built-in name")
    inst = parse_builtin(spec)
    if inst is not None:
        return inst
    path = Path(spec)
    if path.suffix.lower() == ".json" or path.exists():
        return Instance.from_json_file(path, require_condorcet=require_condorcet)
    if spec in builtin_instance_names():
        return Instance.from_dict(load_builtin_instance(spec), require_condorcet=require_condorcet)
    raise InstanceError(
        f"unknown instance {spec!r}: not a file, and not a built-in name ({', '.join(builtin_names())})"
    )
