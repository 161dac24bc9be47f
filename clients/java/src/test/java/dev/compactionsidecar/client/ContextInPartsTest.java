package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.compactionsidecar.v1.CompactionServiceGrpc;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.GetContextResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.MethodDescriptor;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A window too large for one answer comes from GetContext without its content; {@code context()}
 * reads it in ListEvents pages, and reads both again when the window changed in between.
 */
class ContextInPartsTest {
  private static SidecarProcess server;

  @BeforeAll
  static void start() throws Exception {
    // 8 KiB: a window of a few KB is too large for one answer.
    server = SidecarProcess.start("--max-message-bytes", "8192");
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.close();
    }
  }

  /** Counts GetContext calls; before the first ListEvents page, appends through another client. */
  static final class LateAppend implements ClientInterceptor {
    final AtomicInteger contexts = new AtomicInteger();
    final AtomicInteger listings = new AtomicInteger();
    final SessionHandle other;

    LateAppend(SessionHandle other) {
      this.other = other;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      String name = method.getFullMethodName();
      if (name.equals(CompactionServiceGrpc.getGetContextMethod().getFullMethodName())) {
        contexts.incrementAndGet();
      }
      if (name.equals(CompactionServiceGrpc.getListEventsMethod().getFullMethodName())
          && listings.getAndIncrement() == 0) {
        other.append(u("late", "late")); // on the caller's thread, before the call starts
      }
      return next.newCall(method, options);
    }
  }

  @Test
  void anOmittedWindowIsReadInPartsAndAgainWhenItChanged() {
    try (SidecarClient plain = SidecarClient.builder(server.target()).build()) {
      List<Event> big = new ArrayList<>();
      for (String id : List.of("q0", "q1", "q2", "q3")) {
        big.add(u(id, id + "x".repeat(1500)));
      }
      plain.session("big").append(big, AppendOptions.creatingIfMissing());
      LateAppend late = new LateAppend(plain.session("big"));
      try (SidecarClient watched =
          SidecarClient.builder(server.target()).intercept(late).build()) {
        GetContextResponse window = watched.session("big").context();
        assertEquals(List.of("q0", "q1", "q2", "q3", "late"), ids(window.getEventsList()));
        assertEquals(2, late.contexts.get(), "GetContext once more after the window changed");
        assertFalse(window.getContentOmitted());
        assertEquals(2, window.getVersion());
        List<Integer> lengths = new ArrayList<>();
        for (Event event : window.getEventsList()) {
          lengths.add(event.getText().length());
        }
        assertEquals(List.of(1502, 1502, 1502, 1502, 4), lengths);
      }
    }
  }
}
