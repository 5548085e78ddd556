"""``python -m cli`` runs the ``acidstream`` command line."""

import sys

from cli.main import main

sys.exit(main())
