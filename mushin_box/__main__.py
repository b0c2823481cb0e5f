# SPDX-License-Identifier: MIT
import sys

from mushin_box.cli.main import main

sys.exit(main())
