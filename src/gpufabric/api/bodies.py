"""Request bodies an endpoint parses itself, off the event loop and in short steps: FastAPI would
decode and validate a declared body model on the loop before the endpoint runs (a 58 MiB
inventory held every other request for 5-7 s), and one call that decodes or validates it whole in
a worker thread holds the GIL just as long (json.loads, pydantic-core: the loop waits for the GIL;
measured 14 s). Such an endpoint takes the raw bytes (:data:`RAW`, read by the guard already) and
calls :func:`parsed` in its worker thread (a plain ``def`` endpoint): the body's big list is
decoded, validated and dumped one item at a time, so the event loop gets the GIL between items.
:func:`json_body` / :func:`text_body` name the body in the OpenAPI schema, and :func:`add_schemas`
puts the models those name into the schema's components."""

from __future__ import annotations

import json
import typing
from functools import cache
from typing import Any

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticError

_MODELS: dict[str, type[BaseModel]] = {}  # the models the schema's request bodies name
_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


async def raw_body(request: Request) -> bytes:
    return await request.body()  # read (and capped) by the guard: joined here, not parsed


RAW = Depends(raw_body)


def _invalid(loc: tuple[Any, ...], msg: str, value: Any = None) -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg, "input": value}])


def _decoded(raw: bytes, items: str) -> tuple[dict[str, Any], list[Any] | None]:
    """A JSON object's members but ``items`` (decoded whole: they are small), and the ``items``
    list decoded one element at a time (None: absent, or not a list, then among the others)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _invalid(("body",), "a UTF-8 JSON document", f"byte {e.start}") from None
    top: dict[str, Any] = {}
    listed: list[Any] | None = None
    i = _skip(text, 0)
    try:
        if text[i : i + 1] != "{":
            raise ValueError(f"a JSON object at char {i}")
        i = _skip(text, i + 1)
        while text[i : i + 1] != "}":
            key, i = _DECODER.raw_decode(text, i)
            if not isinstance(key, str):
                raise ValueError(f"a member name (a string) before char {i}")
            i = _skip(text, i)
            if text[i : i + 1] != ":":
                raise ValueError(f"':' at char {i}")
            i = _skip(text, i + 1)
            if key == items and text[i : i + 1] == "[":
                listed, i = [], _skip(text, i + 1)
                while text[i : i + 1] != "]":
                    one, i = _DECODER.raw_decode(text, i)  # one item: a short call
                    listed.append(one)
                    i = _next(text, _skip(text, i), "]")
                i += 1
            else:
                top[key], i = _DECODER.raw_decode(text, i)
            i = _next(text, _skip(text, i), "}")
        if _skip(text, i + 1) != len(text):
            raise ValueError(f"nothing after the object (char {i + 1})")
    except ValueError as e:  # json.JSONDecodeError is one
        raise _invalid(("body",), f"JSON decode error: {e}", {}) from None
    return top, listed


def _next(text: str, i: int, end: str) -> int:
    """Past a ``,`` to the next value (none may follow it but a value), or at ``end``."""
    if text[i : i + 1] == ",":
        j = _skip(text, i + 1)
        if text[j : j + 1] in (end, ""):
            raise ValueError(f"a value after ',' at char {j}")
        return j
    if text[i : i + 1] != end:
        raise ValueError(f"',' or '{end}' at char {i}")
    return i


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


@cache
def _adapter(model: type[BaseModel], items: str) -> TypeAdapter[Any]:
    (item,) = typing.get_args(model.model_fields[items].annotation)
    return TypeAdapter(item)


def parsed(model: type[BaseModel], raw: bytes, items: str) -> dict[str, Any]:
    """``raw`` (a JSON object) validated as ``model`` and dumped back without its None values, its
    list field ``items`` decoded, validated and dumped item by item; a 422 naming the first bad
    field, as a declared body gets."""
    top, listed = _decoded(raw, items)
    one = _adapter(model, items)
    checked: list[Any] = []
    for n, x in enumerate(listed or ()):
        try:
            checked.append(one.validate_python(x))
        except PydanticError as e:
            raise RequestValidationError([{**err, "loc": (items, n, *err["loc"])} for err in e.errors(include_url=False)]) from None
    try:  # the other fields, and the list's own bounds (its items are models already: not validated again)
        whole = model.model_validate({**top, **({items: checked} if listed is not None else {})})
    except PydanticError as e:
        raise RequestValidationError(e.errors(include_url=False)) from None
    return {**whole.model_dump(exclude_none=True, exclude={items}), items: [one.dump_python(x, exclude_none=True) for x in checked]}


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
