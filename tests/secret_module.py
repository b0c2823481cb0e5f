# SPDX-License-Identifier: MIT
"""A LightningModule that needs a token (imported by HydraDDP's other ranks too)."""

from __future__ import annotations

import os

from workflow_tasks import _h

from mushin_box.testing import TinyModule


class SecretTinyModule(TinyModule):
    """TinyModule that every rank checks received the real token (compared by hash)."""

    def __init__(self, api_token: str, lr: float = 0.05) -> None:
        super().__init__(lr=lr)
        self._token_hash = _h(api_token)

    def on_fit_start(self) -> None:
        if self._token_hash != os.environ["MUSHIN_TEST_TOKEN_HASH"]:
            raise RuntimeError(f"rank {self.global_rank}: wrong token")
