"""Dashboard JSON checked against Grafana's own model (grafana-foundation-sdk): fields and types."""

from __future__ import annotations

import copy
import enum
import json
import types
import typing
from collections.abc import Iterator
from typing import Any

from grafana_foundation_sdk.cog import runtime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.cog.variants import Dataquery
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

from tests.config.queries import DASHBOARDS

# Decode panel options, field config and queries with the panel and datasource plugins' models
# too; without this they stay untyped dictionaries and nothing in them is checked.
register_default_plugins()
_RUNTIME = runtime.Runtime()


def problems(board: dict[str, Any]) -> list[str]:
    """Every field of ``board`` that Grafana's dashboard model does not know or holds with the
    wrong type, as ``"path: why"``; empty when the model accepts the whole dashboard."""
    found = list(_decoded(Dashboard, board, "$"))
    if found:  # the checks below read the shape the model has just accepted
        return found
    for i, panel in enumerate(board.get("panels", [])):
        where = f"$.panels[{i}]"
        if panel["type"] != "row" and _RUNTIME.panelcfg_config(panel["type"]) is None:
            found.append(f"{where}: {panel['type']!r} is not a panel plugin of Grafana's model")
        found += _overrides(panel, where)
    return found


def _decoded(model: type, data: Any, path: str) -> Iterator[str]:
    try:
        decoded = model.from_json(data)  # type: ignore[attr-defined]
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        yield f"{path}: Grafana's model cannot decode it ({error!r})"
        return
    yield from _unknown(data, _encode(decoded), path)
    yield from _mistyped(decoded, model, path)


def _overrides(panel: dict[str, Any], path: str) -> Iterator[str]:
    """The schema types an override's property value as anything, but Grafana applies it to the
    field-config path its id names ("unit", "custom.lineStyle"): check it as that field, so a
    misspelt id or a wrong value shape is caught, not silently ignored by Grafana."""
    for j, override in enumerate(panel.get("fieldConfig", {}).get("overrides", [])):
        for k, prop in enumerate(override.get("properties", [])):
            *parents, leaf = prop.get("id", "").split(".")
            defaults: dict[str, Any] = {leaf: prop.get("value")}
            for parent in reversed(parents):
                defaults = {parent: defaults}
            alone = {"type": panel["type"], "fieldConfig": {"defaults": defaults}}
            where = f"{path}.fieldConfig.overrides[{j}].properties[{k}] as $"
            yield from _decoded(Panel, alone, where)


def _encode(model: object) -> Any:
    return json.loads(json.dumps(model, cls=JSONEncoder))


def _unknown(original: Any, encoded: Any, path: str) -> Iterator[str]:
    """The SDK decodes only the fields its model has and writes back what it decoded, so a key
    that does not come back is one the model does not know (a typo, a field of another version)."""
    if isinstance(original, dict) and isinstance(encoded, dict):
        for key, value in original.items():
            if key in encoded:
                yield from _unknown(value, encoded[key], f"{path}.{key}")
            # The model writes an unset optional field as absent; Grafana reads null and absent
            # alike (the dashboard's "id": null is one).
            elif value is not None:
                yield f"{path}.{key}: not a field of Grafana's model"
    elif isinstance(original, list) and isinstance(encoded, list) and len(original) == len(encoded):
        for i, (was, now) in enumerate(zip(original, encoded, strict=True)):
            yield from _unknown(was, now, f"{path}[{i}]")
    elif original != encoded:
        yield f"{path}: the model reads {original!r} as {encoded!r}"


def _is_model(value: object) -> bool:
    return callable(getattr(value, "to_json", None))


def _fields(model: object, path: str) -> Iterator[str]:
    if isinstance(model, runtime.UnknownDataquery):
        yield f"{path}: a query of a datasource type the model does not know"
        return
    for name, hint in typing.get_type_hints(type(model)).items():
        yield from _mistyped(getattr(model, name), hint, f"{path}.{name}")


def _mistyped(value: Any, hint: Any, path: str) -> Iterator[str]:
    """Problems of ``value`` against the model's type hint (paths name the model's attributes)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        # Free-form in the schema (plugin options before decoding, override values); a value the
        # SDK decoded into a plugin's model is checked against that model.
        if _is_model(value):
            yield from _fields(value, path)
    elif origin in (typing.Union, types.UnionType):
        yield from _union(value, args, path)
    elif origin is typing.Literal:
        if value not in args:
            yield f"{path}: {value!r} is not one of {list(args)}"
    elif origin is list:
        if not isinstance(value, list):
            yield f"{path}: {value!r} is not a list"
        else:
            for i, item in enumerate(value):
                yield from _mistyped(item, args[0], f"{path}[{i}]")
    elif origin is dict:
        if not isinstance(value, dict):
            yield f"{path}: {value!r} is not an object"
        else:
            for key, item in value.items():
                yield from _mistyped(item, args[1], f"{path}.{key}")
    elif isinstance(hint, type):
        yield from _typed(value, hint, path)
    else:
        raise TypeError(f"{path}: no rule for the type hint {hint!r}")


def _union(value: Any, args: tuple[Any, ...], path: str) -> Iterator[str]:
    if value is None and type(None) in args:
        return
    # One clean alternative is enough; otherwise report the closest one's problems.
    tried = [list(_mistyped(value, arg, path)) for arg in args if arg is not type(None)]
    if all(tried):
        yield from min(tried, key=len)


def _typed(value: Any, hint: type, path: str) -> Iterator[str]:
    if issubclass(hint, enum.Enum):
        # The SDK keeps the raw JSON value; bool is an int to Python but never to Grafana.
        allowed = [m.value for m in hint]
        if isinstance(value, bool) or value not in allowed:
            yield f"{path}: {value!r} is not one of {allowed}"
    elif hint is Dataquery or _is_model_class(hint):
        if isinstance(value, dict) and _is_model_class(hint):
            # Fields the SDK leaves as raw JSON though the schema types them (transformations,
            # links): decode and check them here.
            yield from _decoded(hint, value, path)
        elif not isinstance(value, hint):
            yield f"{path}: {value!r} is not a {hint.__name__}"
        else:
            yield from _fields(value, path)
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            yield f"{path}: {value!r} is not a number"
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            yield f"{path}: {value!r} is not an integer"
    elif not isinstance(value, hint):
        yield f"{path}: {value!r} is not a {hint.__name__}"


def _is_model_class(hint: type) -> bool:
    return callable(getattr(hint, "from_json", None))


def main() -> None:
    """`python -m tests.config.grafana_model`: how much of the committed dashboards the check
    reaches. Each value in turn becomes a wrongly shaped one (an object) and each object in turn
    gets an unknown key; prints how many of these changes are rejected and where the others went
    through: the places Grafana's schema itself leaves free-form. About 5 minutes."""
    counts = {"values": [0, 0], "objects": [0, 0]}  # [tried, rejected]
    through: set[str] = set()
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        for keys, node in _nodes(board, ()):
            if isinstance(node, dict):
                what, trial = "objects", copy.deepcopy(board)
                _at(trial, keys)["notAField"] = 1
            elif isinstance(node, list) or not keys:
                continue
            else:
                what, trial = "values", copy.deepcopy(board)
                _at(trial, keys[:-1])[keys[-1]] = {"notA": "value"}
            counts[what][0] += 1
            if problems(trial):
                counts[what][1] += 1
            else:
                through.add(f"{what}: " + ".".join("#" if isinstance(k, int) else k for k in keys))
    for what, (tried, rejected) in counts.items():
        print(f"{what}: {rejected} of {tried} changes rejected")
    print("went through at:", *sorted(through), sep="\n  ")


def _nodes(node: Any, keys: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    yield keys, node
    children: Any = []
    if isinstance(node, dict):
        children = node.items()
    elif isinstance(node, list):
        children = enumerate(node)
    for key, child in children:
        yield from _nodes(child, (*keys, key))


def _at(node: Any, keys: tuple[str | int, ...]) -> Any:
    for key in keys:
        node = node[key]
    return node


if __name__ == "__main__":
    main()
