"""`python -m app ...`: the course server's command line (app/cli/commands.py lists the commands)."""

import sys

from app.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
