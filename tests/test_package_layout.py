"""The package's shape: a few entry modules at the top, subpackages by concern, no import cycles,
and the command-line namespace read only where flags are parsed."""
import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tensorf_jt"
TOP_LEVEL_MODULES = {"__init__.py", "bootstrap.py", "errors.py"}
SUBPACKAGES = {"cli", "config", "dataLoader", "evaluation", "formats", "kernels", "models", "rendering", "runtime",
               "splats", "training", "viewer"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """Every tensorf_jt module ``path`` imports, wherever the import statement is (module level,
    under TYPE_CHECKING or inside a function): each is a dependency of the code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != "tensorf_jt":
                found.add(name)
    return found


def test_top_level_holds_only_entry_modules_and_subpackages():
    files = {path.name for path in PACKAGE.iterdir() if path.suffix == ".py"}
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert files == TOP_LEVEL_MODULES
    assert folders == SUBPACKAGES
    for folder in SUBPACKAGES:
        assert (PACKAGE / folder / "__init__.py").is_file(), folder


def test_there_are_no_import_cycles():
    known = modules()
    graph = {name: imported_modules(path, set(known)) - {name} for name, path in known.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycle = stack[stack.index(target):] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_only_the_command_line_layer_reads_the_flag_namespace():
    """Below ``cli/`` and ``config/`` every component receives typed settings (``RunConfig`` or a
    section of it), never the argparse namespace."""
    namespace_use = re.compile(r"\bargs\.|\bNamespace\b|\bvars\(args\)")
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("cli/", "config/")):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if namespace_use.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_layout_test_sees_a_cycle_and_a_namespace(tmp_path):
    """The checks above can fail: a two-module cycle and an ``args.`` read are found."""
    (tmp_path / "a.py").write_text("from tensorf_jt.b import x\n")
    (tmp_path / "b.py").write_text("def f(args):\n    from tensorf_jt.a import y\n    return args.n_iters\n")
    known = {"tensorf_jt.a", "tensorf_jt.b"}
    assert imported_modules(tmp_path / "a.py", known) == {"tensorf_jt.b"}
    assert imported_modules(tmp_path / "b.py", known) == {"tensorf_jt.a"}
    assert re.search(r"\bargs\.", (tmp_path / "b.py").read_text())
