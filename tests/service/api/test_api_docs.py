"""/docs works offline: Swagger UI from local assets, no CDN."""

import re

import pytest
from conftest import app_client


@pytest.fixture
async def client(sqlite_url):
    from service.db import upgrade_database

    upgrade_database(sqlite_url)
    async with app_client(sqlite_url, headers=None) as c:
        yield c


async def test_docs_page_uses_only_local_assets(client):
    r = await client.get("/docs")
    assert r.status_code == 200
    urls = re.findall(r'(?:src|href)="([^"]+)"', r.text) + re.findall(r"url: '([^']+)'", r.text)
    assert urls, r.text
    assert all(u.startswith("/") for u in urls), urls  # nothing from another host
    for u in urls:
        assert (await client.get(u)).status_code == 200, u
    js = await client.get("/docs-static/swagger-ui-bundle.js")
    assert "SwaggerUIBundle" in js.text[:5000] or len(js.content) > 100_000


async def test_openapi_is_3_1_and_lists_the_v1_routes(client):
    spec = (await client.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.1")
    assert "/v1/campaigns" in spec["paths"] and "/v1/duels/{duel_id}/vote" in spec["paths"]


async def test_openapi_types_client_and_judge_as_unions_on_kind(client):
    spec = (await client.get("/openapi.json")).json()
    schemas = spec["components"]["schemas"]
    judge = schemas["CampaignCreate"]["properties"]["judge"]
    assert judge["discriminator"]["propertyName"] == "kind"
    assert set(judge["discriminator"]["mapping"]) == {"human", "simulated", "llm", "jury", "hybrid"}
    model_client = schemas["ModelSpec"]["properties"]["client"]
    assert model_client["discriminator"]["propertyName"] == "kind"
    assert set(model_client["discriminator"]["mapping"]) == {"simulated", "openai", "anthropic", "gemini"}
    # an LLM judge's client is an HTTP client: no simulated member
    judge_client = schemas["LLMJudgeConfig"]["properties"]["client"]
    assert set(judge_client["discriminator"]["mapping"]) == {"openai", "anthropic", "gemini"}
    # every field of every config model is documented
    for name in (
        "SimulatedClientConfig",
        "OpenAIClientConfig",
        "AnthropicClientConfig",
        "GeminiClientConfig",
        "Price",
        "HumanJudgeConfig",
        "SimulatedJudgeConfig",
        "LLMJudgeConfig",
        "JuryJudgeConfig",
        "HybridJudgeConfig",
        "HybridHumanConfig",
        "VerdictPatterns",
    ):
        for field, prop in schemas[name]["properties"].items():
            assert prop.get("description"), f"{name}.{field} has no description"
    assert "fee_per_vote" in schemas["HumanJudgeConfig"]["properties"]
    assert schemas["OpenAIClientConfig"]["properties"]["max_attempts"]["maximum"] == 10
