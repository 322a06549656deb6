"""``python -m softkmeans.experiments [--quick] [--out DIR]``."""

import sys

from . import main

sys.exit(main())
