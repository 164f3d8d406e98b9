import sys

from migration.demo.run import main

sys.exit(main())
