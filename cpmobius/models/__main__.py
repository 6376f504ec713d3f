"""``python -m cpmobius.models``: see `cpmobius.models.cli`."""

import sys

from cpmobius.models.cli import main

sys.exit(main())
