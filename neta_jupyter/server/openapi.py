"""The OpenAPI document of the REST API, built from the route table the server registers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .routes import ROUTES, Operation


class ErrorBody(BaseModel):
    """Every 4xx body (seed 003)."""

    model_config = ConfigDict(populate_by_name=True)

    http_status_code: int = Field(alias="httpStatusCode")
    message: str
    data: None = None
    success: bool
    err_code: str = Field(alias="errCode")
    request_id: str | None = Field(alias="requestId")


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")


def _component(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``model``'s schema, which joins ``components`` with the models it uses."""
    schema = _schema(model)
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation, components: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary, "security": [{"token": []}]}
    if op.query:
        out["parameters"] = [
            {"name": name, "in": "query", "required": required, "schema": {"type": kind}}
            for name, required, kind in op.query
        ]
    if op.body is not None:
        out["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _component(op.body, components)}},
        }
    if op.upload:
        binary = {"type": "string", "format": "binary"}
        form = {"type": "object", "properties": {"file": binary}, "required": ["file"]}
        out["requestBody"] = {
            "required": True,
            "content": {
                "multipart/form-data": {"schema": form},
                "application/octet-stream": {"schema": binary},
            },
        }
    error = {
        "description": "refused",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
    }
    success = _component(op.response, components) if op.response is not None else {}
    responses: dict[str, Any] = {
        "200": {"description": "success", "content": {op.content: {"schema": success}}},
        "400": error,
        "403": error,
        "404": error,
        "409": error,
    }
    if op.body is not None or op.upload:
        responses["413"] = error
    for status in op.extra_status:
        responses[str(status)] = {"description": "no content"}
    for status in op.extra_errors:
        responses[str(status)] = error
    out["responses"] = responses
    return out


def document(base_url: str = "/") -> dict[str, Any]:
    """OpenAPI 3.1 of every REST route, with paths under ``base_url``."""
    components: dict[str, Any] = {"ErrorBody": _schema(ErrorBody)}
    prefix = base_url.rstrip("/")
    paths = {
        f"{prefix}/neta/api/{route.path}": {
            op.method: _operation(op, components) for op in route.operations
        }
        for route in ROUTES
        if route.operations
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "neta_jupyter run API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "Authorization"}
            },
        },
    }
