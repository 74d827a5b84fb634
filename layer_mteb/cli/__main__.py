"""``python -m layer_mteb.cli``: the ``layer-mteb`` command."""

import sys

from layer_mteb.cli.main import main

sys.exit(main())
