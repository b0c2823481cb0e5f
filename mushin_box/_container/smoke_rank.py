# SPDX-License-Identifier: MIT
"""Entry point of a smoke rank.

python -m mushin_box._container.smoke_rank OUT_DIR [EXPERIMENT]
"""

import sys

from mushin_box._container.smoke import main_rank

if __name__ == "__main__":
    main_rank(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
