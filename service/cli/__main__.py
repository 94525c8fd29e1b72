"""``python -m service.cli``: the ``llmduel`` command line."""

import sys

from service.cli import main

sys.exit(main())
