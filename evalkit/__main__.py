"""``python -m evalkit``: the evalkit command."""

import sys

from evalkit.app.cli import main

sys.exit(main())
