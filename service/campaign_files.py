"""Campaign files and prompt files, read from disk into a campaign-create body (no HTTP here).

A campaign file is YAML (``.yaml``/``.yml``) or JSON (``.json``) with the fields of
the REST body ``POST /v1/campaigns`` (:class:`service.schemas.CampaignCreate`),
except that ``prompts`` may also be ``{"file": "questions.jsonl"}``, a path
relative to the campaign file (``"format"`` overrides the guess from the extension).

Prompt file formats (UTF-8; every error names the file and the line):

* **JSONL** (``.jsonl``, ``.ndjson``): one JSON object per line. arena-hard-auto's
  ``question.jsonl`` (``question_id``, ``category``, ``turns: [{"content": ...}]``;
  v2's ``uid``/``prompt`` too) or ``{"id", "prompt", "category", "reference"}``.
  Blank lines are skipped, other keys ignored.
* **JSON** (``.json``): a list of the same objects or of strings.
* **CSV** (``.csv``): a header row with a ``prompt`` column and optional ``id``
  (or ``question_id``), ``category`` and ``reference`` columns.
* **text** (any other extension): **choice**: prompts separated by one or more
  blank lines, so that a prompt may span several lines; a file with one prompt per
  line needs a blank line between prompts. Ids are left empty (the export then
  names a prompt by its position, ``p1``, ``p2``, ...).

Ids must be unique within a file (the exported battle log keys on them).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

FORMATS = ("jsonl", "json", "csv", "text")
ID_KEYS = ("question_id", "id", "uid")


class CampaignFileError(ValueError):
    """A campaign or prompt file that cannot be used; the message is one line naming the file (and line)."""


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CampaignFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CampaignFileError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise CampaignFileError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CampaignFileError(f"{path}:{line}: not valid UTF-8") from None


def guess_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix == ".csv":
        return "csv"
    return "text"


def _text_field(value: Any, name: str, where: str, *, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise CampaignFileError(f"{where}: {name!r} is empty")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise CampaignFileError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
    return str(value)


def prompt_item(obj: Any, where: str) -> str | dict[str, Any]:
    """One prompt from a JSON value (arena-hard question or ``{"id", "prompt"}``) as an API prompt item."""
    if isinstance(obj, str):
        if not obj.strip():
            raise CampaignFileError(f"{where}: empty prompt")
        return obj
    if not isinstance(obj, dict):
        raise CampaignFileError(f"{where}: expected a JSON object with 'prompt' or 'turns', got {type(obj).__name__}")
    item: dict[str, Any] = {}
    for key in ID_KEYS:
        if obj.get(key) not in (None, ""):
            item["id"] = _text_field(obj[key], key, where)
            break
    if obj.get("turns") is not None:
        turns = obj["turns"]
        if not isinstance(turns, list) or not turns:
            raise CampaignFileError(f"{where}: 'turns' must be a non-empty list")
        texts = []
        for n, t in enumerate(turns):
            text = t.get("content") if isinstance(t, dict) else t
            if not isinstance(text, str) or not text.strip():
                raise CampaignFileError(f'{where}: turns[{n}] must be a non-empty string or {{"content": string}}')
            texts.append(text)
        item["turns"] = texts
    elif obj.get("prompt") is not None:
        item["prompt"] = _text_field(obj["prompt"], "prompt", where, required=True)
        if not item["prompt"].strip():
            raise CampaignFileError(f"{where}: 'prompt' is empty")
    else:
        raise CampaignFileError(f"{where}: no 'prompt' or 'turns' in this object")
    for key in ("category", "reference"):
        value = _text_field(obj.get(key), key, where)
        if value is not None:
            item[key] = value
    return item


def _jsonl(path: Path, text: str) -> list[tuple[int, Any]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CampaignFileError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        out.append((n, prompt_item(obj, _where(path, n))))
    return out


def _json(path: Path, text: str) -> list[tuple[int, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CampaignFileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, list):
        raise CampaignFileError(f"{path}: expected a JSON list of prompts")
    return [(n, prompt_item(obj, f"{path}: item {n}")) for n, obj in enumerate(data, 1)]


def _csv(path: Path, text: str) -> list[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = [f.strip() for f in (reader.fieldnames or [])]
    reader.fieldnames = fields
    if "prompt" not in fields:
        raise CampaignFileError(
            f"{path}:1: the header has no 'prompt' column (columns: id, prompt, category, reference)"
        )
    out = []
    try:
        for row in reader:
            n = reader.line_num
            if None in row:
                raise CampaignFileError(f"{path}:{n}: more fields than the header has")
            if all(not (v or "").strip() for v in row.values()):
                continue
            obj = {k: v for k, v in row.items() if v not in (None, "")}
            if "prompt" not in obj:
                raise CampaignFileError(f"{path}:{n}: empty 'prompt'")
            out.append((n, prompt_item(obj, _where(path, n))))
    except csv.Error as exc:
        raise CampaignFileError(f"{path}:{reader.line_num}: {exc}") from None
    return out


def _plain(path: Path, text: str) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    block: list[str] = []
    start = 0
    for n, line in enumerate(text.splitlines() + [""], 1):
        if line.strip():
            if not block:
                start = n
            block.append(line.rstrip())
        elif block:
            out.append((start, "\n".join(block)))
            block = []
    return out


def read_prompt_file(path: str | Path, fmt: str | None = None) -> list[str | dict[str, Any]]:
    """The prompts of a prompt file as API prompt items (strings or objects)."""
    path = Path(path)
    fmt = fmt or guess_format(path)
    if fmt not in FORMATS:
        raise CampaignFileError(f"{path}: unknown prompt file format {fmt!r} (one of {', '.join(FORMATS)})")
    text = _read_text(path)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise CampaignFileError(f"{path}:{line}: contains a NUL character")
    items = {"jsonl": _jsonl, "json": _json, "csv": _csv, "text": _plain}[fmt](path, text)
    if not items:
        raise CampaignFileError(f"{path}: no prompts in this file")
    seen: dict[str, int] = {}
    for n, item in items:
        qid = item.get("id") if isinstance(item, dict) else None
        if qid is None:
            continue
        if qid in seen:
            where = f"{path}:{n}" if fmt != "json" else f"{path}: item {n}"
            raise CampaignFileError(f"{where}: id {qid!r} already used (line {seen[qid]})")
        seen[qid] = n
    return [item for _, item in items]


#: YAML 1.2's floats: PyYAML (YAML 1.1) reads ``1e-6`` (no dot) as a string, which is how
#: prices are usually written (``input_cost_per_token: 1e-6``).
_YAML12_FLOAT = r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
|\.[0-9_]+(?:[eE][-+]?[0-9]+)?
|[-+]?\.(?:inf|Inf|INF)
|\.(?:nan|NaN|NAN))$"""


def _yaml_loader():
    """PyYAML's safe loader with YAML 1.2 floats (``1e-6`` is a number, as in JSON)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:float"]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_YAML12_FLOAT, re.X), list("-+0123456789."))
    return Loader


def read_campaign_file(path: str | Path) -> dict[str, Any]:
    """A campaign file as the body of ``POST /v1/campaigns`` (prompt files read and inlined)."""
    import yaml

    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CampaignFileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    else:
        try:
            data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise CampaignFileError(f"{path}{line}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise CampaignFileError(f"{path}: expected a mapping of campaign fields (name, models, prompts, judge, ...)")
    body = dict(data)
    prompts = body.get("prompts")
    if isinstance(prompts, dict):
        extra = set(prompts) - {"file", "format"}
        if "file" not in prompts or extra:
            raise CampaignFileError(f"{path}: 'prompts' must be a list or {{file: PATH, format: jsonl|json|csv|text}}")
        if not isinstance(prompts["file"], str) or not prompts["file"]:
            raise CampaignFileError(f"{path}: 'prompts.file' must be a path")
        fmt = prompts.get("format")
        if fmt is not None and fmt not in FORMATS:
            raise CampaignFileError(f"{path}: prompts.format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        body["prompts"] = read_prompt_file(path.parent / prompts["file"], fmt)
    elif prompts is None:
        raise CampaignFileError(f"{path}: no 'prompts' (a list, or {{file: questions.jsonl}})")
    elif isinstance(prompts, list):
        body["prompts"] = [prompt_item(p, f"{path}: prompts[{n}]") for n, p in enumerate(prompts)]
    else:
        raise CampaignFileError(f"{path}: 'prompts' must be a list or {{file: PATH}}")
    return body
