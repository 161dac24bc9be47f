"""The API's descriptors with their documentation, served by reflection.

The generated modules carry descriptors without source info, and grpc's
reflection servicer copies descriptors in a way that drops it anyway, so
``grpcurl describe`` showed no comments. ``scripts/gen_protos.py`` also
writes the whole API as a descriptor set with source info; the reflection
servicer here answers with those files, so every field's documentation from
the ``.proto`` files reaches ``grpcurl describe``. It also serves the
``google.rpc`` error details the API's errors carry, which no service names,
so that a client resolving an ``Any`` by reflection (grpcurl) can print them.
The pool is built on the first reflection call: a server nobody inspects
never holds it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha._async import ReflectionServicer

DESCRIPTORS = "descriptors.binpb"


class DocumentedReflection(ReflectionServicer):  # type: ignore[misc]
    """Reflection over a pool, answering with the documented form of each file it has."""

    def __init__(self, service_names: tuple[str, ...]) -> None:
        data = resources.files("sidecar.gen").joinpath(DESCRIPTORS).read_bytes()
        pool = descriptor_pool.DescriptorPool()
        self._documented: dict[str, bytes] = {}
        for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
            pool.Add(file)
            self._documented[file.name] = file.SerializeToString()
        # The error details every failed call carries (google.rpc.BadRequest, ErrorInfo...):
        # served too, so that grpcurl decodes them rather than printing base64.
        for descriptor in (
            health_pb2.DESCRIPTOR,
            reflection_pb2.DESCRIPTOR,
            error_details_pb2.DESCRIPTOR,
            status_pb2.DESCRIPTOR,
        ):
            _add(pool, descriptor, self._documented)
        super().__init__(service_names, pool=pool)

    def _answer(self, descriptor: FileDescriptor, request: Any) -> Any:
        files: dict[str, bytes] = {}
        pending = [descriptor]
        while pending:
            file = pending.pop()
            if file.name not in files:
                files[file.name] = self._documented[file.name]
                pending.extend(file.dependencies)
        return reflection_pb2.ServerReflectionResponse(
            file_descriptor_response=reflection_pb2.FileDescriptorResponse(
                file_descriptor_proto=list(files.values())
            ),
            original_request=request,
        )

    def _file_by_filename(self, request: Any, filename: str) -> Any:
        try:
            return self._answer(self._pool.FindFileByName(filename), request)
        except KeyError:
            return super()._file_by_filename(request, filename)

    def _file_containing_symbol(self, request: Any, fully_qualified_name: str) -> Any:
        try:
            return self._answer(self._pool.FindFileContainingSymbol(fully_qualified_name), request)
        except KeyError:
            return super()._file_containing_symbol(request, fully_qualified_name)


class _BuiltOnFirstCall(reflection_pb2_grpc.ServerReflectionServicer):  # type: ignore[misc]
    """``DocumentedReflection``, built when the first reflection call comes, not at start.

    Its pool and documented files are about 1 MiB of a server at rest that only
    tools such as ``grpcurl`` ever ask for; building them takes a few ms.
    """

    def __init__(self, service_names: tuple[str, ...]) -> None:
        self._service_names = service_names
        self._servicer: DocumentedReflection | None = None

    async def ServerReflectionInfo(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        if self._servicer is None:
            self._servicer = DocumentedReflection(self._service_names)
        async for response in self._servicer.ServerReflectionInfo(requests, context):
            yield response


def enable_documented_reflection(service_names: tuple[str, ...], server: grpc.aio.Server) -> None:
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(
        _BuiltOnFirstCall(service_names), server
    )


def _add(
    pool: descriptor_pool.DescriptorPool, file: FileDescriptor, added: dict[str, bytes]
) -> None:
    """``file`` and what it imports, dependencies first, each once."""
    if file.name in added:
        return
    for dependency in file.dependencies:
        _add(pool, dependency, added)
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    pool.Add(proto)
    added[file.name] = proto.SerializeToString()
