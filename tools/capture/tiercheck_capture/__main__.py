"""`python -m tiercheck_capture`: the capture command."""

import sys

from .capture import main

sys.exit(main())
