"""A TCP relay on 127.0.0.1 in front of a server, whose links fail as a network's do.

``refusing`` closes each new connection at once (a connect that fails).
``fall_silent()`` stops every open link passing bytes, either way, without
closing it: a peer gone without a FIN (a host that died, a NAT entry
dropped), which neither end of a quiet connection notices by itself.
Connections made after it pass bytes again.
"""

from __future__ import annotations

import asyncio
import contextlib


class Relay:
    """Forwards each connection to ``port`` on 127.0.0.1; ``start()`` gives its own port."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.refusing = False
        self.refused = asyncio.Event()
        """Set once a connection was closed at once for ``refusing``."""
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def fall_silent(self) -> None:
        """Every open link stops passing bytes; its sockets stay open."""
        for pump in list(self._pumps):
            pump.cancel()

    async def close(self) -> None:
        self.fall_silent()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for writer in self._writers:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        if self.refusing:
            self.refused.set()
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers.append(upstream_writer)
        for source, sink in ((reader, upstream_writer), (upstream_reader, writer)):
            pump = asyncio.create_task(_pump(source, sink))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy ``source`` to ``sink`` until it ends, then end ``sink`` too."""
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:
        pass
    sink.close()
