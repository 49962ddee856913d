"""The package's import graph, read from the source (ast): no cycles between
modules nor between folders, counting the imports inside functions too (a
deferred import only hides a cycle); no private module (``_name``) imported
from outside the package that holds it; nothing of the lab imported."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tmm"
# The compiled modules: leaves (``from .. import _C`` is not an import of tmm/__init__.py).
NATIVE = {"tmm._C", "tmm._build_info"}


def _modules():
    """{dotted name: (file, is a package)} of every .py file under tmm/."""
    found = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (f, is_package)
    return found


def _imported(name, is_package, node, modules):
    """The tmm modules an Import / ImportFrom statement of module ``name`` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = name if is_package else name.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    source = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
    # "from X import y" imports the submodule X.y when there is one, else X (y a name in it)
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in modules or f"{source}.{a.name}" in NATIVE else source
            for a in node.names]


def _graph():
    modules = _modules()
    graph = {}
    for name, (f, is_package) in modules.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= {t for t in _imported(name, is_package, node, modules) if t.split(".")[0] in ("tmm", "lab")}
    return graph


def _folders(graph):
    """The graph between the package's folders and top-level modules:
    tmm.tasks.lm counts as tmm.tasks, tmm.train as itself."""
    node = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    folders = {}
    for m, targets in graph.items():
        folders.setdefault(node(m), set()).update(node(t) for t in targets if node(t) != node(m))
    return folders


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in graph or w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_cycle():
    graph = _graph()
    assert len(graph) > 50 and "tmm.models.zoo" in graph["tmm.models"]  # the reader sees the package
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(
        " <-> ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in cycles)


def test_no_two_folders_import_each_other():
    folders = _folders(_graph())
    assert {"tmm.tasks", "tmm.data", "tmm.models", "tmm.nn"} <= set(folders)
    cycles = _cycles(folders)
    assert not cycles, "folder-level import cycles: " + "; ".join(
        " <-> ".join(f"{m} -> {sorted(folders[m] & set(c))}" for m in c) for c in cycles)


def test_the_library_does_not_import_the_lab():
    wrong = sorted(f"{m} imports {t}" for m, targets in _graph().items() for t in targets if t.split(".")[0] == "lab")
    assert not wrong, wrong


def test_a_private_module_is_imported_only_inside_its_package():
    wrong = []
    for name, targets in _graph().items():
        for target in targets - NATIVE:
            parts = target.split(".")
            for i, part in enumerate(parts):
                owner = ".".join(parts[:i])
                if part.startswith("_") and not part.startswith("__") and not (name + ".").startswith(owner + "."):
                    wrong.append(f"{name} imports {target}")
    assert not wrong, wrong


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
