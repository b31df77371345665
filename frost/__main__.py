import sys

from frost.cli import main

sys.exit(main())
