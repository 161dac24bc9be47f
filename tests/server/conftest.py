from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.server.app import Sidecar
from tests.server.harness import address, running

if TYPE_CHECKING:  # the async stub type exists only in the generated .pyi
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub,
    )


@pytest.fixture
async def sidecar(tmp_path: Path) -> AsyncIterator[Sidecar]:
    async with running(tmp_path) as server:
        yield server


@pytest.fixture
async def stub(sidecar: Sidecar) -> AsyncIterator[CompactionServiceAsyncStub]:
    async with grpc.aio.insecure_channel(address(sidecar)) as channel:
        yield pb_grpc.CompactionServiceStub(channel)
