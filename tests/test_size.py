"""scripts/size.py counts what a learner reads: checked by hand on a small tree, then held on this one."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import size  # noqa: E402  (scripts/size.py)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_closure_follows_every_import_and_counts_the_packages_on_the_way(tmp_path):
    write(tmp_path, {
        "helpers/__init__.py": '"""The package."""\n',                              # 1 line, 0 of code
        "helpers/a.py": "from .sub import b\n\n\nX = 1  # one\n",                    # 4 lines, 2 of code
        "helpers/sub/__init__.py": "",                                              # 0 lines
        "helpers/sub/b.py": 'def f():\n    """Doc\n    string."""\n    from ..c import Y\n    return Y\n',  # 5, 3
        "helpers/c.py": "Y = 2\n",                                                  # 1 line, 1 of code
        "helpers/unused.py": "import os\n# a comment\n",                            # 2 lines, 1 of code
        "notebooks/01_first.py": "import marimo\nfrom helpers.a import X\n",
        "notebooks/02_second.py": "import helpers.c\n",
        "notebooks/README.md": "not a notebook\n",
    })
    got = size.measure(tmp_path)
    assert (got.lines, got.code, got.modules) == (13, 7, 6)
    # 01 reaches a -> sub.b (through sub) -> c, and the root package: 1 + 4 + 0 + 5 + 1
    assert got.closures == {"01_first": 11, "02_second": 2}
    assert (got.mean_closure, got.max_closure, got.long_modules) == (6.5, 11, {})


def test_a_module_over_the_limit_is_named(tmp_path):
    write(tmp_path, {"helpers/__init__.py": "", "helpers/long.py": "x = 1\n" * (size.LONG_MODULE + 1)})
    assert size.measure(tmp_path).long_modules == {"helpers/long.py": size.LONG_MODULE + 1}
