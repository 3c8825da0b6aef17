"""``python -m evalkit``: the evalkit command."""

import sys

from evalkit.app.launch import main

sys.exit(main())
