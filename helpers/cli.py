"""Shared pieces of the command line: a parser whose errors are one line and exit 2, and output
as JSON or as a readable two-column table with units labelled."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


# The commands of ``python -m helpers``: name -> (help, add_args, run, render). Kept here, in a
# module imported once, so topic modules (helpers.capacity.cli, …) register into the same dict
# that main() reads — under ``python -m`` the running __main__ is not helpers.__main__.
COMMANDS: dict[str, tuple[str, Callable[[Any], None], Callable[[Any], dict], Callable[[dict], str]]] = {}


def command(name: str, help: str, add_args: Callable[[Any], None], render: Callable[[dict], str]):
    """Decorator registering ``run(args) -> dict`` as a command with its arguments and renderer."""
    def register(run: Callable[[Any], dict]):
        COMMANDS[name] = (help, add_args, run, render)
        return run
    return register


class CliError(Exception):
    """Bad input on the command line: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump, exit 2
        raise CliError(f"{self.prog}: {message}")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number (≥ 1), got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def table(rows: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def emit(result: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(render(result))


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
