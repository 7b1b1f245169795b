"""One exception type for bad input, so that entry points can print it without a traceback."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input. The message names the file and line (or the config key) and what is wrong."""

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


def at(path, line: int | None = None) -> str:
    """Format a location as ``path:line`` (or just ``path``)."""
    return f"{path}:{line}" if line is not None else str(path)
