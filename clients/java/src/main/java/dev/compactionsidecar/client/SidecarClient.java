package dev.compactionsidecar.client;

import com.google.protobuf.FieldMask;
import dev.compactionsidecar.v1.CompactionPolicy;
import dev.compactionsidecar.v1.CompactionServiceGrpc;
import dev.compactionsidecar.v1.CompactionServiceGrpc.CompactionServiceBlockingStub;
import dev.compactionsidecar.v1.CreateSessionRequest;
import dev.compactionsidecar.v1.DeleteSessionRequest;
import dev.compactionsidecar.v1.GetSessionRequest;
import dev.compactionsidecar.v1.ListSessionsRequest;
import dev.compactionsidecar.v1.ListSessionsResponse;
import dev.compactionsidecar.v1.SearchEventsRequest;
import dev.compactionsidecar.v1.SearchEventsResponse;
import dev.compactionsidecar.v1.SearchHit;
import dev.compactionsidecar.v1.Session;
import dev.compactionsidecar.v1.UpdateSessionRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * A connection to the compaction sidecar: sessions, search, and {@link #session(String)} handles
 * on one session's log.
 *
 * <p>Every unary call gets the client's default deadline (30 s unless set; {@link
 * #withDeadline(Duration)} gives a view with another). Calls that are safe to repeat — reads and
 * appends — are retried on UNAVAILABLE under the {@link RetryPolicy}, all attempts within that one
 * deadline; creating, updating and deleting sessions, compacting and restoring are never retried:
 * after a lost answer the caller cannot tell whether they took effect. Streams ({@link SessionHandle#stream()},
 * {@link SessionHandle#watch()}) have no deadline unless given one and are never retried. Every
 * failure is a {@link SidecarException}.
 *
 * <p>Thread-safe; share one per process and {@link #close()} it at the end.
 */
public final class SidecarClient implements AutoCloseable {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final ManagedChannel owned;
  private final Channel channel;
  private final Duration defaultDeadline;
  private final RetryPolicy retryPolicy;

  private SidecarClient(
      ManagedChannel owned, Channel channel, Duration defaultDeadline, RetryPolicy retryPolicy) {
    this.owned = owned;
    this.channel = channel;
    this.defaultDeadline = defaultDeadline;
    this.retryPolicy = retryPolicy;
  }

  /** A builder for a client of the sidecar at {@code target} ({@code host:port} or a gRPC URI). */
  public static Builder builder(String target) {
    return new Builder(Objects.requireNonNull(target, "target"));
  }

  /** A client of the sidecar at {@code target}, plaintext, no token, the default deadline. */
  public static SidecarClient connect(String target) {
    return builder(target).build();
  }

  /** How to reach and call the sidecar. */
  public static final class Builder {
    private final String target;
    private String bearerToken;
    private Tls tls;
    private Duration defaultDeadline = Duration.ofSeconds(30);
    private RetryPolicy retryPolicy = RetryPolicy.DEFAULT;
    private final List<ClientInterceptor> interceptors = new ArrayList<>();

    private Builder(String target) {
      this.target = target;
    }

    /**
     * Send {@code authorization: Bearer <token>} on every call. Sent as metadata rather than call
     * credentials, which gRPC withholds on plaintext channels: a sidecar is often reached over
     * localhost without TLS.
     */
    public Builder bearerToken(String token) {
      this.bearerToken = token;
      return this;
    }

    /** Connect over TLS (default: plaintext). */
    public Builder tls(Tls tls) {
      this.tls = tls;
      return this;
    }

    /** The deadline of each unary call, retries included; null for none. Default 30 s. */
    public Builder defaultDeadline(Duration deadline) {
      this.defaultDeadline = deadline;
      return this;
    }

    /** How to retry calls that are safe to repeat. Default {@link RetryPolicy#DEFAULT}. */
    public Builder retryPolicy(RetryPolicy policy) {
      this.retryPolicy = Objects.requireNonNull(policy, "policy");
      return this;
    }

    /** Client interceptors, outermost first (logging, tracing, tests). */
    public Builder intercept(ClientInterceptor... interceptors) {
      this.interceptors.addAll(List.of(interceptors));
      return this;
    }

    public SidecarClient build() {
      ChannelCredentials credentials =
          tls == null ? InsecureChannelCredentials.create() : tls.credentials();
      // Answers of any size: the server bounds each by its --max-message-bytes (16 MiB by
      // default, past gRPC's 4 MiB inbound default) and says content_omitted past it.
      ManagedChannel managed =
          Grpc.newChannelBuilder(target, credentials)
              .maxInboundMessageSize(Integer.MAX_VALUE)
              .build();
      List<ClientInterceptor> chain = new ArrayList<>();
      if (bearerToken != null && !bearerToken.isEmpty()) {
        Metadata headers = new Metadata();
        headers.put(AUTHORIZATION, "Bearer " + bearerToken);
        chain.add(MetadataUtils.newAttachHeadersInterceptor(headers));
      }
      chain.addAll(interceptors);
      // ClientInterceptors.intercept runs the last one first: reverse so the first given is outermost.
      Collections.reverse(chain);
      Channel channel = ClientInterceptors.intercept(managed, chain);
      return new SidecarClient(managed, channel, defaultDeadline, retryPolicy);
    }
  }

  /**
   * A view of this client whose unary calls have {@code deadline} (null: none); it shares the
   * connection, and closing it does nothing.
   */
  public SidecarClient withDeadline(Duration deadline) {
    return new SidecarClient(null, channel, deadline, retryPolicy);
  }

  /** A view of this client retrying under {@code policy}; it shares the connection. */
  public SidecarClient withRetryPolicy(RetryPolicy policy) {
    return new SidecarClient(null, channel, defaultDeadline, Objects.requireNonNull(policy));
  }

  /** The default deadline of unary calls (null: none). */
  public Duration defaultDeadline() {
    return defaultDeadline;
  }

  // -- sessions -------------------------------------------------------------

  /** Create a session; a null policy gets the server's default. ALREADY_EXISTS if taken. */
  public Session createSession(
      String sessionId, CompactionPolicy policy, Map<String, String> labels) {
    return createSession(sessionId, policy, labels, null);
  }

  /**
   * Create a session for {@code model}, the model the agent calls with its context (e.g. {@code
   * "gemini-2.5-flash"}): the session then carries its {@code model_profile}. A model the server
   * has no profile of is INVALID_ARGUMENT naming {@code model}.
   */
  public Session createSession(
      String sessionId, CompactionPolicy policy, Map<String, String> labels, String model) {
    CreateSessionRequest.Builder request = CreateSessionRequest.newBuilder().setSessionId(sessionId);
    if (policy != null) {
      request.setPolicy(policy);
    }
    if (labels != null) {
      request.putAllLabels(labels);
    }
    if (model != null) {
      request.setModel(model);
    }
    return createSession(request.build());
  }

  /** Create a session with the server's default policy. */
  public Session createSession(String sessionId) {
    return createSession(sessionId, null, null);
  }

  /** Create a session from a whole request. Not retried. */
  public Session createSession(CreateSessionRequest request) {
    return unary(stub -> stub.createSession(request), false);
  }

  /** A session's header (version, policy, counters). NOT_FOUND if absent. */
  public Session getSession(String sessionId) {
    GetSessionRequest request = GetSessionRequest.newBuilder().setSessionId(sessionId).build();
    return unary(stub -> stub.getSession(request), true);
  }

  /** Every session having all of {@code labelFilter} (may be empty), in id order, page by page. */
  public Stream<Session> listSessions(Map<String, String> labelFilter) {
    return Pages.stream(
        token -> {
          ListSessionsRequest request =
              ListSessionsRequest.newBuilder()
                  .putAllLabelFilter(labelFilter)
                  .setPageToken(token)
                  .build();
          ListSessionsResponse page = unary(stub -> stub.listSessions(request), true);
          return new Pages.Page<>(page.getSessionsList(), page.getNextPageToken());
        });
  }

  /**
   * Replace a session's policy, labels and/or model, as named by the request's update mask
   * ({@code "policy"}, {@code "labels"}, {@code "model"}).
   */
  public Session updateSession(UpdateSessionRequest request) {
    return unary(stub -> stub.updateSession(request), false);
  }

  /**
   * Change the session's model (empty: none), with the update mask {@code "model"}. A non-zero
   * {@code expectedVersion} fails with FAILED_PRECONDITION unless the session is at it.
   */
  public Session updateModel(String sessionId, String model, long expectedVersion) {
    return updateSession(
        UpdateSessionRequest.newBuilder()
            .setSession(Session.newBuilder().setSessionId(sessionId).setModel(model))
            .setUpdateMask(FieldMask.newBuilder().addPaths("model"))
            .setExpectedVersion(expectedVersion)
            .build());
  }

  /** Delete a session and its whole log. Not retried. */
  public void deleteSession(String sessionId) {
    DeleteSessionRequest request = DeleteSessionRequest.newBuilder().setSessionId(sessionId).build();
    unary(stub -> stub.deleteSession(request), false);
  }

  /** A handle on one session's log; makes no call. */
  public SessionHandle session(String sessionId) {
    return new SessionHandle(this, Objects.requireNonNull(sessionId, "sessionId"));
  }

  // -- search ---------------------------------------------------------------

  /** Full-text search over the archived events of every session, best first. */
  public Stream<SearchHit> search(String query) {
    return search(SearchEventsRequest.newBuilder().setQuery(query).build());
  }

  /**
   * Search with every filter of the API (session, roles, active events too, time range), best
   * first. Pages are fetched as the stream is consumed, starting at the request's page token.
   */
  public Stream<SearchHit> search(SearchEventsRequest request) {
    return Pages.stream(
        token -> {
          SearchEventsRequest page =
              token.isEmpty() ? request : request.toBuilder().setPageToken(token).build();
          SearchEventsResponse response = unary(stub -> stub.searchEvents(page), true);
          return new Pages.Page<>(response.getHitsList(), response.getNextPageToken());
        });
  }

  // -- raw access -----------------------------------------------------------

  /** The generated blocking stub on this client's connection (token attached, no deadline). */
  public CompactionServiceBlockingStub blockingStub() {
    return CompactionServiceGrpc.newBlockingStub(channel);
  }

  /** The generated async stub on this client's connection (token attached, no deadline). */
  public CompactionServiceGrpc.CompactionServiceStub asyncStub() {
    return CompactionServiceGrpc.newStub(channel);
  }

  Channel channel() {
    return channel;
  }

  CallOptions streamCallOptions(Duration deadline) {
    return deadline == null
        ? CallOptions.DEFAULT
        : CallOptions.DEFAULT.withDeadlineAfter(deadline.toNanos(), TimeUnit.NANOSECONDS);
  }

  /**
   * One unary call under the default deadline, retried on UNAVAILABLE when {@code retry} (the
   * caller vouches it is safe to repeat). All attempts and backoffs share the one deadline.
   */
  <T> T unary(Function<CompactionServiceBlockingStub, T> call, boolean retry) {
    CompactionServiceBlockingStub stub = blockingStub();
    Deadline deadline = null;
    if (defaultDeadline != null) {
      deadline = Deadline.after(defaultDeadline.toNanos(), TimeUnit.NANOSECONDS);
      stub = stub.withDeadline(deadline);
    }
    int attempt = 0;
    while (true) {
      try {
        return call.apply(stub);
      } catch (StatusRuntimeException e) {
        if (!retry
            || e.getStatus().getCode() != Status.Code.UNAVAILABLE
            || attempt >= retryPolicy.maxRetries()) {
          throw SidecarException.from(e);
        }
        Duration delay = retryPolicy.backoff(attempt);
        if (deadline != null && deadline.timeRemaining(TimeUnit.NANOSECONDS) <= delay.toNanos()) {
          throw SidecarException.from(e);
        }
        try {
          Thread.sleep(delay.toMillis(), delay.toNanosPart() % 1_000_000);
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw SidecarException.from(
              Status.CANCELLED.withDescription("interrupted").withCause(interrupted).asRuntimeException());
        }
        attempt++;
      }
    }
  }

  /** Close the connection (if this client opened it); open streams and watches end. */
  @Override
  public void close() {
    if (owned == null) {
      return;
    }
    owned.shutdown();
    try {
      if (!owned.awaitTermination(5, TimeUnit.SECONDS)) {
        owned.shutdownNow();
      }
    } catch (InterruptedException e) {
      owned.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }
}
