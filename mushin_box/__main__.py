# SPDX-License-Identifier: MIT
import sys

from mushin_box.cli import main

sys.exit(main())
