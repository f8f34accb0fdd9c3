"""The tree's layers: what each folder may import, no import circle, and an install that holds every module."""
import ast
import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRIES = {"run", "run_util", "tune", "export", "plot"}
FORBIDDEN = {  # folder -> top-level names its modules may not import
    "common": {"algos", "runner", "envs", "tests", "bench", *ENTRIES},
    "algos": {"runner", "tests", "bench", *ENTRIES - {"run_util"}},
    "envs": {"algos", "runner", "tests", "bench", *ENTRIES},
    "runner": {"tests", "bench", "run", "tune", "export", "plot"},
}


def _modules() -> dict[str, set[str]]:
    """Every project module outside tests/ and bench/ with the project modules it imports (anywhere in it)."""
    found: dict[str, set[str]] = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("tests", "bench", "site", "docs")]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            imported = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    imported |= {alias.name for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            found[module] = imported
    return {m: {i for i in imps if i in found and i != m} for m, imps in found.items()}


def test_each_folder_imports_only_the_layers_under_it():
    wrong = [f"{m} imports {i}" for m, imps in _modules().items() for i in imps
             if i.split(".")[0] in FORBIDDEN.get(m.split(".")[0], set())]
    assert not wrong, wrong


def test_no_import_circle():
    graph = _modules()
    shims = {m for m in graph if m.startswith("common.") and m.count(".") == 1 and len(graph[m]) == 1
             and next(iter(graph[m])).endswith("." + m.split(".")[1])}  # common.logger -> common.logs.logger
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node] - shims):
            assert state.get(nxt) != 1, "import circle: " + " -> ".join([*path[path.index(nxt):], nxt])
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_install_holds_every_top_level_module_and_package():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        setup = tomllib.load(f)["tool"]["setuptools"]
    modules = {name[:-3] for name in os.listdir(ROOT) if name.endswith(".py")}
    packages = {name for name in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, name, "__init__.py"))}
    assert set(setup["py-modules"]) == modules
    included = {p.rstrip("*") for p in setup["packages"]["find"]["include"]}
    assert included == packages - {"tests"}
