"""What one release reads of another's messages and stored state.

A rolling deploy runs two releases side by side for a while: a worker of the new release writes
a session's state that a worker of the old one loads next, a gateway of the old release carries
out a batch a new worker published, and the other way round. Every model here refuses unknown
fields (a misspelt field in code raises where it is written), which between releases turned a
field one release added into a refused batch (every control and reply in it lost) or a session
no worker could load. Read across releases, a field or a directive kind this release does not
know is dropped and named, and everything else is read as usual; a value of a known field that is
wrong still raises. A field a release adds must therefore have a default that means "as before"
(CHANGELOG.md says which releases add one).

A field a release moves into a nested model (`MOVED`) is read at either place, and written where
the release before kept it, so each of the two releases reads the other's as its own: a move is
finished by the release after, which writes the nested shape (this one reads it), and the one
after that may stop reading the old.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError, create_model

from pipeline.session.state import RealtimeCall, SessionState

Model = TypeVar("Model", bound=BaseModel)

# What another release may add: a field, or a member of a tagged union (a directive kind).
_ADDED = frozenset({"extra_forbidden", "union_tag_invalid"})


# Fields moved from the top of a stored model into one of its fields, by model: the field they
# are in now, and their names. Issue 45 moved the Realtime wing's part of a session's state into
# `realtime` (as Live's is in `live`), and writes it at the top still.
MOVED: dict[type[BaseModel], tuple[str, frozenset[str]]] = {
    SessionState: ("realtime", frozenset(RealtimeCall.model_fields)),
}


def as_stored(value: BaseModel) -> str:
    """The JSON this release stores of `value`: its moved fields where the release before this
    one reads them (at the top), the rest as the model has them."""
    moved = MOVED.get(type(value))
    if moved is None:
        return value.model_dump_json()
    into, _ = moved
    rest = value.model_dump_json(exclude={into})
    part = getattr(value, into).model_dump_json()
    # Two objects, each with fields (a model dumps its defaults too): one object of them all.
    return f"{rest[:-1]},{part[1:]}"


@cache
def _flat(model: type[BaseModel]) -> type[BaseModel]:
    """`model` as it is stored: the moved fields at the top, beside the rest, and the field they
    are in now, which a later release writes (absent here unless it did).

    A stored state is read once per event: validated as one object from its JSON, it costs half
    what reading it into Python, folding it and validating the fold did (docs/benchmarks.md)."""
    into, names = MOVED[model]
    inner = model.model_fields[into].annotation
    assert isinstance(inner, type) and issubclass(inner, BaseModel)
    fields: dict[str, Any] = {
        name: (field.annotation, field) for name, field in model.model_fields.items() if name != into
    }
    fields.update((name, (inner.model_fields[name].annotation, inner.model_fields[name])) for name in names)
    fields[into] = (inner | None, None)
    return create_model(f"Stored{model.__name__}", __config__=model.model_config, **fields)


_set = object.__setattr__


def _built(model: type[Model], values: dict[str, Any]) -> Model:
    """An instance of `model` holding `values`, one for each of its fields, each validated
    already: what `model_construct` does, without looking up a default or an alias per field."""
    built = model.__new__(model)
    _set(built, "__dict__", values)
    _set(built, "__pydantic_fields_set__", set(values))
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built


def _unfolded(model: type[Model], data: bytes | str | dict[str, Any]) -> Model:
    """`data` as `model` when it is of this release or the one before (a moved field at either
    place, the place it is now winning); raises ValidationError otherwise."""
    into, _ = MOVED[model]
    stored = _flat(model)
    flat = stored.model_validate(data) if isinstance(data, dict) else stored.model_validate_json(data)
    values = flat.__dict__
    inner = model.model_fields[into].annotation
    assert isinstance(inner, type) and issubclass(inner, BaseModel)
    # In the models' field order, which is the order they are dumped in.
    part = {name: values[name] for name in inner.model_fields}
    there = values[into]
    if there is not None:
        part.update((name, getattr(there, name)) for name in there.model_fields_set)
    values[into] = _built(inner, part)
    return _built(model, {name: values[name] for name in model.model_fields})


def _nested(
    data: bytes | str | dict[str, Any], into: str, names: frozenset[str]
) -> tuple[Any, frozenset[str]]:
    """`data` with the moved fields at its top put under `into`, and the names of those it had
    at the top (a field found at both places is read where it is now); `data` itself is not
    changed."""
    try:
        read = json.loads(data) if not isinstance(data, dict) else data
    except ValueError:
        return data, frozenset()  # not JSON: refused as it is
    if not isinstance(read, dict) or names.isdisjoint(read):
        return data, frozenset()
    there = read.get(into)
    part = {name: read[name] for name in names if name in read}
    kept = {key: value for key, value in read.items() if key not in names}
    kept[into] = {**part, **there} if isinstance(there, dict) else part
    return kept, frozenset(part).difference(there if isinstance(there, dict) else ())


def across_releases(model: type[Model], data: bytes | str | dict[str, Any]) -> tuple[Model, tuple[str, ...]]:
    """`data` as `model`, with what this release does not know dropped: the model and the
    dotted paths dropped, as `data` has them (none when `data` is of this release, which costs
    one validation). A moved field is read where either release keeps it."""
    into, names = MOVED.get(model, ("", frozenset()))
    lifted: frozenset[str] = frozenset()
    if names:
        try:
            return _unfolded(model, data), ()
        except ValidationError:
            pass  # a field another release added, or a wrong value: read as below, which names it
        data, lifted = _nested(data, into, names)
    try:
        if isinstance(data, dict):
            return model.model_validate(data), ()
        return model.model_validate_json(data), ()
    except ValidationError as error:
        errors = error.errors()
        if not all(each["type"] in _ADDED for each in errors):
            raise
    tolerant = json.loads(data) if not isinstance(data, dict) else copy.deepcopy(data)
    dropped = []
    for each in errors:
        path = _remove(tolerant, each["loc"])
        # A moved field's place as `data` has it: at the top.
        received = path[1:] if len(path) > 1 and path[0] == into and path[1] in lifted else path
        dropped.append(_named(received, each.get("ctx", {})))
    _compact(tolerant)
    return model.model_validate(tolerant), tuple(dropped)


def _named(path: tuple[int | str, ...], context: dict[str, Any]) -> str:
    """`items.1.priority` for a field; `items.1 of kind teleport` for a member of a union."""
    name = ".".join(map(str, path))
    return f"{name} of kind {context['tag']}" if "tag" in context else name


def _remove(data: Any, location: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """Remove what `location` names from `data` and answer its path in the data."""
    path = _path(data, tuple(location))
    if path is None:
        raise ValueError(f"no such place in the data: {location}")
    container = data
    for step in path[:-1]:
        container = container[step]
    last = path[-1]
    if isinstance(container, list) and isinstance(last, int):
        # A list item of an unknown kind is blanked now and removed once every error's path is
        # resolved: removing it at once would move the items behind it from under their indexes.
        container[last] = _DROPPED
    else:
        del container[last]
    return path


def _path(container: Any, location: tuple[int | str, ...]) -> tuple[int | str, ...] | None:
    """The keys in the data that `location` names. A tagged union's member appears in an error's
    location by its tag, which is a value in the data, not a key (and may also be a key: a
    `control` directive has a `control` field): each reading is tried, the one that reaches
    something wins."""
    step, rest = location[0], location[1:]
    if isinstance(container, list):
        if not isinstance(step, int) or not 0 <= step < len(container):
            return None
        found = (step,) if not rest else _path(container[step], rest)
        return None if found is None else ((step, *found) if rest else found)
    if not isinstance(container, dict):
        return None
    if step in container:
        if not rest:
            return (step,)
        inner = _path(container[step], rest)
        if inner is not None:
            return (step, *inner)
    if rest and step in container.values():
        return _path(container, rest)  # the tag of the union member this dict is
    return None


class _Dropped:
    pass


_DROPPED = _Dropped()


def _compact(data: Any) -> None:
    """Remove blanked list items, at any depth, once every error's path is resolved."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            item[:] = [each for each in item if each is not _DROPPED]
            stack.extend(item)


# Names already reported, so a deploy window logs each once per process, not once a message.
_REPORTED: set[str] = set()
_MOST_REPORTED = 1_000


def first_report(what: str, dropped: tuple[str, ...]) -> str | None:
    """A line to log about `dropped` (read from `what` of another release), or None when each
    of its names was reported already by this process. List positions are left out of a name:
    `items.3.priority` and `items.0.priority` are one name."""
    names = sorted({re.sub(r"\.\d+\b", "", path) for path in dropped})
    new = [name for name in names if f"{what}:{name}" not in _REPORTED]
    if not new or len(_REPORTED) >= _MOST_REPORTED:
        return None
    _REPORTED.update(f"{what}:{name}" for name in new)
    return f"{what} of another release: ignored what this release does not know ({', '.join(new)})"
