"""``python -m airsspec`` runs the CLI."""

import sys

from airsspec.cli import main

sys.exit(main())
