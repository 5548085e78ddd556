"""``python -m acidstream`` runs the ``acidstream`` command line."""

import sys

from acidstream.cli.main import main

sys.exit(main())
