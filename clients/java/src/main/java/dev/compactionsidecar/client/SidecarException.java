package dev.compactionsidecar.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.PreconditionFailure;
import com.google.rpc.QuotaFailure;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * What every failed call of this client throws: the gRPC status, with the google.rpc details the
 * server attached, already unpacked.
 *
 * <p>The server names the offending field of bad input ({@link BadRequest}, INVALID_ARGUMENT), the
 * session's current version on a version mismatch ({@link ErrorInfo}, FAILED_PRECONDITION), the
 * limit a request went over ({@link QuotaFailure}, RESOURCE_EXHAUSTED), a missing summarizer and
 * the compaction to restore first ({@link PreconditionFailure}). A caller should not have to parse a message to learn any of these.
 */
public final class SidecarException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient Status status;
  private final transient com.google.rpc.Status details;

  private SidecarException(Status status, com.google.rpc.Status details, Throwable cause) {
    super(status.getCode() + ": " + nullToEmpty(status.getDescription()), cause);
    this.status = status;
    this.details = details;
  }

  /** The exception for a failed call (a {@code StatusRuntimeException} or anything carrying one). */
  public static SidecarException from(Throwable failure) {
    if (failure instanceof SidecarException known) {
      return known;
    }
    Status status = Status.fromThrowable(failure);
    com.google.rpc.Status details = StatusProto.fromThrowable(failure);
    if (details == null) {
      details =
          com.google.rpc.Status.newBuilder()
              .setCode(status.getCode().value())
              .setMessage(nullToEmpty(status.getDescription()))
              .build();
    }
    return new SidecarException(status, details, failure);
  }

  /**
   * The exception for a google.rpc.Status that arrived as data: the error of one request on an
   * {@link EventStream}, which fails that request and not the stream.
   */
  public static SidecarException fromStatus(com.google.rpc.Status details) {
    Status status = Status.fromCodeValue(details.getCode()).withDescription(details.getMessage());
    return new SidecarException(status, details, null);
  }

  /** The gRPC status (code and message). */
  public Status getStatus() {
    return status;
  }

  /** The status code, e.g. {@code INVALID_ARGUMENT}. */
  public Status.Code getCode() {
    return status.getCode();
  }

  /** The server's message, without the code. */
  public String getStatusMessage() {
    return nullToEmpty(status.getDescription());
  }

  /** The whole google.rpc.Status, details as packed {@code Any}s. */
  public com.google.rpc.Status getDetails() {
    return details;
  }

  /** The bad fields of the request, by dotted path ({@code events[0].role}); empty if none. */
  public List<BadRequest.FieldViolation> fieldViolations() {
    return detail(BadRequest.class).map(BadRequest::getFieldViolationsList).orElse(List.of());
  }

  /** The first bad field, when the server named one. */
  public Optional<String> field() {
    return fieldViolations().stream().findFirst().map(BadRequest.FieldViolation::getField);
  }

  /** The reason of a google.rpc.ErrorInfo, e.g. {@code VERSION_MISMATCH}. */
  public Optional<ErrorInfo> errorInfo() {
    return detail(ErrorInfo.class);
  }

  /** Where the session is after a version mismatch (FAILED_PRECONDITION). */
  public OptionalLong currentVersion() {
    return errorInfo()
        .map(info -> info.getMetadataMap().get("current_version"))
        .map(v -> OptionalLong.of(Long.parseLong(v)))
        .orElse(OptionalLong.empty());
  }

  /** The limits the request went over (RESOURCE_EXHAUSTED); empty if none. */
  public List<QuotaFailure.Violation> quotaViolations() {
    return detail(QuotaFailure.class).map(QuotaFailure::getViolationsList).orElse(List.of());
  }

  /**
   * The preconditions the request failed (FAILED_PRECONDITION): a missing summarizer, or a restore
   * out of order (type {@code RESTORE_ORDER}, the subject the compaction to restore first); empty
   * if none.
   */
  public List<PreconditionFailure.Violation> preconditionViolations() {
    return detail(PreconditionFailure.class)
        .map(PreconditionFailure::getViolationsList)
        .orElse(List.of());
  }

  /** The first detail of type {@code type}, unpacked. */
  public <T extends Message> Optional<T> detail(Class<T> type) {
    for (Any any : details.getDetailsList()) {
      if (any.is(type)) {
        try {
          return Optional.of(any.unpack(type));
        } catch (InvalidProtocolBufferException e) {
          return Optional.empty();
        }
      }
    }
    return Optional.empty();
  }

  private static String nullToEmpty(String s) {
    return s == null ? "" : s;
  }
}
