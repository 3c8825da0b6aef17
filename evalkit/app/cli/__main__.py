"""``python -m evalkit.app.cli``: the evalkit command."""

import sys

from evalkit.app.cli import main

sys.exit(main())
