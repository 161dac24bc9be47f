"""The baseline: a bare grpc.aio server echoing raw bytes, no proto, no store.

``python -m bench.echo`` runs it as a process of its own (the as-deployed
baseline, see ``bench.deployed``): it prints its address on stdout, then
serves until its stdin closes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import grpc

SERVICE = "bench.Echo"
STREAM = f"/{SERVICE}/Stream"
UNARY = f"/{SERVICE}/Unary"
CANNED = f"/{SERVICE}/Canned"


async def _stream(
    requests: AsyncIterator[bytes], _context: grpc.aio.ServicerContext[bytes, bytes]
) -> AsyncIterator[bytes]:
    async for message in requests:
        yield message


async def _unary(request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    return request


def _canned(reply: bytes) -> Callable[[bytes, grpc.aio.ServicerContext[bytes, bytes]], object]:
    async def handler(_request: bytes, _context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return reply

    return handler


@asynccontextmanager
async def echo_server(canned_reply: bytes = b"") -> AsyncIterator[str]:
    """An echo server on 127.0.0.1 and a free port; yields its address.

    ``Stream`` echoes every message, ``Unary`` echoes its request, ``Canned``
    answers any request with ``canned_reply``.
    """
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Stream": grpc.stream_stream_rpc_method_handler(_stream),
            "Unary": grpc.unary_unary_rpc_method_handler(_unary),
            "Canned": grpc.unary_unary_rpc_method_handler(_canned(canned_reply)),
        },
    )
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 16 << 20),
            ("grpc.max_send_message_length", 16 << 20),
        ]
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def _main() -> None:
    async with echo_server() as address:
        print(address, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(_main())
