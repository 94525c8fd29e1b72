"""The API keys a campaign needs, checked on the server before any spend.

A campaign's model and judge clients name their keys by environment variable
(``api_key_env``); the key is read in the *server's* process at call time. A key
exported only in the shell of the command line is invisible to the server, and
every duel of the run would fail. ``create``, ``POST /run`` and ``POST /resume``
therefore refuse (422) while a named variable is unset or empty on the server,
naming the missing variables, never a value.
"""

from __future__ import annotations

import os
from typing import Any

from ..config import Settings
from ..redaction import configured_keys
from .types import Unprocessable


def key_env_names(*configs: Any) -> list[str]:
    """Every ``api_key_env`` named anywhere in ``configs`` (dicts and lists), sorted, each once."""
    names: set[str] = set()
    stack = list(configs)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            env = value.get("api_key_env")
            if isinstance(env, str) and env:
                names.add(env)
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return sorted(names)


def missing_key_envs(*configs: Any) -> list[str]:
    """The named variables this process does not have (unset or empty)."""
    return [name for name in key_env_names(*configs) if not os.environ.get(name)]


def require_key_envs(models: Any, judge: Any) -> None:
    """Unprocessable (422) naming every key variable of the models and judge the server lacks."""
    missing = missing_key_envs(models, judge)
    if missing:
        plural = "s" if len(missing) > 1 else ""
        raise Unprocessable(
            f"the server has no value for the API key environment variable{plural} {', '.join(missing)} "
            "(api_key_env of this campaign's models or judge); set them in the environment of the server "
            "process (not of the command line) and restart it"
        )


def secret_keys(settings: Settings, models: list, judge: dict) -> tuple[str, ...]:
    """The keys a campaign's stored text must not contain (service.redaction): its clients' and
    judge's keys, and the service's API key."""
    return configured_keys(models, judge, extra=(settings.api_key,))
