"""Producer ids: the allocator and InitProducerId for idempotent producers.

Ids come from blocks of 1000 whose end is persisted (``producer-ids`` in the data dir) before the
first id of a block is handed out, so no id is ever reused, even after a crash (the role of Kafka's
``ProducerIdManager`` and the controller's id blocks). The transaction coordinator draws from the
same allocator (``transactions/producer_ids.py``).

InitProducerId with a transactional id goes to the transaction coordinator: ``txn_shell.py`` owns
the route and hands only null transactional ids (idempotent producers) to ``init_producer_id`` here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import structlog
from groupd.protocol.errors import ErrorCode
from groupd.protocol.server import Request
from groupd.storage.files import write_atomically

__all__ = [
    "INIT_PRODUCER_ID_VERSIONS",
    "PRODUCER_ID_BLOCK",
    "PRODUCER_ID_FILE",
    "ProducerIdManager",
    "init_producer_id",
]

INIT_PRODUCER_ID_VERSIONS = (0, 4)
PRODUCER_ID_BLOCK = 1000
PRODUCER_ID_FILE = "producer-ids"

log = structlog.get_logger("groupd.data")


class ProducerIdManager:
    """Hands out producer ids from blocks whose end is made durable before the block is used."""

    def __init__(self, path: Path, block: int = PRODUCER_ID_BLOCK) -> None:
        self.path = path
        self.block = block
        self._next = 0
        self._block_end = 0

    def load(self) -> None:
        try:
            value = int(self.path.read_text().strip())
        except FileNotFoundError:
            value = 0
        except ValueError as exc:
            # A torn file can only come from a crash mid-rename, which os.replace rules out; refuse
            # to guess, since guessing low would hand out ids again.
            raise RuntimeError(f"{self.path} is damaged: {exc}") from exc
        self._next = self._block_end = value

    def allocate(self) -> int:
        if self._next >= self._block_end:
            end = self._next + self.block
            write_atomically(self.path, f"{end}\n")
            self._block_end = end
        pid = self._next
        self._next += 1
        return pid


def init_producer_id(ids: ProducerIdManager, req: Request) -> dict[str, Any]:
    """InitProducerId without a transactional id: a new producer id at epoch 0."""
    body = req.body
    txn = body.get("transactional_id")

    def error(code: int) -> dict[str, Any]:
        return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}

    if txn is not None:
        if txn == "":
            return error(ErrorCode.INVALID_REQUEST)
        log.info("transactional_producer_refused", transactional_id=txn, client_id=req.client_id)
        return error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    pid, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
    if (pid == -1) != (epoch == -1):
        return error(ErrorCode.INVALID_REQUEST)
    # Kafka's TransactionCoordinator: for a null transactional id "always blindly accept the
    # request and return a new producerId"; an idempotent producer bumps its epoch itself.
    try:
        new_pid = ids.allocate()
    except OSError as exc:
        log.error("producer_id_allocation_failed", error=str(exc))
        return error(ErrorCode.KAFKA_STORAGE_ERROR)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": new_pid, "producer_epoch": 0}
