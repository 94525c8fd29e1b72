"""Fuzzing the REST API from its own OpenAPI schema (schemathesis), on SQLite and
PostgreSQL, against the ASGI app: valid and invalid inputs (wrong types, missing
and extra fields, odd strings, NUL characters, huge numbers) for every operation,
as the admin and as an annotator. No input may cause a 5xx, and every error is
JSON with a ``detail``.

The example count per operation is bounded (``FUZZ_EXAMPLES``, default 15) so the
whole file stays well under a minute; raise it for a deeper run:
``LLMDUEL_FUZZ_EXAMPLES=200 .venv/bin/python -m pytest tests/service/api/test_fuzz.py``.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from conftest import ADMIN_KEY, make_settings, migrated
from hypothesis import HealthCheck, settings
from service_helpers import campaign_body

pytestmark = pytest.mark.postgres  # each request goes to both backends
FUZZ_EXAMPLES = int(os.environ.get("LLMDUEL_FUZZ_EXAMPLES", "15"))
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture(scope="module")
def fuzz_apps(sqlite_url, pg_url):
    """The app on each backend, built once for the file: SQLite and PostgreSQL."""
    from service.app import create_app

    # A forecast simulates at most this many duels in all (the server's bound on a request's CPU): the
    # generated `trials` up to 1000 on nearly equal models would otherwise take minutes per example.
    apps = [create_app(make_settings(migrated(url), forecast_max_duels=20_000)) for url in (sqlite_url, pg_url)]
    yield apps
    for app in apps:
        app.state.db.dispose()


@pytest.fixture
def fuzz_targets(fuzz_apps):
    """Each backend's app with something to find, made afresh for each operation: campaigns (human
    and automatic), duels, a vote, an annotator token (what earlier operations did to theirs stays)."""
    from fastapi.testclient import TestClient

    for app in fuzz_apps:
        client = TestClient(app, headers=ADMIN)
        human = client.post("/v1/campaigns", json=campaign_body(name="fuzz human", budget=50.0)).json()["id"]
        client.post(
            "/v1/campaigns",
            json=campaign_body(
                name="fuzz automatic",
                judge={"kind": "simulated", "preference": [[0.5, 0.6, 0.7], [0.4, 0.5, 0.6], [0.3, 0.4, 0.5]]},
                max_duels=3,
            ),
        )
        for _ in range(3):
            d = client.post(f"/v1/campaigns/{human}/duels").json()
        client.post(f"/v1/duels/{d['id']}/vote", json={"choice": "a"})
        app.state.fuzz_token = client.post(f"/v1/campaigns/{human}/annotators", json={}).json()["token"]
        app.state.fuzz_ids = {"campaign_id": human, "duel_id": d["id"]}
    return fuzz_apps


def _schema():
    """The app's own OpenAPI document (from an app that never touches its database);
    the requests go to the ``fuzz_app`` of each backend (``case.call(app=...)``)."""
    from service.app import create_app

    app = create_app(make_settings("sqlite://"))
    document = app.openapi()
    app.state.db.dispose()
    return schemathesis.openapi.from_dict(document)


schema = _schema()


def check(case, response) -> None:
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}\n"
        f"{case.as_curl_command()}"
    )
    if response.status_code >= 400:
        content_type = (response.headers.get("content-type") or [""])[0]  # schemathesis: lists of values
        assert content_type.startswith("application/json"), response.headers
        assert "detail" in response.json()


@schema.parametrize()
@settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
def test_no_input_causes_a_server_error(case, fuzz_targets):
    """Every generated request, on both backends, as the admin and as an annotator; requests with
    ids in the path are also sent to existing resources (random ids mostly find nothing). Each
    request is generated once and sent to both backends (generation is most of the cost)."""
    generated = dict(case.path_parameters or {})
    for app in fuzz_targets:
        variants = [generated]
        if generated:
            variants.append({k: app.state.fuzz_ids.get(k, v) for k, v in generated.items()})
        for token in (ADMIN_KEY, app.state.fuzz_token):
            for params in variants:
                case.path_parameters = dict(params)
                headers = dict(case.headers or {})
                headers.setdefault("Authorization", f"Bearer {token}")
                check(case, case.call(app=app, headers=headers, timeout=120))  # a loaded machine: no read timeout
