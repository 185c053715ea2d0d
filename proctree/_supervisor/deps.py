"""Dependencies between services: their conditions checked, cycles and unknown names found, start order.

Pure: names and graphs in, orders or ValueError out, so every rule is tested
on tables. A graph maps each service name to the names it depends on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

STARTED = "started"  # the dependency was spawned (its pid exists)
READY = "ready"  # its readiness was proven
COMPLETED = "completed"  # it exited with status 0 (a migration, a build)
CONDITIONS = (STARTED, READY, COMPLETED)

DependsOn = tuple[tuple[str, str], ...]


def check_depends_on(value: object, what: str = "depends_on") -> DependsOn:
    """depends_on as ((name, condition), ...) sorted by name; TypeError/ValueError for anything else.

    Accepts None, a mapping {name: "started" | "ready" | "completed"}, or an
    iterable of names (each meaning "started").
    """
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be a mapping of names to conditions or a list of names, not a string")
    pairs: list[tuple[object, object]]
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, Iterable):
        pairs = [(name, STARTED) for name in value]
    else:
        raise TypeError(f"{what} must be a mapping of names to conditions, not {type(value).__name__}")
    out: dict[str, str] = {}
    for name, condition in pairs:
        if not isinstance(name, str):
            raise TypeError(f"{what}: a service name must be a str, not {type(name).__name__}")
        if not name:
            raise ValueError(f"{what}: empty service name")
        if not isinstance(condition, str) or condition not in CONDITIONS:
            raise ValueError(
                f"{what}[{name!r}]: the condition must be one of {', '.join(CONDITIONS)}, got {condition!r}"
            )
        if name in out:
            raise ValueError(f"{what}: {name!r} is named twice")
        out[name] = condition
    return tuple(sorted(out.items()))


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A dependency cycle as [a, b, ..., a], or None. Names the graph does not hold are ignored."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path = [root]
        state[root] = 1
        stack = [iter(sorted(graph[root]))]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                state[path.pop()] = 2
                continue
            if step not in graph:
                continue
            if state.get(step) == 1:
                return path[path.index(step) :] + [step]
            if state.get(step) is None:
                state[step] = 1
                path.append(step)
                stack.append(iter(sorted(graph[step])))
    return None


def check_graph(graph: Mapping[str, Iterable[str]], known: Iterable[str] = ()) -> None:
    """Raise ValueError if a service depends on a name that is neither in graph nor known, or on a cycle."""
    graph = {name: set(deps) for name, deps in graph.items()}
    names = set(graph) | set(known)
    unknown = sorted(
        f"{name!r} depends on unknown {dep!r}" for name, deps in graph.items() for dep in deps if dep not in names
    )
    if unknown:
        raise ValueError("unknown dependencies: " + "; ".join(unknown))
    cycle = find_cycle(graph)
    if cycle is not None:
        raise ValueError("dependency cycle: " + " -> ".join(cycle))


def levels(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The names of graph in start order, as levels: each depends only on names of earlier levels (or outside graph).

    Names within a level are sorted. ValueError on a cycle.
    """
    deps = {name: {d for d in ds if d in graph} for name, ds in graph.items()}
    done: set[str] = set()
    out: list[list[str]] = []
    while len(done) < len(deps):
        level = sorted(name for name, ds in deps.items() if name not in done and ds <= done)
        if not level:
            cycle = find_cycle({n: deps[n] for n in deps if n not in done})
            raise ValueError("dependency cycle: " + " -> ".join(cycle or sorted(set(deps) - done)))
        out.append(level)
        done.update(level)
    return out


def stop_levels(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The reverse of levels(): dependents before what they depend on."""
    return list(reversed(levels(graph)))
