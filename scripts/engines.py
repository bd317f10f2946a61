"""`make engines`' former command line, kept for the commands that still name it (notebook 09's `--target`): `python scripts/engines.py ARGS` is `python -m servebench record ARGS`."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from servebench.__main__ import main  # noqa: E402 - after the checkout is on the path

if __name__ == "__main__":
    sys.exit(main(["record", *sys.argv[1:]]))
