"""The import direction of DESIGN.md holds: pipeline ← models ← workers; the gateway and the
simulator never reach into models or workers; the pure core imports nothing with I/O; each room
of pipeline/ imports only the rooms below it; no first-party module is over 800 lines; and no
first-party modules import each other in a circle."""

from __future__ import annotations

import ast
import re
import sys
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"pipeline", "models", "workers", "gateway", "simulator", "switchboard", "bench", "tests"}

# What each package may import of Switchboard's own, and (for the core) of anything else.
ALLOWED_FIRST_PARTY = {
    "pipeline": {"pipeline"},
    "models": {"pipeline", "models"},
    "workers": {"pipeline", "models", "workers"},
    "gateway": {"pipeline", "gateway"},
    "simulator": {"simulator"},
}
# phonenumbers (libphonenumber's rules, for pipeline/privacy) is pure Python: no I/O, no clock.
# cryptography (X25519, HKDF, AES-GCM for pipeline/privacy/sealing.py) is pure computation; the
# operating system's randomness its keys and nonces are drawn from is its only input.
# pydantic_core is pydantic's own core (its validators' typed errors, PydanticCustomError, live
# there and pydantic does not re-export them).
# jsonschema: an eval case's argument schema is checked in memory (pipeline/records/evals.py), no I/O.
PIPELINE_THIRD_PARTY = {"pydantic", "pydantic_core", "phonenumbers", "cryptography", "jsonschema"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _is_allowed(name: str, allowed: set[str]) -> bool:
    return any(name == rule or name.startswith(rule + ".") for rule in allowed)


@pytest.mark.parametrize("package", sorted(ALLOWED_FIRST_PARTY))
def test_each_package_imports_only_what_its_layer_may(package: str) -> None:
    """No module reaches into a layer above or beside it."""
    offences = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in _imports(path):
            if name.split(".")[0] in FIRST_PARTY and not _is_allowed(name, ALLOWED_FIRST_PARTY[package]):
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


def test_the_pure_core_imports_only_the_standard_library_and_pydantic() -> None:
    """pipeline/ does no I/O: nothing but the standard library, pydantic and itself."""
    offences = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in PIPELINE_THIRD_PARTY or top == "pipeline":
                continue
            offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


def _first_party_imports(path: Path) -> set[str]:
    return {name for name in _imports(path) if name.split(".")[0] in FIRST_PARTY}


def test_the_core_of_a_call_names_no_provider() -> None:
    """pipeline/call/ is what every call is: it imports nothing of Switchboard's but itself, so
    no wing and no neutral rule can leak a provider into it. The session's vocabulary is a room
    of its own beside it (`pipeline/session/`), because `SessionState` names each wing's parts
    (`ToolChain`, `Compaction`, `LiveCall`): it is stored as one value in every session row, so
    those parts stay among its fields, and a room that holds it cannot say it names no provider."""
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "pipeline" / "call").rglob("*.py"))
        for name in _first_party_imports(path)
        if not _is_allowed(name, {"pipeline.call"})
    ]
    assert offences == []


@pytest.mark.parametrize("wing", ["realtime", "live"])
def test_a_wing_s_capabilities_stand_on_the_core_alone(wing: str) -> None:
    """A wing's capabilities say what its provider can do in the core's terms only: they import
    neither the other wing nor the neutral rules."""
    path = ROOT / "pipeline" / wing / "capabilities.py"
    offences = [name for name in _first_party_imports(path) if not _is_allowed(name, {"pipeline.call"})]
    assert offences == []


def test_the_gateway_s_socket_names_no_provider() -> None:
    """One socket class drives either wing's sideband: it imports neither wing."""
    path = ROOT / "gateway" / "sideband.py"
    offences = [
        name
        for name in _first_party_imports(path)
        if _is_allowed(name, {"pipeline.realtime", "pipeline.live"})
    ]
    assert offences == []


def test_no_part_of_the_gateway_imports_its_composition_root() -> None:
    """`gateway.app` builds the gateway's parts and hands each the narrow port it uses
    (`gateway.ports`): no other module of the gateway imports it."""
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if path != ROOT / "gateway" / "app.py"
        for name in _imported_modules(path)
        if _is_allowed(name, {"gateway.app"})
    ]
    assert offences == []


# The parts the composition root builds and wires; a route is handed them through its port.
GATEWAY_PARTS = {
    "gateway.app",
    "gateway.controls",
    "gateway.counters",
    "gateway.directives",
    "gateway.held_calls",
    "gateway.keys",
    "gateway.liveness",
    "gateway.metrics",
    "gateway.rpc",
    "gateway.shared_counts",
    "gateway.sideband",
    "gateway.sink",
}


def test_a_route_module_reaches_the_gateway_s_parts_only_through_its_port() -> None:
    """Each route module takes the narrow port of what it calls (`gateway.ports`), composed by
    `gateway.app`: it imports none of the parts the composition root builds."""
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "gateway" / "routes").rglob("*.py"))
        for name in _imported_modules(path)
        if _is_allowed(name, GATEWAY_PARTS)
    ]
    assert offences == []


@pytest.mark.parametrize("part", ["directives", "watch"])
def test_the_directives_and_the_watchers_hub_import_no_route_and_no_wing(part: str) -> None:
    """What the workers send is carried out, and what a call says fanned out, whoever serves
    HTTP and whichever provider the call speaks: the directives and the watchers' hub import
    no route (nor the front door) and no wing (the composition root chooses the wing)."""
    path = ROOT / "gateway" / f"{part}.py"
    elsewhere = {
        "gateway.api",
        "gateway.routes",
        "gateway.openapi",
        "gateway.phone",
        "pipeline.realtime",
        "pipeline.live",
    }
    offences = [name for name in _imported_modules(path) if _is_allowed(name, elsewhere)]
    assert offences == []


def test_only_the_composition_root_maps_a_provider_to_its_wing() -> None:
    """`pipeline.dialects` is the one neutral module that imports the wings' dialects."""
    offences = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        if path.name == "dialects.py" or path.parent.name in {"realtime", "live"}:
            continue
        for name in _first_party_imports(path):
            if _is_allowed(
                name, {f"pipeline.{wing}.{room}" for wing in WINGS for room in ("capabilities", "dialect")}
            ):
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


WINGS = ("realtime", "live")

# What a wing may import of the rest of pipeline/: what every call is (`pipeline/call`, naming
# no provider), and the session's vocabulary (`pipeline/session`: its state and steps, what
# travels in and out, timers, how a call ends, consent, refusals).
WING_FLOOR = {"pipeline.call", "pipeline.session"}
# What that floor itself stands on: besides the two, the privacy rules (a session carries its
# privacy policy and redacts what a host types) and what a phone call is (a session carries its
# phone line). None of them reaches a wing or a neutral rule.
CALL_CORE = {*WING_FLOOR, "pipeline.privacy", "pipeline.phone"}


def _imported_modules(path: Path) -> set[str]:
    """The first-party modules a file imports, `from pipeline.operator import line` as
    pipeline.operator.line."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                is_module = (ROOT / Path(*submodule.split("."))).with_suffix(".py").exists()
                names.add(submodule if is_module else node.module)
    return {name for name in names if name.split(".")[0] in FIRST_PARTY}


def _wing_of(path: Path) -> str | None:
    parts = path.relative_to(ROOT / "pipeline").parts
    return parts[0] if len(parts) > 1 and parts[0] in WINGS else None


def test_the_wings_do_not_import_each_other() -> None:
    """A wing is one provider's: what two providers share belongs in the core."""
    offences = [
        f"{path.relative_to(ROOT)} imports {name}"
        for wing in WINGS
        for path in sorted((ROOT / "pipeline" / wing).rglob("*.py"))
        for name in _imported_modules(path)
        if any(_is_allowed(name, {f"pipeline.{other}"}) for other in WINGS if other != wing)
    ]
    assert offences == []


def test_a_wing_imports_only_itself_and_what_every_call_is() -> None:
    """A wing stands on the core, never on the neutral rules that ask it."""
    offences = {
        f"{path.relative_to(ROOT)} imports {name}"
        for wing in WINGS
        for path in sorted((ROOT / "pipeline" / wing).rglob("*.py"))
        for name in _imported_modules(path)
        if name.startswith("pipeline.") and not _is_allowed(name, {f"pipeline.{wing}", *WING_FLOOR})
    }
    assert offences == set()


def test_the_neutral_modules_reach_a_wing_only_through_the_dialects() -> None:
    """`pipeline.dialects` maps a provider to its wing; nothing else outside the wings imports
    one."""
    offences = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if _wing_of(path) is None and path.name != "dialects.py"
        for name in _imported_modules(path)
        if any(_is_allowed(name, {f"pipeline.{wing}"}) for wing in WINGS)
    }
    assert offences == set()


def test_the_core_of_a_call_stands_on_itself_alone() -> None:
    """What the wings stand on reaches neither a wing nor a neutral rule: each module of the core
    imports only the core, so nothing a wing may use leads it out of it."""
    offences = {
        f"{path.relative_to(ROOT)} imports {name}"
        for room in sorted(CALL_CORE)
        for path in sorted((ROOT / Path(*room.split("."))).rglob("*.py"))
        for name in _imported_modules(path)
        if name.startswith("pipeline.") and not _is_allowed(name, CALL_CORE)
    }
    assert offences == set()


# ── hub modules ──────────────────────────────────────────────────────────────────────

# Modules every capability would otherwise edit: they only import the rooms and register them,
# and the work lives in the rooms (DESIGN.md, "Rooms: where a capability lives").
HUB_MODULES = ("gateway/routes/__init__.py", "workers/actors/__init__.py")
# What a registration may be made of: names, their attributes, calls of them, and collections.
_REGISTERING = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Tuple,
    ast.List,
    ast.Set,
    ast.Dict,
    ast.Constant,
    ast.Starred,
    ast.keyword,
    ast.Load,
    ast.Store,
)


def _does_more_than_import_and_register(statement: ast.stmt) -> str | None:
    """What a hub's top-level statement does beyond an import or a registration, if anything."""
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return None
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return None  # the docstring
    if isinstance(statement, ast.If) and ast.unparse(statement.test) == "TYPE_CHECKING":
        return next(filter(None, map(_does_more_than_import_and_register, statement.body)), None)
    if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None:
        stray = [node for node in ast.walk(statement.value) if not isinstance(node, _REGISTERING)]
        return None if not stray else f"line {statement.lineno}: {type(stray[0]).__name__}"
    return f"line {statement.lineno}: {type(statement).__name__}"


@pytest.mark.parametrize("hub", HUB_MODULES)
def test_a_hub_module_only_imports_and_registers(hub: str) -> None:
    """A hub holds no handler, class, rule or loop: imports, and assignments that register
    what it imported (`ROUTES = RouteTable(service.ROUTES, …)`)."""
    tree = ast.parse((ROOT / hub).read_text(), filename=hub)
    offences = list(filter(None, map(_does_more_than_import_and_register, tree.body)))
    assert offences == []


def test_the_hub_rule_refuses_a_handler_a_loop_and_a_lambda() -> None:
    """The rule itself: a function, a loop or a lambda in a registration is more than registering."""
    source = "import a\nX = a.f(a.B, *a.C)\ndef handler(): ...\nfor x in a.D: pass\nY = lambda: 1\n"
    found = [_does_more_than_import_and_register(s) for s in ast.parse(source).body]
    assert found == [None, None, "line 3: FunctionDef", "line 4: For", "line 5: Lambda"]


# ── the actors' rooms ────────────────────────────────────────────────────────────────

ACTORS = ROOT / "workers" / "actors"
# What every room's actors share (the queue policies, the commit path, answering the gateway).
SHARED_ACTOR_MODULES = {"workers.actors.shared"}


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def test_the_actors_package_only_imports_and_re_exports() -> None:
    """`workers/actors/__init__.py` declares the rooms' actors by importing the rooms and names
    what other code imports of them: a docstring and imports, no def, no class, no logic."""
    body = ast.parse((ACTORS / "__init__.py").read_text()).body
    offences = [
        f"line {node.lineno}: {type(node).__name__}"
        for index, node in enumerate(body)
        if not isinstance(node, ast.Import | ast.ImportFrom) and not (index == 0 and _is_docstring(node))
    ]
    assert offences == []


def test_no_actor_room_imports_another() -> None:
    """A room reaches another room's actor by its name on its queue (`ActorAddress`), so a room
    imports of the package only what the rooms share, and that imports no room."""
    offences = []
    for path in sorted(ACTORS.glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = f"workers.actors.{path.stem}"
        allowed = set() if module in SHARED_ACTOR_MODULES else SHARED_ACTOR_MODULES
        for name in _imported_modules(path):
            if _is_allowed(name, {"workers.actors"}) and name not in allowed:
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


# ── pipeline/'s rooms ────────────────────────────────────────────────────────────────

# Each room of pipeline/ (a folder; or one of the three modules that stand beside them) and the
# rooms it may import besides itself, from the ground up. A room imports only rooms listed
# before it, so no two rooms import each other and no import runs back up a floor. A new
# capability gets a room here: its pure rules in pipeline/<room>/, its rule in this table.
PIPELINE_ROOMS: dict[str, set[str]] = {
    # what every call is, naming no provider: the seam, errors, limits, tool declarations
    "call": set(),
    # the models there are: their limits, prices, voices and shutdown dates; a session's choice
    "model_catalog": {"call"},
    # sensitive values in what callers say: found, masked, sealed, gated as they stream
    "privacy": {"call"},
    # what a phone call is: its numbers, the line its SIP headers announce, the routes
    "phone": {"call"},
    # the session's vocabulary: state, step, wire, timers, ending, consent, refusals, order
    "session": {"call", "privacy", "phone"},
    # what runs the house rather than a call: settings, names, time, releases, cost, traces
    "platform": {"call", "privacy", "session", "model_catalog"},
    # the providers' wings
    "realtime": {"call", "session"},
    "live": {"call", "session"},
    # the one map from a provider to its wing
    "dialects": {"call", "session", "realtime", "live"},
    # the app's side: what it asks (bodies, pages, keys, roles, tokens) and what it is told
    "api": {"call", "privacy", "phone", "session", "dialects", "model_catalog"},
    # created → admitting → connected → listening, and the ways out of it; a session's
    # configuration from the app's request and the deployment's settings
    "admission": {"call", "privacy", "session", "platform", "dialects", "api", "model_catalog"},
    # who holds the line, what the agent says, what the model is given
    "operator": {"call", "session", "dialects", "admission"},
    # what the caller's keys do: a key pressed, digits captured for a tool
    "keypad": {"call", "privacy", "phone", "session", "dialects", "admission", "operator"},
    # calls placed out, from the dial to what they came to, and campaigns' decisions
    "outbound": {"call", "phone", "session", "dialects", "api", "keypad"},
    # agents as data: their versions, what a call names, what changed between two
    "agents": {"call", "api", "outbound"},
    # `apply`: one logged event → one step, whatever room it belongs to
    "transitions": {"call", "session", "dialects", "admission", "operator", "keypad", "outbound", "api"},
    # what is kept of a call and read afterwards: call log, desk, evals, erasure
    "records": {"call", "phone", "session", "platform", "dialects", "transitions"},
}


def _room_of(path: Path) -> str:
    """The room a file of pipeline/ is in: its folder, or its own name beside the folders."""
    parts = path.relative_to(ROOT / "pipeline").with_suffix("").parts
    return parts[0]


def test_every_module_of_the_pipeline_is_in_a_room() -> None:
    """pipeline/ holds its rooms and nothing flat beside them but the package itself: a new
    module goes into the room of its capability (or is a new room, with its rule above)."""
    strays = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "pipeline").rglob("*.py")
        if path != ROOT / "pipeline" / "__init__.py" and _room_of(path) not in PIPELINE_ROOMS
    )
    assert strays == []
    assert sorted(PIPELINE_ROOMS) == sorted(
        path.stem for path in (ROOT / "pipeline").iterdir() if path.stem in PIPELINE_ROOMS
    )


def test_each_room_of_the_pipeline_imports_only_the_rooms_below_it() -> None:
    """A room imports itself and the rooms its rule names; nothing else of pipeline/."""
    offences = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        if _room_of(path) in PIPELINE_ROOMS
        for name in _imported_modules(path)
        if name.startswith("pipeline.")
        and name.split(".")[1] not in {_room_of(path), *PIPELINE_ROOMS[_room_of(path)]}
    }
    assert offences == set()


def test_the_rooms_rules_stand_each_on_the_rooms_before_it() -> None:
    """The rules themselves are floors: each names only rooms listed before it, so together
    they admit no circle between two rooms."""
    seen: set[str] = set()
    upward = []
    for room, below in PIPELINE_ROOMS.items():
        upward += [f"{room} may import {other}" for other in sorted(below - seen)]
        seen.add(room)
    assert upward == []


# ── module size ──────────────────────────────────────────────────────────────────────

MAXIMUM_MODULE_LINES = 800
# The simulator's scripts and the benchmarks are tools, not the product's rooms.
SIZED_PACKAGES = ("pipeline", "models", "workers", "gateway", "switchboard")


def test_no_first_party_module_is_over_800_lines() -> None:
    """A module past 800 lines holds more than one room's worth: it is split by capability."""
    over = sorted(
        f"{path.relative_to(ROOT)}: {lines} lines"
        for package in SIZED_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAXIMUM_MODULE_LINES
    )
    assert over == []


# ── the row lock ─────────────────────────────────────────────────────────────────────

# A statement that takes a session's row lock (`models/records.py` takes the row FOR SHARE, in
# a statement of its own, only to wait for a transaction holding the lock: it holds up nothing).
SESSION_ROW_LOCK = re.compile(
    r"(?:FROM|JOIN)\s+sessions\b[^\"]{0,300}?FOR\s+(?:NO\s+KEY\s+)?UPDATE\b(?!\s+OF\s+(?!sessions\b))"
)


def test_the_session_row_lock_is_taken_in_one_module() -> None:
    """Only `models/sessions.py` locks a session's row: the row lock is one named context
    manager (`locked_session`), whatever module its transaction's work lives in."""
    takers = sorted(
        str(path.relative_to(ROOT))
        for package in SIZED_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if SESSION_ROW_LOCK.search(path.read_text())
    )
    assert takers == ["models/sessions.py"]


def test_the_row_lock_rule_sees_a_lock_and_not_a_lock_of_another_table() -> None:
    """The rule finds `FOR UPDATE` on `sessions`, and not on a table joined to it."""
    assert SESSION_ROW_LOCK.search("SELECT 1 FROM sessions WHERE id = %s FOR UPDATE")
    assert SESSION_ROW_LOCK.search("SELECT 1 FROM sessions s WHERE s.id = %s FOR NO KEY UPDATE")
    assert not SESSION_ROW_LOCK.search("SELECT 1 FROM sessions WHERE id = %s FOR SHARE")
    assert not SESSION_ROW_LOCK.search("SELECT 1 FROM timers t JOIN sessions s ON true FOR UPDATE OF t")


# ── import circles ───────────────────────────────────────────────────────────────────

# The packages whose modules must not import each other in a circle (the tests aside).
CYCLE_PACKAGES = ("pipeline", "models", "workers", "gateway", "simulator", "switchboard", "bench")


def _modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Every module under `packages` by its dotted name (a package by its `__init__.py`)."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module → {first-party module it imports: the line of its first such import}.

    Every import statement counts, wherever it is: at the top, inside a function, and under
    `if TYPE_CHECKING:` (a type import that hides a circle is still a circle). Relative imports
    are resolved against the module's package. `import a.b` and `from a.b import c` are edges
    to `a.b.c` when that is a module, else to `a.b` (or the innermost module it names);
    the packages above (`a`), which Python initialises first, are not edges."""

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [module_of(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    if node.level - 1 > len(parts):
                        continue
                    base = ".".join([*parts[: len(parts) - (node.level - 1)], *filter(None, [node.module])])
                else:
                    base = node.module or ""
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else module_of(base)
                    for alias in node.names
                ]
            for target in targets:
                if target is None:
                    continue
                for reached in (target, *_packages_run_by(target, name, modules)):
                    if reached != name:
                        edges[reached] = min(edges.get(reached, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def _packages_run_by(target: str, importer: str, modules: dict[str, Path]) -> list[str]:
    """The packages whose `__init__` importing `target` runs first: each one above it that has
    an `__init__.py`, except those `importer` is inside (they are running already)."""
    parts = target.split(".")
    above = [".".join(parts[:end]) for end in range(1, len(parts))]
    return [
        package
        for package in above
        if package in modules
        and modules[package].name == "__init__.py"
        and importer != package
        and not importer.startswith(package + ".")
    ]


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(components)


def _import_cycles(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each circle, written out with the line of each import in it: for every import inside a
    strongly connected component, the shortest way back round from it (a circle found from
    several of its imports is listed once)."""
    cycles: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for component in _strongly_connected(graph):
        members = set(component)
        for source in component:
            for first in sorted(target for target in graph[source] if target in members):
                # The shortest path first → … → source inside the component closes the circle.
                came_from: dict[str, str] = {}
                queue = deque([first])
                while source not in came_from:
                    module = queue.popleft()
                    for target in sorted(graph[module]):
                        if target in members and target != first and target not in came_from:
                            came_from[target] = module
                            queue.append(target)
                back = [source]
                while back[-1] != first:
                    back.append(came_from[back[-1]])
                circle = [source, *reversed(back[1:])]
                start = circle.index(min(circle))
                canonical = tuple(circle[start:] + circle[:start])
                if canonical not in seen:
                    seen.add(canonical)
                    hops = zip(canonical, (*canonical[1:], canonical[0]), strict=True)
                    cycles.append(" → ".join([*(f"{a} (line {graph[a][b]})" for a, b in hops), canonical[0]]))
    return cycles


def test_no_first_party_modules_import_each_other_in_a_circle() -> None:
    """The modules' imports (type-only and function-local ones too) form no circle."""
    cycles = _import_cycles(_import_graph(_modules(ROOT, CYCLE_PACKAGES)))
    assert not cycles, (
        "first-party modules import each other in a circle (each import's line in parentheses):\n"
        + "\n".join(cycles)
    )


def test_the_circle_finder_sees_type_only_relative_and_function_local_imports(tmp_path: Path) -> None:
    """The finder itself: imports under TYPE_CHECKING, relative ones and ones inside a function
    are edges, and `from a import b` is one to the module a.b; so a circle made of them is found.
    Importing a.b.c runs the package a.b first, an edge too, except from inside a.b (it is
    running already): a submodule does not import its own package by being imported."""
    files = {
        "app/__init__.py": "from app import ring\n",
        "app/ring.py": "import os\nfrom . import mid\nimport app.leaf\n",
        "app/mid.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from app.sub.deep import Thing\n",
        "app/sub/__init__.py": "",
        "app/sub/deep.py": "def find():\n    from ..ring import ring_of\n",
        "app/leaf.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = _import_graph(_modules(tmp_path, ("app",)))
    assert graph == {
        "app": {"app.ring": 1},
        "app.ring": {"app.mid": 2, "app.leaf": 3},
        "app.mid": {"app.sub.deep": 4, "app.sub": 4},
        "app.sub": {},
        "app.sub.deep": {"app.ring": 2},
        "app.leaf": {},
    }
    assert _import_cycles(graph) == ["app.mid (line 4) → app.sub.deep (line 2) → app.ring (line 2) → app.mid"]


def test_the_circle_finder_sees_a_package_s_init_run_by_importing_its_submodule(tmp_path: Path) -> None:
    """`from wing.events import x` runs wing/__init__.py before wing/events.py: when the
    package's own module imports the importer, that is a circle Python trips on."""
    files = {
        "core.py": "from wing.events import Heard\n",
        "wing/__init__.py": "from core import parse\n",
        "wing/events.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    modules = {"core": tmp_path / "core.py", **_modules(tmp_path, ("wing",))}
    graph = _import_graph(modules)
    assert graph == {"core": {"wing.events": 1, "wing": 1}, "wing": {"core": 1}, "wing.events": {}}
    assert _import_cycles(graph) == ["core (line 1) → wing (line 1) → core"]
