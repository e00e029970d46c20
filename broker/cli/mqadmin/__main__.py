import sys

from broker.cli.mqadmin.main import main

sys.exit(main())
