package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.slidingWindow;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.compactionsidecar.v1.AppendEventsRequest;
import dev.compactionsidecar.v1.AppendEventsResponse;
import dev.compactionsidecar.v1.CompactionServiceGrpc;
import dev.compactionsidecar.v1.Event;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Retries on UNAVAILABLE: only calls safe to repeat, with the same event ids, within bounds.
 *
 * <p>"Lost answers" are made by an interceptor that lets a call reach the real server and then
 * replaces its answer with UNAVAILABLE — the case that makes retrying an append dangerous unless
 * the retry re-sends the same ids.
 */
class RetryTest {
  private static final RetryPolicy FAST =
      new RetryPolicy(3, Duration.ofMillis(10), Duration.ofMillis(50), 2.0);

  private static SidecarProcess server;

  @BeforeAll
  static void start() throws Exception {
    server = SidecarProcess.start();
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.close();
    }
  }

  /** Loses the answers of the first {@code losses} calls of {@code method}; records requests. */
  static final class LoseAnswers implements ClientInterceptor {
    final MethodDescriptor<?, ?> method;
    final AtomicInteger losses;
    final List<Object> requests = new CopyOnWriteArrayList<>();

    LoseAnswers(MethodDescriptor<?, ?> method, int losses) {
      this.method = method;
      this.losses = new AtomicInteger(losses);
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> called, CallOptions options, Channel next) {
      ClientCall<Q, R> call = next.newCall(called, options);
      if (!called.getFullMethodName().equals(method.getFullMethodName())) {
        return call;
      }
      boolean lose = losses.getAndDecrement() > 0;
      return new ForwardingClientCall.SimpleForwardingClientCall<>(call) {
        @Override
        public void sendMessage(Q message) {
          requests.add(message);
          super.sendMessage(message);
        }

        @Override
        public void start(Listener<R> listener, Metadata headers) {
          super.start(
              new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                @Override
                public void onMessage(R message) {
                  if (!lose) {
                    super.onMessage(message);
                  }
                }

                @Override
                public void onClose(Status status, Metadata trailers) {
                  super.onClose(
                      lose ? Status.UNAVAILABLE.withDescription("answer lost") : status,
                      lose ? new Metadata() : trailers);
                }
              },
              headers);
        }
      };
    }
  }

  @Test
  void appendWithALostAnswerIsRetriedWithTheSameIdsAndStoredOnce() {
    LoseAnswers lossy = new LoseAnswers(CompactionServiceGrpc.getAppendEventsMethod(), 2);
    try (SidecarClient client =
        SidecarClient.builder(server.target()).retryPolicy(FAST).intercept(lossy).build()) {
      client.createSession("retry-append");
      // No ids given: the client picks them once, before the first attempt.
      AppendEventsResponse response =
          client.session("retry-append").append(Events.user("hello"), Events.assistant("hi"));

      assertEquals(3, lossy.requests.size(), "two lost answers, then the third attempt");
      List<List<String>> sentIds =
          lossy.requests.stream()
              .map(r -> ids(((AppendEventsRequest) r).getEventsList()))
              .distinct()
              .collect(Collectors.toList());
      assertEquals(1, sentIds.size(), "every attempt sent the same ids: " + sentIds);
      assertEquals(sentIds.get(0), ids(response.getEventsList()));
      // The first attempt stored the events; the retries stored nothing more.
      List<Event> log = client.session("retry-append").events().collect(Collectors.toList());
      assertEquals(sentIds.get(0), ids(log));
    }
  }

  @Test
  void retriesAreBoundedByTheirNumber() {
    LoseAnswers lossy = new LoseAnswers(CompactionServiceGrpc.getGetContextMethod(), 100);
    RetryPolicy two = new RetryPolicy(2, Duration.ofMillis(10), Duration.ofMillis(10), 1.0);
    try (SidecarClient client =
        SidecarClient.builder(server.target()).retryPolicy(two).intercept(lossy).build()) {
      client.createSession("retry-bounded");
      SidecarException e =
          assertThrows(SidecarException.class, () -> client.session("retry-bounded").context());
      assertEquals(Status.Code.UNAVAILABLE, e.getCode());
      assertEquals(3, lossy.requests.size());
    }
  }

  @Test
  void retriesStopAtTheCallsDeadline() {
    LoseAnswers lossy = new LoseAnswers(CompactionServiceGrpc.getGetContextMethod(), 100);
    RetryPolicy patient = new RetryPolicy(50, Duration.ofMillis(200), Duration.ofMillis(200), 1.0);
    try (SidecarClient client =
        SidecarClient.builder(server.target())
            .retryPolicy(patient)
            .defaultDeadline(Duration.ofMillis(700))
            .intercept(lossy)
            .build()) {
      client.createSession("retry-deadline");
      long started = System.nanoTime();
      assertThrows(SidecarException.class, () -> client.session("retry-deadline").context());
      long elapsedMs = (System.nanoTime() - started) / 1_000_000;
      assertTrue(elapsedMs < 1_500, "elapsed " + elapsedMs + " ms");
      assertTrue(lossy.requests.size() < 50, "attempts " + lossy.requests.size());
    }
  }

  @Test
  void compactIsNeverRetried() {
    LoseAnswers lossy = new LoseAnswers(CompactionServiceGrpc.getCompactMethod(), 1);
    try (SidecarClient client =
        SidecarClient.builder(server.target()).retryPolicy(FAST).intercept(lossy).build()) {
      client.createSession("retry-compact", slidingWindow(2), null);
      client.session("retry-compact").append(u("u1", "a"), u("u2", "b"), u("u3", "c"));
      SidecarException e =
          assertThrows(
              SidecarException.class,
              () -> client.session("retry-compact").compact(CompactOptions.forced()));
      assertEquals(Status.Code.UNAVAILABLE, e.getCode());
      assertEquals(1, lossy.requests.size());
    }
  }

  @Test
  void unreachableServerIsUnavailableAfterTheRetries() throws IOException {
    int port;
    try (ServerSocket socket = new ServerSocket(0)) {
      port = socket.getLocalPort();
    }
    LoseAnswers counting = new LoseAnswers(CompactionServiceGrpc.getGetSessionMethod(), 0);
    RetryPolicy two = new RetryPolicy(2, Duration.ofMillis(10), Duration.ofMillis(10), 1.0);
    try (SidecarClient client =
        SidecarClient.builder("127.0.0.1:" + port).retryPolicy(two).intercept(counting).build()) {
      SidecarException e =
          assertThrows(SidecarException.class, () -> client.getSession("anything"));
      assertEquals(Status.Code.UNAVAILABLE, e.getCode());
      assertEquals(3, counting.requests.size());
    }
  }
}
