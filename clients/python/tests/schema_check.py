"""Compares a pydantic model with the OpenAPI schema it mirrors.

A model matches its schema when:
- every schema property is a model field with the same wire name, and every model field is
  a schema property;
- a field is required in the model exactly when the schema requires it;
- a field may be ``None`` exactly when the schema allows ``null``, or the field is optional
  (absent is ``None`` in Python);
- the types agree: string/integer/number/boolean as ``str``/``int``/``float``/``bool``
  (a ``const`` or an enum of strings as ``str``), arrays as lists, objects of
  ``additionalProperties`` as dicts, ``anyOf``/``oneOf`` as unions, an object schema
  (``$ref`` or inline) as the model whose ``openapi_ref`` is that schema, ``{}`` as any.
"""

from __future__ import annotations

import functools
import operator
import types
import typing
from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]


def pointer(doc: Schema, ref: str) -> Any | None:
    """The value at a JSON pointer (``#/components/schemas/X``), or ``None``."""
    node: Any = doc
    for part in ref.lstrip("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _resolve(doc: Schema, schema: Schema) -> tuple[Schema, str | None]:
    ref = None
    while "$ref" in schema:
        ref = schema["$ref"]
        target = pointer(doc, ref)
        if target is None:
            raise KeyError(f"unresolved {ref}")
        schema = target
    return schema, ref


def _split_null(schema: Schema) -> tuple[list[Schema], bool]:
    """The schema's non-null alternatives, and whether ``null`` is allowed."""
    if "anyOf" in schema or "oneOf" in schema:
        alts: list[Schema] = schema.get("anyOf") or schema.get("oneOf") or []
        rest = [a for a in alts if a.get("type") != "null"]
        return rest, len(rest) < len(alts)
    t = schema.get("type")
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        base = {k: v for k, v in schema.items() if k != "type"}
        if len(non_null) == 1:
            return [{**base, "type": non_null[0]}], "null" in t
        return [{**base, "type": x} for x in non_null], "null" in t
    return [schema], False


def _split_none(annotation: Any) -> tuple[list[Any], bool]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        rest = [a for a in args if a is not type(None)]
        return rest, len(rest) < len(args)
    return [annotation], False


#: Keywords that constrain a value's type; a schema with none of them takes any JSON value.
_TYPE_KEYWORDS = {"type", "$ref", "anyOf", "oneOf", "allOf", "const", "enum", "properties", "items"}


def _is_any(schema: Schema) -> bool:
    return not (_TYPE_KEYWORDS & set(schema))


def _is_object(schema: Schema) -> bool:
    return schema.get("type") == "object" or "properties" in schema


def _object_variants(schema: Schema) -> list[Schema] | None:
    """An object schema, or a ``oneOf`` of object schemas (a tagged enum): its variants."""
    alts: list[Schema] = schema.get("oneOf") or schema.get("anyOf") or []
    if alts and all(_is_object(a) and "properties" in a for a in alts):
        return alts
    if _is_object(schema) and "properties" in schema:
        return [schema]
    return None


def model_problems(model: type[BaseModel], schema: Schema, doc: Schema) -> list[str]:
    """What differs between ``model`` and ``schema``; empty when they match."""
    schema, _ = _resolve(doc, schema)
    variants = _object_variants(schema)
    if variants is None:
        return [f"{model.__name__}: the schema is not an object: {schema}"]
    properties: dict[str, Schema] = {}
    for v in variants:
        properties.update(v["properties"])
    # A variant's property is required when every variant requires it.
    required = set.intersection(*(set(v.get("required", [])) for v in variants))
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    where = model.__name__
    problems = [f"{where}: the schema's {p!r} is not a model field" for p in sorted(set(properties) - set(fields))]
    problems += [f"{where}.{f}: not in the schema" for f in sorted(set(fields) - set(properties))]
    for wire in sorted(set(fields) & set(properties)):
        info, prop = fields[wire], properties[wire]
        is_required = wire in required
        if info.is_required() != is_required:
            said = "requires" if is_required else "does not require"
            problems.append(
                f"{where}.{wire}: the schema {said} it, the model {'does' if info.is_required() else 'does not'}"
            )
        problems += type_problems(f"{where}.{wire}", info.annotation, prop, doc, optional=not is_required)
    return problems


_SCALARS = {"string": (str,), "integer": (int,), "number": (float, int), "boolean": (bool,)}


def type_problems(where: str, annotation: Any, schema: Schema, doc: Schema, optional: bool = False) -> list[str]:
    """What differs between a Python type and a schema."""
    if _is_any(schema):
        return []  # any JSON value: a narrower Python type is a choice of the client
    schema, ref = _resolve(doc, schema)
    alts, nullable = _split_null(schema)
    members, none_ok = _split_none(annotation)
    problems = []
    if nullable and not none_ok:
        problems.append(f"{where}: the schema allows null, the model does not")
    if none_ok and not nullable and not optional:
        problems.append(f"{where}: the model allows None, the schema neither allows null nor leaves it out")
    if annotation is Any:
        return problems + [f"{where}: typed as Any, the schema says {schema}"]
    # A tagged enum or object: the model that mirrors it.
    variants = _object_variants(schema)
    if variants is not None and not nullable:
        target = ref or "an inline object"
        model = members[0] if len(members) == 1 else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return problems + [f"{where}: the schema is {target}, the model has {annotation}"]
        model_ref = getattr(model, "openapi_ref", None)
        if ref is not None and model_ref != ref:
            return problems + [f"{where}: the schema is {ref}, the model's {model.__name__} mirrors {model_ref}"]
        if ref is None:
            problems += model_problems(model, schema, doc)
        return problems
    if len(alts) > 1:
        # A union: each alternative is some member, each member some alternative.
        if all(a.get("type") == "string" for a in alts):
            return problems + type_problems(where, _one(members), {"type": "string"}, doc)
        for a in alts:
            if all(type_problems(where, m, a, doc) for m in members):
                problems.append(f"{where}: the schema's {a} is none of the model's {members}")
        for m in members:
            if all(type_problems(where, m, a, doc) for a in alts):
                problems.append(f"{where}: the model's {m} is none of the schema's {alts}")
        return problems
    (alt,) = alts
    if alt.get("type") is None and ("anyOf" in alt or "oneOf" in alt or "$ref" in alt):
        return problems + type_problems(where, _one(members), alt, doc)
    t = alt.get("type")
    py = _one(members)
    origin, args = typing.get_origin(py), typing.get_args(py)
    if t in _SCALARS:
        if py is Any or py not in _SCALARS[t] and origin is not typing.Literal:
            problems.append(f"{where}: the schema says {t}, the model {py}")
        return problems
    if t == "array":
        if origin is not list:
            return problems + [f"{where}: the schema says array, the model {py}"]
        return problems + type_problems(f"{where}[]", args[0], alt.get("items", {}), doc)
    if t == "object":
        if origin is not dict or args[0] is not str:
            return problems + [f"{where}: the schema says an object of any keys, the model {py}"]
        extra = alt.get("additionalProperties", True)
        if extra is True:
            return problems if args[1] is Any else problems + [f"{where}: any values, the model {args[1]}"]
        return problems + type_problems(f"{where}{{}}", args[1], extra, doc)
    if t is None and "const" in alt:
        return problems + type_problems(where, py, {"type": "string"}, doc)
    return problems + [f"{where}: a schema this check does not know: {alt}"]


def _one(members: list[Any]) -> Any:
    return functools.reduce(operator.or_, members)
