# SPDX-License-Identifier: MIT
from mushin_box.cli import main
import sys
sys.exit(main())
