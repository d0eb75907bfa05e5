"""The `pipefuse` command from Python: the console script that pip puts on PATH and
`python -m pipefuse` run the C executable the package ships (site-packages/pipefuse/bin),
so the command is exactly the one a source build installs: its options, output, exit
status and signal handling."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import List, Optional, Sequence


def executable() -> str:
    """The path of the pipefuse executable: the package's own bin/pipefuse, or in a build
    tree (PYTHONPATH=<build>/python) <build>/bin/pipefuse. FileNotFoundError when neither
    exists."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "bin", "pipefuse"),
                  os.path.normpath(os.path.join(here, os.pardir, os.pardir, "bin", "pipefuse"))]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(f"the pipefuse executable is not installed with this package "
                            f"(looked for {' and '.join(candidates)})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the pipefuse command. With argv None (the console script, `python -m
    pipefuse`) the executable replaces this process with sys.argv's arguments, so Ctrl-C,
    exit status and output are the command's own. With argv given, it runs as a child
    process and main returns its exit status."""
    try:
        path = executable()
    except FileNotFoundError as e:
        print(f"pipefuse: {e}", file=sys.stderr)
        return 127
    if argv is not None:
        return subprocess.call([path] + [os.fspath(a) for a in argv])
    args: List[str] = ["pipefuse"] + sys.argv[1:]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, args)
    return 127  # not reached: execv returns only by raising
