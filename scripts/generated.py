"""Files with a generated block: replace the block, or with `--check` fail when it is stale."""

import sys
from collections.abc import Callable
from pathlib import Path


def replace_between(text: str, begin: str, end: str, content: str) -> str:
    """`text` with what lies between the markers `begin` and `end` replaced by `content` (appended, with the
    markers, when `text` has no `begin` yet)."""
    if begin not in text:
        return f"{text.rstrip()}\n\n{begin}{content}{end}\n"
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}{content}{end}{tail}"


def update(path: Path, render: Callable[[str], str], command: str) -> int:
    """Write `render(text of path)` to `path`; with `--check` in argv, return 1 if that would change it."""
    current = path.read_text()
    wanted = render(current)
    if "--check" in sys.argv:
        if current != wanted:
            print(f"the generated part of {path.name} is stale: run {command}")
            return 1
        return 0
    path.write_text(wanted)
    return 0
