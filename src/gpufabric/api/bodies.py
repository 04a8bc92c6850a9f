"""Request bodies an endpoint parses itself, off the event loop: FastAPI would decode and
validate a declared body model on the loop before the endpoint runs (a 64 MiB inventory held
every other request for seconds). Such an endpoint takes the raw bytes (:data:`RAW`, read by
the guard already), parses them with :func:`parsed` in its worker thread (a plain ``def``
endpoint), and names its body in the OpenAPI schema with :func:`json_body` / :func:`text_body`;
:func:`add_schemas` puts the models those name into the schema's components."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

M = TypeVar("M", bound=BaseModel)
_MODELS: dict[str, type[BaseModel]] = {}  # the models the schema's request bodies name


async def raw_body(request: Request) -> bytes:
    return await request.body()  # read (and capped) by the guard: joined here, not parsed


RAW = Depends(raw_body)


def parsed(model: type[M], raw: bytes) -> M:
    """``raw`` (JSON) as ``model``: a 422 naming the first bad field, as a declared body gets."""
    try:
        return model.model_validate_json(raw)
    except PydanticError as e:
        raise RequestValidationError(e.errors(include_url=False)) from None


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of an endpoint whose JSON body is ``model``."""
    _MODELS[model.__name__] = model
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"content": {"application/json": {"schema": ref}}, "required": True}}


def text_body(description: str) -> dict[str, Any]:
    """The ``openapi_extra`` of an endpoint whose body is text (``text/plain``)."""
    schema = {"type": "string", "title": "Body", "description": description}
    return {"requestBody": {"content": {"text/plain": {"schema": schema}}, "required": True}}


def add_schemas(spec: dict[str, Any]) -> None:
    """Each model :func:`json_body` named, and the models it refers to, in ``spec``'s components."""
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    for name, model in _MODELS.items():
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for sub, s in schema.pop("$defs", {}).items():
            components.setdefault(sub, s)
        components[name] = schema
