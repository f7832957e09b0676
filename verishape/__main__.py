import sys

from verishape.cli.main import main

sys.exit(main())
