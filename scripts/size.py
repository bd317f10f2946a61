"""How much a learner has to read: helpers/'s lines, and each notebook's import closure; beside them the
benchmark tool (servebench/), scripts/ and the three together.

A notebook's closure is every module of helpers/ it reaches by following every `helpers` import — at
the top of a file or inside a function — together with the packages (their __init__.py) those modules
sit in, since Python runs them on the way. Lines are counted as they stand; "code" leaves out blank
lines, comments and docstrings.

    python scripts/size.py            # a table
    python scripts/size.py --json     # the same figures as JSON (what `make size` writes)
"""
from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = "servebench"  # the benchmark of real servers, a tool beside helpers
LONG_MODULE = 450  # lines: a module longer than this should be split by topic


def module_file(root: Path, name: str) -> Path | None:
    """The file of a dotted module name under root, or None when it is not a module of the tree."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def imported(root: Path, path: Path, name: str, package: str = "helpers") -> set[str]:
    """The modules of `package` that the file at path (module `name`) imports, anywhere in it."""
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                module = ".".join(parts + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from helpers.x import y` imports y as a module when there is one
            targets = [module] + [f"{module}.{a.name}" for a in node.names
                                  if module_file(root, f"{module}.{a.name}")]
        else:
            continue
        found |= {t for t in targets if t.split(".")[0] == package}
    return found


def closure(root: Path, starts: set[str]) -> set[str]:
    """Every module reached from starts, with the packages each one sits in."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        path = module_file(root, name)
        if path is None or name in seen:
            continue
        seen.add(name)
        todo += sorted(imported(root, path, name) - seen)
    return seen


def code_lines(path: Path) -> int:
    """Lines that are neither blank, nor a comment, nor part of a docstring."""
    source = path.read_text()
    docs: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docs.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


@dataclass(frozen=True)
class Size:
    lines: int                    # helpers/, every line
    code: int                     # helpers/, without blanks, comments and docstrings
    modules: int
    closures: dict[str, int]      # notebook -> lines its imports reach
    mean_closure: float
    max_closure: int
    long_modules: dict[str, int]  # module -> lines, those over LONG_MODULE
    tool: int = 0                 # servebench/, every line
    scripts: int = 0              # scripts/*.py, every line
    total: int = 0                # helpers/ + servebench/ + scripts/


def measure(root: Path = ROOT) -> Size:
    files = sorted((root / "helpers").rglob("*.py"))
    closures = {}
    for notebook in sorted((root / "notebooks").glob("[0-9][0-9]_*.py")):
        reached = closure(root, imported(root, notebook, notebook.stem))
        closures[notebook.stem] = sum(lines(module_file(root, m)) for m in reached)
    long = {str(p.relative_to(root)): lines(p) for p in files if lines(p) > LONG_MODULE}
    helpers, tool = sum(map(lines, files)), sum(map(lines, (root / TOOL).rglob("*.py")))
    scripts = sum(map(lines, (root / "scripts").glob("*.py")))
    return Size(lines=helpers, code=sum(map(code_lines, files)), modules=len(files),
                closures=closures,
                mean_closure=round(sum(closures.values()) / len(closures), 1) if closures else 0.0,
                max_closure=max(closures.values(), default=0), long_modules=long,
                tool=tool, scripts=scripts, total=helpers + tool + scripts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    size = measure()
    if args.json:
        print(json.dumps(asdict(size), indent=2))
        return 0
    print(f"helpers/: {size.lines:,} lines ({size.code:,} of code) in {size.modules} modules")
    print(f"{TOOL}/: {size.tool:,} lines; scripts/: {size.scripts:,} lines; helpers/ + {TOOL}/ + scripts/: {size.total:,}")
    for name, n in size.closures.items():
        print(f"  {name:32s} {n:7,}")
    print(f"  {'mean':32s} {size.mean_closure:9,.1f}\n  {'max':32s} {size.max_closure:7,}")
    for name, n in size.long_modules.items():
        print(f"over {LONG_MODULE} lines: {name} ({n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
