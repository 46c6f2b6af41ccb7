"""YAML read as plain values only (profiles, the table of contents, sweep specs).

:func:`read_yaml` builds strings, numbers, booleans, None, lists and mappings, and refuses
anything else before any value is built: no YAML tag can make it run code or build an
object, and no alias can make a small file expand into a large one.
"""

from __future__ import annotations

from typing import Any

_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null",
                                                  "seq", "map")}


#: The most values a YAML document may expand to, aliases counted each time they are used.
MAX_YAML_VALUES = 100_000
#: The most characters a YAML document may hold, and may expand to through its aliases
#: (a profile or a sweep spec is a few kilobytes).
MAX_YAML_BYTES = 1_000_000
#: The deepest a YAML document may nest lists and mappings (a profile nests three deep).
MAX_YAML_DEPTH = 64


def read_yaml(text: str, source: str = "YAML") -> Any:
    """Parse YAML into plain values (str, int, float, bool, None, lists, dicts) only.

    Refused with a ``ValueError`` naming the key, before any value is built: a node with
    another tag, explicit (``!!omap``, ``!!python/tuple``, ``!custom``) or implicit (a
    timestamp, a set); a key written twice in one mapping (YAML keeps the last silently);
    a document that aliases expand past :data:`MAX_YAML_VALUES` values or
    :data:`MAX_YAML_BYTES` characters (an alias bomb); a text longer than
    :data:`MAX_YAML_BYTES`; lists and mappings nested deeper than :data:`MAX_YAML_DEPTH`
    (checked on the parser's event stream, before anything recursive reads the text); a
    mapping key that is a list or a mapping. Each node is visited once, so the check takes
    time linear in the text, aliases included.
    """
    import yaml

    if not isinstance(text, str):
        raise TypeError(f"{source}: YAML text must be a string, got {type(text).__name__}")
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"{source} is {len(text):,} characters long, more than "
                         f"{MAX_YAML_BYTES:,}; a profile or sweep spec is a few kilobytes: "
                         "is this the right file?")
    try:
        _check_depth(text, source)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise ValueError(f"{source} is not valid YAML: {str(error)[:500]}") from error
    if node is None:
        return None
    size, chars = _check_nodes(node, source, "(top level)", {})
    if size > MAX_YAML_VALUES or chars > MAX_YAML_BYTES:
        raise ValueError(f"{source} expands to {size:,} values and {chars:,} characters "
                         f"through its aliases (*name), more than {MAX_YAML_VALUES:,} values "
                         f"or {MAX_YAML_BYTES:,} characters; write the values out instead")
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as error:  # e.g. an integer of thousands of digits
        raise ValueError(f"{source}: a value cannot be read ({str(error)[:200]}); write it "
                         "as a quoted string or a number of ordinary size") from error


def _check_depth(text: str, source: str) -> None:
    """Refuse lists and mappings nested deeper than :data:`MAX_YAML_DEPTH`, read from the
    parser's event stream (no recursion, unlike composing the document)."""
    import yaml

    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise ValueError(f"{source} nests lists and mappings more than "
                                 f"{MAX_YAML_DEPTH} deep (line {line}); a profile or sweep "
                                 "spec needs a few levels: flatten it")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_nodes(node, source: str, where: str, sizes: dict) -> tuple[int, int]:
    """Check one node and everything under it (each node once); returns how many values and
    characters it expands to."""
    import yaml

    if id(node) in sizes:
        return sizes[id(node)]
    where = where if len(where) <= 80 else where[:77] + "..."
    if node.tag not in _PLAIN_TAGS:
        raise ValueError(f"{source}: the value of {where} has the YAML tag {node.tag!r}; only "
                         "plain values (strings, numbers, booleans, null, lists, mappings) are "
                         "accepted. Remove the tag (write a list as [a, b], a mapping as "
                         "{key: value}, a date as a quoted string).")
    if isinstance(node, yaml.MappingNode):
        children = _mapping_children(node, source, where)
    elif isinstance(node, yaml.SequenceNode):
        children = [(item, f"{where}[{k}]") for k, item in enumerate(node.value)]
    else:
        children = []
    size, chars = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 1
    for child, place in children:
        child_size, child_chars = _check_nodes(child, source, place, sizes)
        size, chars = size + child_size, chars + child_chars
    sizes[id(node)] = (size, chars)
    return size, chars


def _mapping_children(node, source: str, where: str) -> list[tuple[Any, str]]:
    """A mapping node's keys and values with where each is, refusing a key that is a list or
    a mapping and a key written twice."""
    import yaml

    keys, out = set(), []
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode):
            raise ValueError(f"{source}: a key in {where} (line {line}) is a list or a "
                             "mapping; keys must be plain names")
        if (key.tag, key.value) in keys:
            raise ValueError(f"{source}: the key {key.value[:80]!r} appears twice in {where} "
                             f"(line {line}); keep one")
        keys.add((key.tag, key.value))
        out += [(key, f"a key in {where}"), (value, repr(key.value))]
    return out
