"""No import circle in the Python package: no module of python/l3 imports one that imports it
back, directly or through others. Every import statement counts, at module level or inside a
function (a deferred import is still a circle); the extension module `_l3` is a leaf."""

import ast

from conftest import REPO

PACKAGE = REPO / "python" / "l3"


def import_graph():
    """{module: the package's modules it imports} over the source files of python/l3."""
    top = PACKAGE.name
    known = {top} | {f"{top}.{p.name.split('.')[0]}" for p in PACKAGE.iterdir()
                     if p.suffix in (".py", ".pyi", ".so") and p.stem != "__init__"}
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        name = top if path.stem == "__init__" else f"{top}.{path.stem}"
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    base = node.module
                else:
                    assert node.level == 1, f"{path.name}: import from a parent package"
                    base = top + (f".{node.module}" if node.module else "")
                if base == top:
                    # `from . import x`: the submodule x, else a name of the package itself.
                    deps |= {f"{top}.{a.name}" if f"{top}.{a.name}" in known else top
                             for a in node.names}
                else:
                    deps.add(base)
        graph[name] = {d for d in deps if d in known and d != name}
    return graph


def test_no_import_circle():
    graph = import_graph()
    assert {"l3", "l3.cuda", "l3._handoff", "l3.sources"} <= set(graph)

    def reachable(start):
        seen, todo = set(), [start]
        while todo:
            for d in graph.get(todo.pop(), ()):
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
        return seen

    circles = sorted((a, b) for a in graph for b in graph[a] if a in reachable(b))
    assert not circles, f"modules importing each other (a imports b, b reaches a): {circles}"
