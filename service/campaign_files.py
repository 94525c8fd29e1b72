"""Campaign files and prompt files, read from disk into a campaign-create body (no HTTP here).

A campaign file is YAML (``.yaml``/``.yml``) or JSON (``.json``) with the fields of
the REST body ``POST /v1/campaigns`` (:class:`service.schemas.CampaignCreate`),
except that ``prompts`` may also be ``{"file": "questions.jsonl"}``, a path
relative to the campaign file's folder (``"format"`` overrides the guess from the
extension). A prompt file must lie inside that folder (symbolic links resolved):
an absolute path or one that leaves the folder is refused unless the caller allows
it (``llmduel campaign create --allow-outside-prompts``), so that a campaign file
from someone else cannot upload local files as prompts.

Limits, each refused with one line naming the file: a file of at most
:data:`MAX_FILE_BYTES`; YAML nested at most :data:`MAX_DEPTH` deep, with at most
:data:`MAX_ALIASES` aliases and at most :data:`MAX_NODES` values once aliases are
expanded (a "billion laughs" alias bomb); numbers finite (``.nan``, ``.inf``,
``1e400`` are refused: no JSON body can carry them).

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

Images (vision prompts): a prompt object's ``images`` and a turn object's ``images``
are lists of ``data:`` URLs or of image file paths relative to the file that names
them (the campaign file for inline prompts, the prompt file otherwise), which must lie
inside that file's folder (symbolic links resolved); remote ``http(s)`` URLs are refused.
Each image is checked (service/images/checks.py) and sent inline as a ``data:`` URL.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

FORMATS = ("jsonl", "json", "csv", "text")
ID_KEYS = ("question_id", "id", "uid")
#: The largest campaign or prompt file read (bytes): the server takes request bodies of at most
#: 32 MiB (``service.app.MAX_BODY_BYTES``), so a larger file could never be sent.
MAX_FILE_BYTES = 32 * 1024 * 1024
#: YAML nesting depth (mappings and sequences inside each other).
MAX_DEPTH = 64
#: YAML aliases (``*name``) in one campaign file.
MAX_ALIASES = 1000
#: Values (scalars, sequences, mappings) of a YAML campaign file with its aliases expanded.
MAX_NODES = 2_000_000


class CampaignFileError(ValueError):
    """A campaign or prompt file that cannot be used; the message is one line naming the file (and line)."""


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def read_text(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CampaignFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CampaignFileError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise CampaignFileError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise CampaignFileError(
            f"{path}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB (the server's request limit)"
        )
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
        texts: list[Any] = []
        for n, t in enumerate(turns):
            text = t.get("content") if isinstance(t, dict) else t
            if not isinstance(text, str) or not text.strip():
                raise CampaignFileError(f'{where}: turns[{n}] must be a non-empty string or {{"content": string}}')
            refs = _image_refs(t.get("images"), f"{where}: turns[{n}]") if isinstance(t, dict) else None
            texts.append({"content": text, "images": refs} if refs else text)
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
    refs = _image_refs(obj.get("images"), where)
    if refs:
        item["images"] = refs
    return item


def _image_refs(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CampaignFileError(f"{where}: 'images' must be a list of file paths or data: URLs")
    return list(value)


def _image_url(ref: str, base: Path, where: str) -> str:
    """An image reference of a file in folder ``base`` as a checked ``data:`` URL: a ``data:`` URL as it
    is, or a path relative to ``base`` that stays inside it (symbolic links resolved); remote URLs refused."""
    from service.images.checks import ImageError, check_data_url, check_image, to_data_url

    try:
        if ref.startswith("data:"):
            check_data_url(ref)
            return ref
        if ref.lower().startswith(("http://", "https://")):
            raise ImageError("remote image URLs are not fetched; use a file next to this one or a data: URL")
        target = base / ref
        try:
            inside = not Path(ref).is_absolute() and target.resolve().is_relative_to(base.resolve())
        except (OSError, RuntimeError):  # a symbolic link loop
            inside = False
        if not inside:
            raise ImageError("an image file must be a relative path inside this file's folder")
        try:
            with open(target, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ImageError(f"cannot read it ({exc.strerror or exc})") from None
        image = check_image(data)
        return to_data_url(image.data, image.media_type)
    except ImageError as exc:
        raise CampaignFileError(f"{where}: image {ref[:80]!r}: {exc}") from None


def _with_images(item: str | dict[str, Any], base: Path, where: str) -> str | dict[str, Any]:
    """A prompt item whose image references (its own and its turns') are ``data:`` URLs."""
    if isinstance(item, str):
        return item
    out = dict(item)
    if out.get("images"):
        out["images"] = [_image_url(r, base, where) for r in out["images"]]
    if out.get("turns"):
        out["turns"] = [
            {**t, "images": [_image_url(r, base, where) for r in t["images"]]} if isinstance(t, dict) else t
            for t in out["turns"]
        ]
    return out


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
    text = read_text(path)
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise CampaignFileError(f"{path}:{line}: contains a NUL character")
    items = {"jsonl": _jsonl, "json": _json, "csv": _csv, "text": _plain}[fmt](path, text)
    if not items:
        raise CampaignFileError(f"{path}: no prompts in this file")
    items = [
        (n, _with_images(item, path.parent, f"{path}:{n}" if fmt != "json" else f"{path}: item {n}"))
        for n, item in items
    ]
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


# Implicit types left out: floats (replaced by YAML 1.2's below) and timestamps (a date stays text).
_NOT_RESOLVED = ("tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")


def _finite(x: float, where: str) -> float:
    if not math.isfinite(x):
        raise CampaignFileError(f"{where}: numbers must be finite (no .nan, .inf or values beyond 1.8e308)")
    return x


def _yaml_loader(path: Path):
    """PyYAML's safe loader with YAML 1.2 floats (``1e-6`` is a number, as in JSON), finite
    numbers only, and the limits of :data:`MAX_DEPTH`, :data:`MAX_ALIASES` and :data:`MAX_NODES`."""
    import yaml
    from yaml.events import AliasEvent

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(AliasEvent):
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise CampaignFileError(f"{self._at()}: more than {MAX_ALIASES} YAML aliases")
                return super().compose_node(parent, index)
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise CampaignFileError(f"{self._at()}: nested more than {MAX_DEPTH} levels deep")
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def compose_document(self) -> Any:
            node = super().compose_document()
            _count_nodes(node, path)
            return node

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            """A key written twice in one mapping is an error (PyYAML keeps the last value silently);
            a key that overrides one merged in by ``<<`` is not a duplicate."""
            seen: set[tuple[str, str]] = set()
            for key_node, _ in getattr(node, "value", ()):
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node.value, str):
                    continue
                if (key_node.tag, key_node.value) in seen:
                    line = key_node.start_mark.line + 1
                    raise CampaignFileError(f"{path}:{line}: the key {key_node.value!r:.60} is given twice")
                seen.add((key_node.tag, key_node.value))
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_float(self, node: Any) -> float:
            return _finite(super().construct_yaml_float(node), f"{path}:{node.start_mark.line + 1}")

        def _at(self) -> str:
            return f"{path}:{self.peek_event().start_mark.line + 1}"

    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag not in _NOT_RESOLVED]
        for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_YAML12_FLOAT, re.X), list("-+0123456789."))
    Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)
    return Loader


def _count_nodes(root: Any, path: Path) -> None:
    """Refuse a YAML node graph that expands (aliases followed) to more than :data:`MAX_NODES` values,
    or that refers to itself; each distinct node is visited once, so the check is as cheap as the file."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_nodes.discard(key)
            children = _children(node)
            total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_NODES:
                raise CampaignFileError(
                    f"{path}:{node.start_mark.line + 1}: more than {MAX_NODES} values once YAML aliases "
                    "are expanded (an alias bomb?)"
                )
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise CampaignFileError(f"{path}:{node.start_mark.line + 1}: a YAML alias refers to its own anchor")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        return [x for item in value for x in (item if isinstance(item, tuple) else (item,))]
    return []


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _load_json(path: Path, text: str) -> Any:
    try:
        data = json.loads(text, parse_constant=_json_constant)
    except json.JSONDecodeError as exc:
        raise CampaignFileError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:  # NaN, Infinity
        raise CampaignFileError(f"{path}: numbers must be finite ({exc})") from None
    except RecursionError:
        raise CampaignFileError(f"{path}: nested too deeply") from None
    _check_plain(data, path)
    return data


def _check_plain(data: Any, path: Path) -> None:
    """Every value of a parsed file is plain JSON: finite numbers (``1e400`` parses to infinity),
    no YAML-only types (``!!binary``, ``!!set``, ``!!timestamp``)."""
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, float):
            _finite(v, str(path))
        elif isinstance(v, dict):
            stack.extend(v.values())
            stack.extend(v.keys())
        elif isinstance(v, list):
            stack.extend(v)
        elif v is not None and not isinstance(v, (str, int)):
            raise CampaignFileError(f"{path}: a {type(v).__name__} value; use strings, numbers, lists and mappings")


def _inside(base: Path, name: str, path: Path, allow_outside: bool) -> Path:
    """The prompt file ``name`` of the campaign file ``path``, relative to its folder ``base``; refused
    when absolute or outside that folder (symbolic links resolved) unless ``allow_outside``."""
    target = base / name
    if allow_outside:
        return target
    hint = "pass --allow-outside-prompts to read it anyway"
    if Path(name).is_absolute():
        raise CampaignFileError(f"{path}: prompts.file {name!r} is an absolute path; {hint}")
    try:
        inside = target.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError):  # a symbolic link loop
        inside = False
    if not inside:
        raise CampaignFileError(f"{path}: prompts.file {name!r} is outside the campaign file's folder; {hint}")
    return target


def _load_file(path: Path) -> Any:
    """A YAML or JSON file's data (the same safe loaders and limits as a campaign file)."""
    import yaml

    text = read_text(path)
    if path.suffix.lower() == ".json":
        return _load_json(path, text)
    try:
        data = yaml.load(text, Loader=_yaml_loader(path))  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise CampaignFileError(f"{path}{line}: not valid YAML ({problem})") from None
    _check_plain(data, path)
    return data


def read_model_file(path: str | Path) -> dict[str, Any]:
    """One model (``name``, ``client``, ``cost``... as an entry of a campaign file's ``models``), from a YAML or
    JSON file holding that mapping, or a mapping ``{model: {...}}``."""
    path = Path(path)
    data = _load_file(path)
    if isinstance(data, dict) and set(data) == {"model"}:
        data = data["model"]
    if not isinstance(data, dict):
        raise CampaignFileError(f"{path}: expected one model as a mapping (name, client, cost, ...)")
    return dict(data)


def read_campaign_file(path: str | Path, *, allow_outside_prompts: bool = False) -> dict[str, Any]:
    """A campaign file as the body of ``POST /v1/campaigns`` (prompt files read and inlined).

    ``allow_outside_prompts``: read a prompt file given by an absolute path or outside the
    campaign file's folder (refused by default).
    """
    path = Path(path)
    data = _load_file(path)
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
        prompt_path = _inside(path.parent, prompts["file"], path, allow_outside_prompts)
        body["prompts"] = read_prompt_file(prompt_path, fmt)
    elif prompts is None:
        raise CampaignFileError(f"{path}: no 'prompts' (a list, or {{file: questions.jsonl}})")
    elif isinstance(prompts, list):
        body["prompts"] = [
            _with_images(prompt_item(p, f"{path}: prompts[{n}]"), path.parent, f"{path}: prompts[{n}]")
            for n, p in enumerate(prompts)
        ]
    else:
        raise CampaignFileError(f"{path}: 'prompts' must be a list or {{file: PATH}}")
    return body
