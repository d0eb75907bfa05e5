"""`python -m pipefuse ARGS`: the pipefuse command (see pipefuse._cli)."""
import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
