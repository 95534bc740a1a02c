"""/openapi.json describes every endpoint, and every reference in it resolves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from generic_framework.service.schemas import ChatCompletionOut, TurnOut

Client = Callable[..., httpx.AsyncClient]


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in _refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _refs(value)]
    return []


async def test_document_covers_the_api(client_for: Client) -> None:
    async with client_for(bot_api_token="secret-token-1") as client:
        response = await client.get("/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.1")
    assert {
        ("/v1/models", "get"),
        ("/v1/models/{model}", "get"),
        ("/v1/bot", "get"),
        ("/v1/conversations", "get"),
        ("/v1/chat/completions", "post"),
        ("/v1/conversations/{conversation_id}/messages", "post"),
        ("/v1/conversations/{conversation_id}", "get"),
        ("/v1/conversations/{conversation_id}", "patch"),
        ("/v1/conversations/{conversation_id}", "delete"),
        ("/v1/conversations/{conversation_id}/turns/last", "delete"),
        ("/v1/conversations/{conversation_id}/pictures/{sha256}", "get"),
        ("/v1/memories", "get"),
        ("/v1/memories", "post"),
        ("/v1/memories/{memory_id}", "delete"),
        ("/v1/me", "get"),
        ("/v1/admin/users", "get"),
        ("/v1/admin/users", "post"),
        ("/v1/admin/users/{name}", "get"),
        ("/v1/admin/users/{name}", "patch"),
        ("/v1/admin/users/{name}", "delete"),
        ("/v1/admin/keys", "get"),
        ("/v1/admin/keys", "post"),
        ("/v1/admin/keys/{key_id}", "delete"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    } == {(path, method) for path, ops in doc["paths"].items() for method in ops}
    for path, ops in doc["paths"].items():
        guarded = path.startswith("/v1") or path == "/metrics"
        for op in ops.values():
            assert op["security"] == ([{"bearer": []}] if guarded else [])
    # The turn endpoints, and only they, take an Idempotency-Key and may answer 409 and 422.
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            turn = (path, method) in {
                ("/v1/chat/completions", "post"),
                ("/v1/conversations/{conversation_id}/messages", "post"),
            }
            headers = {p["name"] for p in op.get("parameters", ()) if p["in"] == "header"}
            assert (headers == {"Idempotency-Key"}) is turn, (path, method)
            assert ({"409", "422"} <= set(op["responses"])) is turn, (path, method)


async def test_every_reference_resolves(client_for: Client) -> None:
    async with client_for() as client:
        doc = (await client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]
    refs = _refs(doc)
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in schemas, ref


async def test_response_schemas_match_what_the_endpoints_return(client_for: Client) -> None:
    async with client_for() as client:
        doc = (await client.get("/openapi.json")).json()
        completion = await client.post(
            "/v1/chat/completions",
            json={"model": "scout", "messages": [{"role": "user", "content": "hi"}]},
        )
        turn = await client.post(
            "/v1/conversations/c/messages", json={"persona": "scout", "content": "hi"}
        )
    schemas = doc["components"]["schemas"]
    for model, response in ((ChatCompletionOut, completion), (TurnOut, turn)):
        required = set(schemas[model.__name__].get("required", []))
        assert required <= set(response.json()), model.__name__
        model.model_validate(response.json())
