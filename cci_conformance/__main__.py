"""Allow ``python -m cci_conformance``."""

import sys

from .cli import main

sys.exit(main())
