"""The map stays true: ARCHITECTURE.md names every module of helpers/ with its layer, the imports
follow the layers (formulas < measurement < presentation < command lines), there is no import cycle,
and the formulas import neither torch nor matplotlib.

Imports are read from the source (every `import`, also those inside functions), not by importing.
"""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"
ARCH = ROOT / "ARCHITECTURE.md"
RANK = {"base": 0, "formulas": 1, "measure": 2, "present": 3, "interface": 4}
HEAVY = ("torch", "transformers", "matplotlib", "bitsandbytes", "marimo")
# The one formula that asks transformers for an architecture (built on the meta device, no weights).
HEAVY_ALLOWED = {("helpers.formulas.specs", "torch"), ("helpers.formulas.specs", "transformers")}



def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(HELPERS.rglob("*.py"))}


def imports(name: str) -> tuple[set[str], set[str]]:
    """The helpers modules one module imports (anywhere in it) and the third-party packages it imports."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    inside, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
            candidates = found or [target]
        elif isinstance(node, ast.Import):
            candidates = [a.name for a in node.names]
        else:
            continue
        for t in candidates:
            if t.split(".")[0] != "helpers":
                outside.add(t.split(".")[0])
                continue
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            # a module's own package (its __init__) and the package root are not edges
            if t and t != name and not name.startswith(t + ".") and t != "helpers":
                inside.add(t)
    return inside, outside


GRAPH = {n: imports(n) for n in MODULES}


def layers() -> dict[str, str]:
    rows = re.findall(r"^\| `(helpers/[\w/]+\.py)` \| (\w+) \|", ARCH.read_text(), flags=re.M)
    return {module_name(ROOT / path): layer for path, layer in rows}


def test_architecture_names_every_module_and_only_those():
    named = layers()
    assert sorted(set(MODULES) - set(named)) == [], "modules ARCHITECTURE.md's table does not name"
    assert sorted(set(named) - set(MODULES)) == [], "ARCHITECTURE.md names modules that do not exist"
    assert {v for v in named.values()} <= set(RANK), f"layers are {sorted(RANK)}"


def test_no_module_imports_a_layer_above_its_own():
    named = layers()
    upward = {(n, t) for n, (inside, _) in GRAPH.items() for t in inside if RANK[named[t]] > RANK[named[n]]}
    assert sorted(upward) == [], "imports from a lower layer up (ARCHITECTURE.md: the rule)"


def strongly_connected() -> list[frozenset[str]]:
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v][0]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    assert [sorted(c) for c in strongly_connected()] == [], "import cycles"


def test_the_formulas_import_neither_torch_nor_matplotlib():
    named = layers()
    heavy = {(n, pkg) for n, (_, outside) in GRAPH.items() if named[n] == "formulas"
             for pkg in outside if pkg in HEAVY} - HEAVY_ALLOWED
    assert sorted(heavy) == [], "a formula imports a heavy library (ARCHITECTURE.md: the rule)"


def test_importing_every_formula_loads_no_torch_or_matplotlib():
    """Imported for real, in a fresh interpreter: the formula layer stands without the heavy libraries."""
    named = layers()
    formulas = sorted(n for n, layer in named.items() if layer == "formulas")
    code = ("import sys\n" + "".join(f"import {n}\n" for n in formulas)
            + f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", f"importing the formulas loaded {r.stdout.strip()}"


def test_the_top_level_of_helpers_holds_at_most_a_dozen_modules():
    top = sorted(p.name for p in HELPERS.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, top


@pytest.mark.parametrize("name", sorted(set(re.findall(r"`(helpers(?:\.\w+)+)`", ARCH.read_text()))))
def test_every_name_architecture_md_gives_exists(name):
    """A dotted name in the text (a module, or a module's function or constant) resolves."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    pytest.fail(f"{name} does not resolve")


def notebook_packages(path: Path) -> set[str]:
    """The packages (or top-level modules) of helpers a notebook imports."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "helpers":
            parts = node.module.split(".")
            used |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            used |= {a.name.split(".")[1] for a in node.names if a.name.startswith("helpers.")}
    return used


def test_the_notebook_table_says_what_each_notebook_imports():
    rows = dict(re.findall(r"^\| `(\d\d_\w+)` \| ([\w, ]+) \|", ARCH.read_text(), flags=re.M))
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    assert sorted(rows) == [p.stem for p in notebooks]
    for p in notebooks:
        assert sorted(notebook_packages(p)) == sorted(x.strip() for x in rows[p.stem].split(",")), p.stem


TOOL = "servebench"     # the benchmark of real servers: a tool beside helpers (issue 46)


def _imports_of(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
    return out


def test_no_module_of_helpers_and_no_notebook_imports_the_benchmark_tool():
    """helpers/ and the notebooks read the tool's records and start it as a subprocess (`python -m
    servebench`); they never import it, so it can change, grow or go without touching what a learner reads."""
    files = sorted(HELPERS.rglob("*.py")) + sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    importing = [str(p.relative_to(ROOT)) for p in files if TOOL in _imports_of(p)]
    assert importing == [], f"these import {TOOL}, which only its command line and the tests may"
    assert (ROOT / TOOL / "__main__.py").exists()


def test_the_benchmark_tool_ships_beside_helpers_and_stays_small():
    """pyproject.toml packages it with helpers (08's live run on Colab and Molab), and it is at most
    1,600 lines (issue 46)."""
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(rf'include = \[[^\]]*"{TOOL}\*"', text), "pyproject.toml does not ship the tool"
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / TOOL).rglob("*.py"))
    assert lines <= 1600, f"{TOOL}/ is {lines} lines"


# the sentence builders that "numbers speak" retired: a name that promises words chosen from numbers
WORDED = re.compile(r"(_words|_reading|_verdicts?|^verdicts?|^change_words|^reading|_sentence|_sentences)$")


def test_helpers_build_no_sentence_from_a_number():
    """Numbers speak: a result is a table or a figure, and the one word of it chosen by code is the label of
    helpers.formulas.regime (at most 150 lines). No `Verdict`, no function named *_words / *_reading /
    *_verdict(s) in helpers/ or the benchmark tool."""
    regime = HELPERS / "formulas" / "regime.py"
    assert len(regime.read_text().splitlines()) <= 150
    bad = []
    for path in [*sorted(HELPERS.rglob("*.py")), *sorted((ROOT / TOOL).rglob("*.py"))]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                    (WORDED.search(node.name) or node.name == "Verdict"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
            if isinstance(node, ast.Name) and node.id == "Verdict":
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} Verdict")
    assert not bad, bad


def test_the_check_of_sentence_builders_finds_them():
    for name in ("growth_words", "bytes_reading", "speed_verdicts", "split_verdict", "change_words", "reading"):
        assert WORDED.search(name), name
    for name in ("label", "ratio", "against", "ratio_columns", "reads", "wording_table"):
        assert not WORDED.search(name), name
