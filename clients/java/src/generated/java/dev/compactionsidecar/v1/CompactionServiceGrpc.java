package dev.compactionsidecar.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Owns AI-agent conversation context: a versioned event log per session,
 * compacted without breaking a turn or a tool-call/tool-result pair. Nothing
 * is deleted: archived events stay listable and searchable.
 * </pre>
 */
@javax.annotation.Generated(
    value = "by gRPC proto compiler (version 1.41.3)",
    comments = "Source: compaction/v1/compaction_service.proto")
@io.grpc.stub.annotations.GrpcGenerated
public final class CompactionServiceGrpc {

  private CompactionServiceGrpc() {}

  public static final String SERVICE_NAME = "compaction.v1.CompactionService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.CreateSessionRequest,
      dev.compactionsidecar.v1.Session> getCreateSessionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateSession",
      requestType = dev.compactionsidecar.v1.CreateSessionRequest.class,
      responseType = dev.compactionsidecar.v1.Session.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.CreateSessionRequest,
      dev.compactionsidecar.v1.Session> getCreateSessionMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.CreateSessionRequest, dev.compactionsidecar.v1.Session> getCreateSessionMethod;
    if ((getCreateSessionMethod = CompactionServiceGrpc.getCreateSessionMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getCreateSessionMethod = CompactionServiceGrpc.getCreateSessionMethod) == null) {
          CompactionServiceGrpc.getCreateSessionMethod = getCreateSessionMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.CreateSessionRequest, dev.compactionsidecar.v1.Session>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateSession"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.CreateSessionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.Session.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("CreateSession"))
              .build();
        }
      }
    }
    return getCreateSessionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.GetSessionRequest,
      dev.compactionsidecar.v1.Session> getGetSessionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetSession",
      requestType = dev.compactionsidecar.v1.GetSessionRequest.class,
      responseType = dev.compactionsidecar.v1.Session.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.GetSessionRequest,
      dev.compactionsidecar.v1.Session> getGetSessionMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.GetSessionRequest, dev.compactionsidecar.v1.Session> getGetSessionMethod;
    if ((getGetSessionMethod = CompactionServiceGrpc.getGetSessionMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getGetSessionMethod = CompactionServiceGrpc.getGetSessionMethod) == null) {
          CompactionServiceGrpc.getGetSessionMethod = getGetSessionMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.GetSessionRequest, dev.compactionsidecar.v1.Session>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetSession"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.GetSessionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.Session.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("GetSession"))
              .build();
        }
      }
    }
    return getGetSessionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListSessionsRequest,
      dev.compactionsidecar.v1.ListSessionsResponse> getListSessionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListSessions",
      requestType = dev.compactionsidecar.v1.ListSessionsRequest.class,
      responseType = dev.compactionsidecar.v1.ListSessionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListSessionsRequest,
      dev.compactionsidecar.v1.ListSessionsResponse> getListSessionsMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListSessionsRequest, dev.compactionsidecar.v1.ListSessionsResponse> getListSessionsMethod;
    if ((getListSessionsMethod = CompactionServiceGrpc.getListSessionsMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getListSessionsMethod = CompactionServiceGrpc.getListSessionsMethod) == null) {
          CompactionServiceGrpc.getListSessionsMethod = getListSessionsMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.ListSessionsRequest, dev.compactionsidecar.v1.ListSessionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListSessions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.ListSessionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.ListSessionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("ListSessions"))
              .build();
        }
      }
    }
    return getListSessionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.UpdateSessionRequest,
      dev.compactionsidecar.v1.Session> getUpdateSessionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "UpdateSession",
      requestType = dev.compactionsidecar.v1.UpdateSessionRequest.class,
      responseType = dev.compactionsidecar.v1.Session.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.UpdateSessionRequest,
      dev.compactionsidecar.v1.Session> getUpdateSessionMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.UpdateSessionRequest, dev.compactionsidecar.v1.Session> getUpdateSessionMethod;
    if ((getUpdateSessionMethod = CompactionServiceGrpc.getUpdateSessionMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getUpdateSessionMethod = CompactionServiceGrpc.getUpdateSessionMethod) == null) {
          CompactionServiceGrpc.getUpdateSessionMethod = getUpdateSessionMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.UpdateSessionRequest, dev.compactionsidecar.v1.Session>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "UpdateSession"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.UpdateSessionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.Session.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("UpdateSession"))
              .build();
        }
      }
    }
    return getUpdateSessionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.DeleteSessionRequest,
      dev.compactionsidecar.v1.DeleteSessionResponse> getDeleteSessionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteSession",
      requestType = dev.compactionsidecar.v1.DeleteSessionRequest.class,
      responseType = dev.compactionsidecar.v1.DeleteSessionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.DeleteSessionRequest,
      dev.compactionsidecar.v1.DeleteSessionResponse> getDeleteSessionMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.DeleteSessionRequest, dev.compactionsidecar.v1.DeleteSessionResponse> getDeleteSessionMethod;
    if ((getDeleteSessionMethod = CompactionServiceGrpc.getDeleteSessionMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getDeleteSessionMethod = CompactionServiceGrpc.getDeleteSessionMethod) == null) {
          CompactionServiceGrpc.getDeleteSessionMethod = getDeleteSessionMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.DeleteSessionRequest, dev.compactionsidecar.v1.DeleteSessionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteSession"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.DeleteSessionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.DeleteSessionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("DeleteSession"))
              .build();
        }
      }
    }
    return getDeleteSessionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.AppendEventsRequest,
      dev.compactionsidecar.v1.AppendEventsResponse> getAppendEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AppendEvents",
      requestType = dev.compactionsidecar.v1.AppendEventsRequest.class,
      responseType = dev.compactionsidecar.v1.AppendEventsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.AppendEventsRequest,
      dev.compactionsidecar.v1.AppendEventsResponse> getAppendEventsMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.AppendEventsRequest, dev.compactionsidecar.v1.AppendEventsResponse> getAppendEventsMethod;
    if ((getAppendEventsMethod = CompactionServiceGrpc.getAppendEventsMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getAppendEventsMethod = CompactionServiceGrpc.getAppendEventsMethod) == null) {
          CompactionServiceGrpc.getAppendEventsMethod = getAppendEventsMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.AppendEventsRequest, dev.compactionsidecar.v1.AppendEventsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AppendEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.AppendEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.AppendEventsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("AppendEvents"))
              .build();
        }
      }
    }
    return getAppendEventsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.StreamEventsRequest,
      dev.compactionsidecar.v1.StreamEventsResponse> getStreamEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "StreamEvents",
      requestType = dev.compactionsidecar.v1.StreamEventsRequest.class,
      responseType = dev.compactionsidecar.v1.StreamEventsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.StreamEventsRequest,
      dev.compactionsidecar.v1.StreamEventsResponse> getStreamEventsMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.StreamEventsRequest, dev.compactionsidecar.v1.StreamEventsResponse> getStreamEventsMethod;
    if ((getStreamEventsMethod = CompactionServiceGrpc.getStreamEventsMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getStreamEventsMethod = CompactionServiceGrpc.getStreamEventsMethod) == null) {
          CompactionServiceGrpc.getStreamEventsMethod = getStreamEventsMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.StreamEventsRequest, dev.compactionsidecar.v1.StreamEventsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "StreamEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.StreamEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.StreamEventsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("StreamEvents"))
              .build();
        }
      }
    }
    return getStreamEventsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.GetContextRequest,
      dev.compactionsidecar.v1.GetContextResponse> getGetContextMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetContext",
      requestType = dev.compactionsidecar.v1.GetContextRequest.class,
      responseType = dev.compactionsidecar.v1.GetContextResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.GetContextRequest,
      dev.compactionsidecar.v1.GetContextResponse> getGetContextMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.GetContextRequest, dev.compactionsidecar.v1.GetContextResponse> getGetContextMethod;
    if ((getGetContextMethod = CompactionServiceGrpc.getGetContextMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getGetContextMethod = CompactionServiceGrpc.getGetContextMethod) == null) {
          CompactionServiceGrpc.getGetContextMethod = getGetContextMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.GetContextRequest, dev.compactionsidecar.v1.GetContextResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetContext"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.GetContextRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.GetContextResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("GetContext"))
              .build();
        }
      }
    }
    return getGetContextMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.CompactRequest,
      dev.compactionsidecar.v1.CompactResponse> getCompactMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Compact",
      requestType = dev.compactionsidecar.v1.CompactRequest.class,
      responseType = dev.compactionsidecar.v1.CompactResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.CompactRequest,
      dev.compactionsidecar.v1.CompactResponse> getCompactMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.CompactRequest, dev.compactionsidecar.v1.CompactResponse> getCompactMethod;
    if ((getCompactMethod = CompactionServiceGrpc.getCompactMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getCompactMethod = CompactionServiceGrpc.getCompactMethod) == null) {
          CompactionServiceGrpc.getCompactMethod = getCompactMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.CompactRequest, dev.compactionsidecar.v1.CompactResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Compact"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.CompactRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.CompactResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("Compact"))
              .build();
        }
      }
    }
    return getCompactMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.WatchSessionRequest,
      dev.compactionsidecar.v1.WatchSessionResponse> getWatchSessionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "WatchSession",
      requestType = dev.compactionsidecar.v1.WatchSessionRequest.class,
      responseType = dev.compactionsidecar.v1.WatchSessionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.WatchSessionRequest,
      dev.compactionsidecar.v1.WatchSessionResponse> getWatchSessionMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.WatchSessionRequest, dev.compactionsidecar.v1.WatchSessionResponse> getWatchSessionMethod;
    if ((getWatchSessionMethod = CompactionServiceGrpc.getWatchSessionMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getWatchSessionMethod = CompactionServiceGrpc.getWatchSessionMethod) == null) {
          CompactionServiceGrpc.getWatchSessionMethod = getWatchSessionMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.WatchSessionRequest, dev.compactionsidecar.v1.WatchSessionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "WatchSession"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.WatchSessionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.WatchSessionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("WatchSession"))
              .build();
        }
      }
    }
    return getWatchSessionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListEventsRequest,
      dev.compactionsidecar.v1.ListEventsResponse> getListEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListEvents",
      requestType = dev.compactionsidecar.v1.ListEventsRequest.class,
      responseType = dev.compactionsidecar.v1.ListEventsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListEventsRequest,
      dev.compactionsidecar.v1.ListEventsResponse> getListEventsMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListEventsRequest, dev.compactionsidecar.v1.ListEventsResponse> getListEventsMethod;
    if ((getListEventsMethod = CompactionServiceGrpc.getListEventsMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getListEventsMethod = CompactionServiceGrpc.getListEventsMethod) == null) {
          CompactionServiceGrpc.getListEventsMethod = getListEventsMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.ListEventsRequest, dev.compactionsidecar.v1.ListEventsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.ListEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.ListEventsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("ListEvents"))
              .build();
        }
      }
    }
    return getListEventsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.SearchEventsRequest,
      dev.compactionsidecar.v1.SearchEventsResponse> getSearchEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SearchEvents",
      requestType = dev.compactionsidecar.v1.SearchEventsRequest.class,
      responseType = dev.compactionsidecar.v1.SearchEventsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.SearchEventsRequest,
      dev.compactionsidecar.v1.SearchEventsResponse> getSearchEventsMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.SearchEventsRequest, dev.compactionsidecar.v1.SearchEventsResponse> getSearchEventsMethod;
    if ((getSearchEventsMethod = CompactionServiceGrpc.getSearchEventsMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getSearchEventsMethod = CompactionServiceGrpc.getSearchEventsMethod) == null) {
          CompactionServiceGrpc.getSearchEventsMethod = getSearchEventsMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.SearchEventsRequest, dev.compactionsidecar.v1.SearchEventsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SearchEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.SearchEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.SearchEventsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("SearchEvents"))
              .build();
        }
      }
    }
    return getSearchEventsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListCompactionsRequest,
      dev.compactionsidecar.v1.ListCompactionsResponse> getListCompactionsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListCompactions",
      requestType = dev.compactionsidecar.v1.ListCompactionsRequest.class,
      responseType = dev.compactionsidecar.v1.ListCompactionsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListCompactionsRequest,
      dev.compactionsidecar.v1.ListCompactionsResponse> getListCompactionsMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.ListCompactionsRequest, dev.compactionsidecar.v1.ListCompactionsResponse> getListCompactionsMethod;
    if ((getListCompactionsMethod = CompactionServiceGrpc.getListCompactionsMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getListCompactionsMethod = CompactionServiceGrpc.getListCompactionsMethod) == null) {
          CompactionServiceGrpc.getListCompactionsMethod = getListCompactionsMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.ListCompactionsRequest, dev.compactionsidecar.v1.ListCompactionsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListCompactions"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.ListCompactionsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.ListCompactionsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("ListCompactions"))
              .build();
        }
      }
    }
    return getListCompactionsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.compactionsidecar.v1.RestoreCompactionRequest,
      dev.compactionsidecar.v1.RestoreCompactionResponse> getRestoreCompactionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RestoreCompaction",
      requestType = dev.compactionsidecar.v1.RestoreCompactionRequest.class,
      responseType = dev.compactionsidecar.v1.RestoreCompactionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.compactionsidecar.v1.RestoreCompactionRequest,
      dev.compactionsidecar.v1.RestoreCompactionResponse> getRestoreCompactionMethod() {
    io.grpc.MethodDescriptor<dev.compactionsidecar.v1.RestoreCompactionRequest, dev.compactionsidecar.v1.RestoreCompactionResponse> getRestoreCompactionMethod;
    if ((getRestoreCompactionMethod = CompactionServiceGrpc.getRestoreCompactionMethod) == null) {
      synchronized (CompactionServiceGrpc.class) {
        if ((getRestoreCompactionMethod = CompactionServiceGrpc.getRestoreCompactionMethod) == null) {
          CompactionServiceGrpc.getRestoreCompactionMethod = getRestoreCompactionMethod =
              io.grpc.MethodDescriptor.<dev.compactionsidecar.v1.RestoreCompactionRequest, dev.compactionsidecar.v1.RestoreCompactionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RestoreCompaction"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.RestoreCompactionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.compactionsidecar.v1.RestoreCompactionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new CompactionServiceMethodDescriptorSupplier("RestoreCompaction"))
              .build();
        }
      }
    }
    return getRestoreCompactionMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static CompactionServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CompactionServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CompactionServiceStub>() {
        @java.lang.Override
        public CompactionServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CompactionServiceStub(channel, callOptions);
        }
      };
    return CompactionServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static CompactionServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CompactionServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CompactionServiceBlockingStub>() {
        @java.lang.Override
        public CompactionServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CompactionServiceBlockingStub(channel, callOptions);
        }
      };
    return CompactionServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static CompactionServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<CompactionServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<CompactionServiceFutureStub>() {
        @java.lang.Override
        public CompactionServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new CompactionServiceFutureStub(channel, callOptions);
        }
      };
    return CompactionServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Owns AI-agent conversation context: a versioned event log per session,
   * compacted without breaking a turn or a tool-call/tool-result pair. Nothing
   * is deleted: archived events stay listable and searchable.
   * </pre>
   */
  public static abstract class CompactionServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Creates a session. ALREADY_EXISTS if the id is taken.
     * </pre>
     */
    public void createSession(dev.compactionsidecar.v1.CreateSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateSessionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns a session's header. NOT_FOUND if absent.
     * </pre>
     */
    public void getSession(dev.compactionsidecar.v1.GetSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetSessionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists sessions in id order, filtered by labels.
     * </pre>
     */
    public void listSessions(dev.compactionsidecar.v1.ListSessionsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListSessionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListSessionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Replaces a session's policy and/or labels, as named by update_mask.
     * </pre>
     */
    public void updateSession(dev.compactionsidecar.v1.UpdateSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpdateSessionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a session and its whole log.
     * </pre>
     */
    public void deleteSession(dev.compactionsidecar.v1.DeleteSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.DeleteSessionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteSessionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Appends a batch of events in one transaction, then compacts if the
     * session's trigger fires.
     * </pre>
     */
    public void appendEvents(dev.compactionsidecar.v1.AppendEventsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.AppendEventsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAppendEventsMethod(), responseObserver);
    }

    /**
     * <pre>
     * The fast path: a stream of appends, each acknowledged by request_id, with
     * background compaction results interleaved. A bad request gets an error
     * response and does not end the stream.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.StreamEventsRequest> streamEvents(
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.StreamEventsResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getStreamEventsMethod(), responseObserver);
    }

    /**
     * <pre>
     * The compacted context to send to the model: the active window, in log order.
     * </pre>
     */
    public void getContext(dev.compactionsidecar.v1.GetContextRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.GetContextResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetContextMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs a compaction pass now and waits for its result.
     * </pre>
     */
    public void compact(dev.compactionsidecar.v1.CompactRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.CompactResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCompactMethod(), responseObserver);
    }

    /**
     * <pre>
     * Streams every compaction result of a session as it lands. Ends with
     * NOT_FOUND when the session is deleted (or deleted and created again).
     * </pre>
     */
    public void watchSession(dev.compactionsidecar.v1.WatchSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.WatchSessionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getWatchSessionMethod(), responseObserver);
    }

    /**
     * <pre>
     * The whole log, archived events included, in log order.
     * </pre>
     */
    public void listEvents(dev.compactionsidecar.v1.ListEventsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListEventsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListEventsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Full-text search over archived (and optionally active) events.
     * </pre>
     */
    public void searchEvents(dev.compactionsidecar.v1.SearchEventsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.SearchEventsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSearchEventsMethod(), responseObserver);
    }

    /**
     * <pre>
     * The session's compaction history, newest first: what each pass archived,
     * cleared and inserted, and whether it was restored.
     * </pre>
     */
    public void listCompactions(dev.compactionsidecar.v1.ListCompactionsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListCompactionsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListCompactionsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Undoes the newest compaction not yet restored: what it archived is active
     * again in place, what it cleared is uncleared, the summary it inserted is
     * archived. Nothing is deleted; the restore is itself recorded and
     * published to watchers.
     * </pre>
     */
    public void restoreCompaction(dev.compactionsidecar.v1.RestoreCompactionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.RestoreCompactionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRestoreCompactionMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getCreateSessionMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.CreateSessionRequest,
                dev.compactionsidecar.v1.Session>(
                  this, METHODID_CREATE_SESSION)))
          .addMethod(
            getGetSessionMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.GetSessionRequest,
                dev.compactionsidecar.v1.Session>(
                  this, METHODID_GET_SESSION)))
          .addMethod(
            getListSessionsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.ListSessionsRequest,
                dev.compactionsidecar.v1.ListSessionsResponse>(
                  this, METHODID_LIST_SESSIONS)))
          .addMethod(
            getUpdateSessionMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.UpdateSessionRequest,
                dev.compactionsidecar.v1.Session>(
                  this, METHODID_UPDATE_SESSION)))
          .addMethod(
            getDeleteSessionMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.DeleteSessionRequest,
                dev.compactionsidecar.v1.DeleteSessionResponse>(
                  this, METHODID_DELETE_SESSION)))
          .addMethod(
            getAppendEventsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.AppendEventsRequest,
                dev.compactionsidecar.v1.AppendEventsResponse>(
                  this, METHODID_APPEND_EVENTS)))
          .addMethod(
            getStreamEventsMethod(),
            io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.StreamEventsRequest,
                dev.compactionsidecar.v1.StreamEventsResponse>(
                  this, METHODID_STREAM_EVENTS)))
          .addMethod(
            getGetContextMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.GetContextRequest,
                dev.compactionsidecar.v1.GetContextResponse>(
                  this, METHODID_GET_CONTEXT)))
          .addMethod(
            getCompactMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.CompactRequest,
                dev.compactionsidecar.v1.CompactResponse>(
                  this, METHODID_COMPACT)))
          .addMethod(
            getWatchSessionMethod(),
            io.grpc.stub.ServerCalls.asyncServerStreamingCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.WatchSessionRequest,
                dev.compactionsidecar.v1.WatchSessionResponse>(
                  this, METHODID_WATCH_SESSION)))
          .addMethod(
            getListEventsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.ListEventsRequest,
                dev.compactionsidecar.v1.ListEventsResponse>(
                  this, METHODID_LIST_EVENTS)))
          .addMethod(
            getSearchEventsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.SearchEventsRequest,
                dev.compactionsidecar.v1.SearchEventsResponse>(
                  this, METHODID_SEARCH_EVENTS)))
          .addMethod(
            getListCompactionsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.ListCompactionsRequest,
                dev.compactionsidecar.v1.ListCompactionsResponse>(
                  this, METHODID_LIST_COMPACTIONS)))
          .addMethod(
            getRestoreCompactionMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                dev.compactionsidecar.v1.RestoreCompactionRequest,
                dev.compactionsidecar.v1.RestoreCompactionResponse>(
                  this, METHODID_RESTORE_COMPACTION)))
          .build();
    }
  }

  /**
   * <pre>
   * Owns AI-agent conversation context: a versioned event log per session,
   * compacted without breaking a turn or a tool-call/tool-result pair. Nothing
   * is deleted: archived events stay listable and searchable.
   * </pre>
   */
  public static final class CompactionServiceStub extends io.grpc.stub.AbstractAsyncStub<CompactionServiceStub> {
    private CompactionServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CompactionServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CompactionServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a session. ALREADY_EXISTS if the id is taken.
     * </pre>
     */
    public void createSession(dev.compactionsidecar.v1.CreateSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateSessionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns a session's header. NOT_FOUND if absent.
     * </pre>
     */
    public void getSession(dev.compactionsidecar.v1.GetSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetSessionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists sessions in id order, filtered by labels.
     * </pre>
     */
    public void listSessions(dev.compactionsidecar.v1.ListSessionsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListSessionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListSessionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Replaces a session's policy and/or labels, as named by update_mask.
     * </pre>
     */
    public void updateSession(dev.compactionsidecar.v1.UpdateSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpdateSessionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a session and its whole log.
     * </pre>
     */
    public void deleteSession(dev.compactionsidecar.v1.DeleteSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.DeleteSessionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteSessionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Appends a batch of events in one transaction, then compacts if the
     * session's trigger fires.
     * </pre>
     */
    public void appendEvents(dev.compactionsidecar.v1.AppendEventsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.AppendEventsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAppendEventsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The fast path: a stream of appends, each acknowledged by request_id, with
     * background compaction results interleaved. A bad request gets an error
     * response and does not end the stream.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.StreamEventsRequest> streamEvents(
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.StreamEventsResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getStreamEventsMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * The compacted context to send to the model: the active window, in log order.
     * </pre>
     */
    public void getContext(dev.compactionsidecar.v1.GetContextRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.GetContextResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetContextMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs a compaction pass now and waits for its result.
     * </pre>
     */
    public void compact(dev.compactionsidecar.v1.CompactRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.CompactResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCompactMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Streams every compaction result of a session as it lands. Ends with
     * NOT_FOUND when the session is deleted (or deleted and created again).
     * </pre>
     */
    public void watchSession(dev.compactionsidecar.v1.WatchSessionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.WatchSessionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getWatchSessionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The whole log, archived events included, in log order.
     * </pre>
     */
    public void listEvents(dev.compactionsidecar.v1.ListEventsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListEventsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListEventsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Full-text search over archived (and optionally active) events.
     * </pre>
     */
    public void searchEvents(dev.compactionsidecar.v1.SearchEventsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.SearchEventsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSearchEventsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The session's compaction history, newest first: what each pass archived,
     * cleared and inserted, and whether it was restored.
     * </pre>
     */
    public void listCompactions(dev.compactionsidecar.v1.ListCompactionsRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListCompactionsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListCompactionsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Undoes the newest compaction not yet restored: what it archived is active
     * again in place, what it cleared is uncleared, the summary it inserted is
     * archived. Nothing is deleted; the restore is itself recorded and
     * published to watchers.
     * </pre>
     */
    public void restoreCompaction(dev.compactionsidecar.v1.RestoreCompactionRequest request,
        io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.RestoreCompactionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRestoreCompactionMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * Owns AI-agent conversation context: a versioned event log per session,
   * compacted without breaking a turn or a tool-call/tool-result pair. Nothing
   * is deleted: archived events stay listable and searchable.
   * </pre>
   */
  public static final class CompactionServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<CompactionServiceBlockingStub> {
    private CompactionServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CompactionServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CompactionServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a session. ALREADY_EXISTS if the id is taken.
     * </pre>
     */
    public dev.compactionsidecar.v1.Session createSession(dev.compactionsidecar.v1.CreateSessionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateSessionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns a session's header. NOT_FOUND if absent.
     * </pre>
     */
    public dev.compactionsidecar.v1.Session getSession(dev.compactionsidecar.v1.GetSessionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetSessionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists sessions in id order, filtered by labels.
     * </pre>
     */
    public dev.compactionsidecar.v1.ListSessionsResponse listSessions(dev.compactionsidecar.v1.ListSessionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListSessionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Replaces a session's policy and/or labels, as named by update_mask.
     * </pre>
     */
    public dev.compactionsidecar.v1.Session updateSession(dev.compactionsidecar.v1.UpdateSessionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpdateSessionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a session and its whole log.
     * </pre>
     */
    public dev.compactionsidecar.v1.DeleteSessionResponse deleteSession(dev.compactionsidecar.v1.DeleteSessionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteSessionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Appends a batch of events in one transaction, then compacts if the
     * session's trigger fires.
     * </pre>
     */
    public dev.compactionsidecar.v1.AppendEventsResponse appendEvents(dev.compactionsidecar.v1.AppendEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAppendEventsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The compacted context to send to the model: the active window, in log order.
     * </pre>
     */
    public dev.compactionsidecar.v1.GetContextResponse getContext(dev.compactionsidecar.v1.GetContextRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetContextMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs a compaction pass now and waits for its result.
     * </pre>
     */
    public dev.compactionsidecar.v1.CompactResponse compact(dev.compactionsidecar.v1.CompactRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCompactMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Streams every compaction result of a session as it lands. Ends with
     * NOT_FOUND when the session is deleted (or deleted and created again).
     * </pre>
     */
    public java.util.Iterator<dev.compactionsidecar.v1.WatchSessionResponse> watchSession(
        dev.compactionsidecar.v1.WatchSessionRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getWatchSessionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The whole log, archived events included, in log order.
     * </pre>
     */
    public dev.compactionsidecar.v1.ListEventsResponse listEvents(dev.compactionsidecar.v1.ListEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListEventsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Full-text search over archived (and optionally active) events.
     * </pre>
     */
    public dev.compactionsidecar.v1.SearchEventsResponse searchEvents(dev.compactionsidecar.v1.SearchEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSearchEventsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The session's compaction history, newest first: what each pass archived,
     * cleared and inserted, and whether it was restored.
     * </pre>
     */
    public dev.compactionsidecar.v1.ListCompactionsResponse listCompactions(dev.compactionsidecar.v1.ListCompactionsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListCompactionsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Undoes the newest compaction not yet restored: what it archived is active
     * again in place, what it cleared is uncleared, the summary it inserted is
     * archived. Nothing is deleted; the restore is itself recorded and
     * published to watchers.
     * </pre>
     */
    public dev.compactionsidecar.v1.RestoreCompactionResponse restoreCompaction(dev.compactionsidecar.v1.RestoreCompactionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRestoreCompactionMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * Owns AI-agent conversation context: a versioned event log per session,
   * compacted without breaking a turn or a tool-call/tool-result pair. Nothing
   * is deleted: archived events stay listable and searchable.
   * </pre>
   */
  public static final class CompactionServiceFutureStub extends io.grpc.stub.AbstractFutureStub<CompactionServiceFutureStub> {
    private CompactionServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected CompactionServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new CompactionServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a session. ALREADY_EXISTS if the id is taken.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.Session> createSession(
        dev.compactionsidecar.v1.CreateSessionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateSessionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns a session's header. NOT_FOUND if absent.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.Session> getSession(
        dev.compactionsidecar.v1.GetSessionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetSessionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists sessions in id order, filtered by labels.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.ListSessionsResponse> listSessions(
        dev.compactionsidecar.v1.ListSessionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListSessionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Replaces a session's policy and/or labels, as named by update_mask.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.Session> updateSession(
        dev.compactionsidecar.v1.UpdateSessionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpdateSessionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a session and its whole log.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.DeleteSessionResponse> deleteSession(
        dev.compactionsidecar.v1.DeleteSessionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteSessionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Appends a batch of events in one transaction, then compacts if the
     * session's trigger fires.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.AppendEventsResponse> appendEvents(
        dev.compactionsidecar.v1.AppendEventsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAppendEventsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The compacted context to send to the model: the active window, in log order.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.GetContextResponse> getContext(
        dev.compactionsidecar.v1.GetContextRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetContextMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs a compaction pass now and waits for its result.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.CompactResponse> compact(
        dev.compactionsidecar.v1.CompactRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCompactMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The whole log, archived events included, in log order.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.ListEventsResponse> listEvents(
        dev.compactionsidecar.v1.ListEventsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListEventsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Full-text search over archived (and optionally active) events.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.SearchEventsResponse> searchEvents(
        dev.compactionsidecar.v1.SearchEventsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSearchEventsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The session's compaction history, newest first: what each pass archived,
     * cleared and inserted, and whether it was restored.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.ListCompactionsResponse> listCompactions(
        dev.compactionsidecar.v1.ListCompactionsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListCompactionsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Undoes the newest compaction not yet restored: what it archived is active
     * again in place, what it cleared is uncleared, the summary it inserted is
     * archived. Nothing is deleted; the restore is itself recorded and
     * published to watchers.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.compactionsidecar.v1.RestoreCompactionResponse> restoreCompaction(
        dev.compactionsidecar.v1.RestoreCompactionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRestoreCompactionMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CREATE_SESSION = 0;
  private static final int METHODID_GET_SESSION = 1;
  private static final int METHODID_LIST_SESSIONS = 2;
  private static final int METHODID_UPDATE_SESSION = 3;
  private static final int METHODID_DELETE_SESSION = 4;
  private static final int METHODID_APPEND_EVENTS = 5;
  private static final int METHODID_GET_CONTEXT = 6;
  private static final int METHODID_COMPACT = 7;
  private static final int METHODID_WATCH_SESSION = 8;
  private static final int METHODID_LIST_EVENTS = 9;
  private static final int METHODID_SEARCH_EVENTS = 10;
  private static final int METHODID_LIST_COMPACTIONS = 11;
  private static final int METHODID_RESTORE_COMPACTION = 12;
  private static final int METHODID_STREAM_EVENTS = 13;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final CompactionServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(CompactionServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_CREATE_SESSION:
          serviceImpl.createSession((dev.compactionsidecar.v1.CreateSessionRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session>) responseObserver);
          break;
        case METHODID_GET_SESSION:
          serviceImpl.getSession((dev.compactionsidecar.v1.GetSessionRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session>) responseObserver);
          break;
        case METHODID_LIST_SESSIONS:
          serviceImpl.listSessions((dev.compactionsidecar.v1.ListSessionsRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListSessionsResponse>) responseObserver);
          break;
        case METHODID_UPDATE_SESSION:
          serviceImpl.updateSession((dev.compactionsidecar.v1.UpdateSessionRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.Session>) responseObserver);
          break;
        case METHODID_DELETE_SESSION:
          serviceImpl.deleteSession((dev.compactionsidecar.v1.DeleteSessionRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.DeleteSessionResponse>) responseObserver);
          break;
        case METHODID_APPEND_EVENTS:
          serviceImpl.appendEvents((dev.compactionsidecar.v1.AppendEventsRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.AppendEventsResponse>) responseObserver);
          break;
        case METHODID_GET_CONTEXT:
          serviceImpl.getContext((dev.compactionsidecar.v1.GetContextRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.GetContextResponse>) responseObserver);
          break;
        case METHODID_COMPACT:
          serviceImpl.compact((dev.compactionsidecar.v1.CompactRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.CompactResponse>) responseObserver);
          break;
        case METHODID_WATCH_SESSION:
          serviceImpl.watchSession((dev.compactionsidecar.v1.WatchSessionRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.WatchSessionResponse>) responseObserver);
          break;
        case METHODID_LIST_EVENTS:
          serviceImpl.listEvents((dev.compactionsidecar.v1.ListEventsRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListEventsResponse>) responseObserver);
          break;
        case METHODID_SEARCH_EVENTS:
          serviceImpl.searchEvents((dev.compactionsidecar.v1.SearchEventsRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.SearchEventsResponse>) responseObserver);
          break;
        case METHODID_LIST_COMPACTIONS:
          serviceImpl.listCompactions((dev.compactionsidecar.v1.ListCompactionsRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.ListCompactionsResponse>) responseObserver);
          break;
        case METHODID_RESTORE_COMPACTION:
          serviceImpl.restoreCompaction((dev.compactionsidecar.v1.RestoreCompactionRequest) request,
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.RestoreCompactionResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_STREAM_EVENTS:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.streamEvents(
              (io.grpc.stub.StreamObserver<dev.compactionsidecar.v1.StreamEventsResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  private static abstract class CompactionServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    CompactionServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.compactionsidecar.v1.CompactionServiceProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("CompactionService");
    }
  }

  private static final class CompactionServiceFileDescriptorSupplier
      extends CompactionServiceBaseDescriptorSupplier {
    CompactionServiceFileDescriptorSupplier() {}
  }

  private static final class CompactionServiceMethodDescriptorSupplier
      extends CompactionServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    CompactionServiceMethodDescriptorSupplier(String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (CompactionServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new CompactionServiceFileDescriptorSupplier())
              .addMethod(getCreateSessionMethod())
              .addMethod(getGetSessionMethod())
              .addMethod(getListSessionsMethod())
              .addMethod(getUpdateSessionMethod())
              .addMethod(getDeleteSessionMethod())
              .addMethod(getAppendEventsMethod())
              .addMethod(getStreamEventsMethod())
              .addMethod(getGetContextMethod())
              .addMethod(getCompactMethod())
              .addMethod(getWatchSessionMethod())
              .addMethod(getListEventsMethod())
              .addMethod(getSearchEventsMethod())
              .addMethod(getListCompactionsMethod())
              .addMethod(getRestoreCompactionMethod())
              .build();
        }
      }
    }
    return result;
  }
}
