"""Compare nested settings (dicts and lists of plain values) leaf by leaf, to say exactly what changed."""

from __future__ import annotations

from typing import Any

ABSENT = "(absent)"


def flatten(node: Any, key: str = "") -> dict[str, Any]:
    """Nested dicts and lists as ``{dotted.key: leaf value}`` (list items as ``key[i]``)."""
    if isinstance(node, dict) and node:
        children = [(f"{key}.{name}" if key else str(name), child) for name, child in node.items()]
    elif isinstance(node, list | tuple) and node:
        children = [(f"{key}[{index}]", child) for index, child in enumerate(node)]
    else:
        return {key: node}
    return {leaf: value for child_key, child in children for leaf, value in flatten(child, child_key).items()}


def leaf_changes(before: Any, after: Any, ignore: tuple[str, ...] = ()) -> list[str]:
    """``key: old -> new`` for every leaf outside ``ignore`` that differs between two nested settings."""
    old, new = flatten(before), flatten(after)
    return [
        f"{key}: {old.get(key, ABSENT)} -> {new.get(key, ABSENT)}"
        for key in sorted(old.keys() | new.keys())
        if key not in ignore and old.get(key, ABSENT) != new.get(key, ABSENT)
    ]
