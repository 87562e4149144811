"""A pydantic model's JSON Schema turned into a Kubernetes structural schema.

A CRD's schema is OpenAPI v3 with the structural rules of apiextensions: no `$ref`, one `type`
per node, no `type` inside `anyOf`/`oneOf`, no `additionalProperties: false`, patterns in Go's
RE2 (no lookaround). What JSON Schema says that a structural schema cannot is said again as a CEL
rule (`x-kubernetes-validations`): a count-or-percentage, a soak, map keys, "exactly one of".
Anything this module does not know how to carry over raises, so a new construct in a model is
seen by the test that regenerates the CRDs rather than dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollout_common.errors import PermanentError

# Python's "nothing follows" (`$` there also matches before a final newline); Go's `$` does not.
_END = r"(?![\s\S])"
# The lookaheads of the models (a percentage above 0, a duration above 0), spelled without them:
# a number above zero has a digit 1-9 in its whole part or in its fraction.
_ABOVE_ZERO = r"([0-9]*[1-9][0-9]*(\.[0-9]+)?|[0-9]+\.[0-9]*[1-9][0-9]*)"
_DURATION_PART = r"([0-9]+(\.[0-9]+)?[smhd])"
_RE2_EQUIVALENTS = {
    r"^(?=[0-9.]*[1-9])([0-9]+(?:\.[0-9]+)?)%": rf"^{_ABOVE_ZERO}%$",
    r"^(?=[^1-9]*[1-9])([0-9]+(\.[0-9]+)?[smhd])+": rf"^{_DURATION_PART}*{_ABOVE_ZERO}[smhd]{_DURATION_PART}*$",
}
_DROPPED = frozenset({"title", "default", "$defs", "examples", "uniqueItems"})
# The apiserver estimates a CEL rule's worst cost from the sizes the schema allows: a list or map
# whose members carry rules needs a bound, and so does a string a rule matches.
_MAP_KEYS_LIMIT = 64
_RULED_ITEMS_LIMIT = 64
_RULED_TEXT_LIMIT = 64

Rule = dict[str, str]


class SchemaConversionError(PermanentError):
    """A model's schema holds a construct the CRD schema cannot carry."""


def re2_pattern(pattern: str) -> str:
    for python, re2 in _RE2_EQUIVALENTS.items():
        if pattern.startswith(python):
            return re2
    converted = pattern.replace(_END, "$")
    if "(?=" in converted or "(?!" in converted or "(?<" in converted:
        raise SchemaConversionError(f"pattern {pattern!r} needs lookaround, which Go's RE2 lacks")
    return converted


def structural(
    schema: Mapping[str, Any], *, rules: Mapping[str, list[Rule]] | None = None, path: str = "spec"
) -> dict[str, Any]:
    """The structural schema of `schema` (a `model_json_schema(by_alias=True)`); `rules` adds CEL
    rules to the nodes of the named models, which must say what their `oneOf`/`if` said."""
    converter = _Converter(defs=schema.get("$defs", {}), rules=rules or {})
    return converter.node(schema, path=path, model=schema.get("title"))


class _Converter:
    def __init__(self, *, defs: Mapping[str, Any], rules: Mapping[str, list[Rule]]) -> None:
        self.defs = defs
        self.rules = rules

    def node(self, schema: Mapping[str, Any], *, path: str, model: str | None = None) -> dict[str, Any]:
        schema = dict(schema)
        if "$ref" in schema:
            name = schema.pop("$ref").rsplit("/", 1)[-1]
            return self.node({**self.defs[name], **schema}, path=path, model=name)
        if "anyOf" in schema:
            return self._any_of(schema, path=path, model=model)
        if "allOf" in schema and len(schema["allOf"]) == 1:
            return self.node({**schema.pop("allOf")[0], **schema}, path=path, model=model)
        cel = self._model_rules(schema, path=path, model=model)
        kind = _json_type(schema)
        if kind is None and not any(k in schema for k in ("properties", "enum", "const")):
            return {"x-kubernetes-preserve-unknown-fields": True, **_describe(schema)}
        if "const" in schema:
            schema["enum"] = [schema.pop("const")]
            kind = kind or _kind_of(schema["enum"][0])
        out: dict[str, Any] = {"type": kind or "object"}
        for key, value in schema.items():
            if key not in _DROPPED:
                self._carry(out, cel, key, value, path=path)
        _finish(out, cel)
        return out

    def _model_rules(self, schema: dict[str, Any], *, path: str, model: str | None) -> list[Rule]:
        """The CEL rules given for `model`; they must say what its `oneOf`/`if` said, which is dropped."""
        cel: list[Rule] = list(self.rules.get(model, [])) if model else []
        for key in ("oneOf", "if", "then", "else"):
            if key in schema and not cel:
                raise SchemaConversionError(f"{path}: {key!r} of {model or 'a field'} needs a CEL rule to say it")
            schema.pop(key, None)
        return cel

    def _carry(self, out: dict[str, Any], cel: list[Rule], key: str, value: Any, *, path: str) -> None:
        """One keyword of a JSON Schema node into the structural node `out` (or a CEL rule into `cel`)."""
        if key == "properties":
            out["properties"] = {name: self.node(sub, path=f"{path}.{name}") for name, sub in value.items()}
        elif key == "additionalProperties":
            if value is not False:
                out["additionalProperties"] = self.node(value, path=f"{path}[*]")
        elif key == "items":
            out["items"] = self.node(value, path=f"{path}[*]")
        elif key == "patternProperties":
            # one pattern: the map's values, and its keys as a CEL rule
            ((pattern, values),) = value.items()
            out["additionalProperties"] = self.node(values, path=f"{path}[*]")
            out.setdefault("maxProperties", _MAP_KEYS_LIMIT)
            cel.append(_keys_rule({"pattern": pattern}))
        elif key == "propertyNames":
            out.setdefault("maxProperties", _MAP_KEYS_LIMIT)
            cel.append(_keys_rule(value))
        elif key == "pattern":
            out["pattern"] = re2_pattern(value)
        elif key == "exclusiveMinimum":
            out["minimum"], out["exclusiveMinimum"] = value, True
        elif key == "exclusiveMaximum":
            out["maximum"], out["exclusiveMaximum"] = value, True
        else:
            out[key] = value

    def _any_of(self, schema: dict[str, Any], *, path: str, model: str | None) -> dict[str, Any]:
        branches = [b for b in schema.pop("anyOf") if b != {"type": "null"}]
        if len(branches) == 1:
            return self.node({**branches[0], **schema}, path=path, model=model)
        kinds = {b.get("type") for b in branches}
        if kinds in ({"integer", "string"}, {"number", "string"}):
            return self._int_or_string(branches, schema)
        raise SchemaConversionError(f"{path}: anyOf of {sorted(map(str, kinds))} has no structural form")

    def _int_or_string(self, branches: list[dict[str, Any]], schema: Mapping[str, Any]) -> dict[str, Any]:
        """Count-or-percentage and seconds-or-duration: an int-or-string whose two readings a CEL
        rule checks (a fractional number of seconds is refused by the apiserver: write 90s)."""
        number = next(b for b in branches if b.get("type") in ("integer", "number"))
        text = next(b for b in branches if b.get("type") == "string")
        checks = [f"self >= {_num(number['minimum'])}"] if "minimum" in number else []
        checks += [f"self <= {_num(number['maximum'])}"] if "maximum" in number else []
        matches = f"self.matches(r'{re2_pattern(text['pattern'])}')" if "pattern" in text else "true"
        rule = f"type(self) == int ? ({' && '.join(checks) or 'true'}) : {matches}"
        description = schema.get("description", "")
        return {
            "x-kubernetes-int-or-string": True,
            "maxLength": _RULED_TEXT_LIMIT,
            **_describe(schema),
            "x-kubernetes-validations": [{"rule": rule, "message": f"must be {description}".strip()}],
        }


def _json_type(schema: dict[str, Any]) -> str | None:
    """The node's one `type` (taken out of `schema`), None when it names none."""
    kind = schema.pop("type", None)
    if isinstance(kind, list):
        # label values: YAML may write a number or a boolean, the API stores text
        kind = "string" if "string" in kind else kind[0]
    return None if kind is None else str(kind)


def _finish(out: dict[str, Any], cel: list[Rule]) -> None:
    """What a structural node needs beyond its keywords: open objects, its CEL rules, and the size
    bounds the apiserver wants before it accepts rules under a list or map."""
    if out["type"] == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if cel:
        out["x-kubernetes-validations"] = cel
    if out["type"] == "array" and _has_rules(out.get("items", {})):
        out.setdefault("maxItems", _RULED_ITEMS_LIMIT)
    if out["type"] == "object" and _has_rules(out.get("additionalProperties", {})):
        out.setdefault("maxProperties", _MAP_KEYS_LIMIT)


def _has_rules(node: Mapping[str, Any]) -> bool:
    """True when `node` or anything under it carries a CEL rule."""
    if "x-kubernetes-validations" in node:
        return True
    children = [*node.get("properties", {}).values(), node.get("items", {}), node.get("additionalProperties", {})]
    return any(isinstance(child, Mapping) and child and _has_rules(child) for child in children)


def _keys_rule(names: Mapping[str, Any]) -> Rule:
    pattern = re2_pattern(names["pattern"])
    return {"rule": f"self.all(k, k.matches(r'{pattern}'))", "message": f"every key must match {pattern}"}


def _describe(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"description": schema["description"]} if schema.get("description") else {}


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "string"


def _num(value: float) -> str:
    # CEL compares an int with an int literal only: 2592000.0 would not type-check against int
    return str(int(value)) if float(value).is_integer() else repr(value)
