"""``python -m goodputlab.cli``: the same as the ``goodputlab`` command."""

import sys

from . import main

sys.exit(main())
