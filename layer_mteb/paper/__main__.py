"""``python -m layer_mteb.paper``: see :mod:`layer_mteb.paper.reproduce`."""

import sys

from layer_mteb.paper.reproduce import main

sys.exit(main())
