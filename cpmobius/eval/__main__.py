"""``python -m cpmobius.eval``: the benchmark evaluation CLI (`cpmobius.eval.cli`)."""

import sys

from cpmobius.eval.cli import main

if __name__ == "__main__":
    sys.exit(main())
