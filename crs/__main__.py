import sys

from .programs.cli import main

sys.exit(main())
