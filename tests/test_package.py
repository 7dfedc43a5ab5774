"""The package's shape: imports read top-down (no cycles, none hidden in functions), inference
never imports training, and `import transformer_jax` stays light."""

import ast
import pathlib
import subprocess
import sys

import transformer_jax.data as data

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "transformer_jax"


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> tuple[set[str], list[str]]:
    """(package modules imported at module level, package imports inside functions). A
    module-level `try:` around an import (an optional extra) is still module level."""
    top, nested = set(), []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef
            )
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                names = [child.module] + [f"{child.module}.{a.name}" for a in child.names]
            else:
                visit(child, inside)
                continue
            names = [n for n in names if n.startswith("transformer_jax")]
            if names and in_function:
                nested.append(f"{_module_name(path)}: {names[0]}")
            elif names:
                top.update(names)

    visit(ast.parse(path.read_text()), False)
    return top, nested


GRAPH, NESTED = {}, []
for _path in PACKAGE.rglob("*.py"):
    _top, _nested = _imports(_path)
    GRAPH[_module_name(_path)] = _top
    NESTED += _nested
MODULES = set(GRAPH)


def _deps(module: str) -> set[str]:
    """Package modules `module` imports at load time (`from a import b` counts a.b if a module)."""
    return {name for name in GRAPH[module] if name in MODULES and name != module}


def test_no_package_import_hides_inside_a_function():
    assert NESTED == []


def test_module_imports_have_no_cycle():
    state: dict[str, int] = {}

    def visit(module, trail):
        state[module] = 1
        for dep in _deps(module):
            # A package importing its own submodules (its __init__) is not a cycle.
            if module == dep.rsplit(".", 1)[0] or dep.startswith(module + "."):
                continue
            if state.get(dep) == 1:
                raise AssertionError(" -> ".join([*trail, module, dep]))
            if dep not in state:
                visit(dep, [*trail, module])
        state[module] = 2

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [])


def test_only_the_package_main_imports_the_cli_package():
    # The command lines sit on top: nothing of the library imports them, except the package's
    # `__main__` (`python -m transformer_jax NAME`).
    importers = {
        module
        for module in MODULES
        if not module.startswith("transformer_jax.cli")
        and any(dep.startswith("transformer_jax.cli") for dep in _deps(module))
    }
    assert importers == {"transformer_jax.__main__"}


def test_inference_imports_nothing_from_training_or_tasks():
    code = (
        "import sys, transformer_jax.inference, transformer_jax.cli.translate, "
        "transformer_jax.cli.generate; "
        "print(sorted(m for m in sys.modules if m.startswith(('transformer_jax.training', "
        "'transformer_jax.tasks'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_evaluation_imports_nothing_from_training():
    # `evaluate` scores with the task's own evaluation (the one training runs), not the loop.
    code = (
        "import sys, transformer_jax.cli.evaluate; "
        "print(sorted(m for m in sys.modules if m.startswith('transformer_jax.training')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_of_the_package_does_not_load_the_training_input_pipeline():
    code = "import sys, transformer_jax; print('grain' in sys.modules, 'orbax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_input_pipelines_do_not_import_the_models():
    # A data pipeline reads the run's layout, not the model zoo (see transformer_jax.data).
    pipelines = ("translation", "lm", "bert", "classify", "images")
    code = (
        "import sys; "
        + "; ".join(f"import transformer_jax.data.{p}" for p in pipelines)
        + "; print(sorted(m for m in sys.modules if m.startswith(('transformer_jax.models', "
        "'transformer_jax.nn', 'transformer_jax.inference'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_package_names_load_on_first_use():
    code = (
        "import sys, transformer_jax as tj; before = 'transformer_jax.models' in sys.modules; "
        "print(before, tj.EncoderDecoder.__module__, 'EncoderDecoder' in dir(tj))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "transformer_jax.models.encoder_decoder.model", "True"]


def test_data_exports_resolve():
    for name in data.__all__:
        assert getattr(data, name) is not None, name
