package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.slidingWindow;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.rpc.BadRequest;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.SlidingWindow;
import dev.compactionsidecar.v1.Strategy;
import io.grpc.Status;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Failures arrive as SidecarException with the status and the server's google.rpc details. */
class ErrorsTest extends AgainstServer {
  @BeforeAll
  static void start() throws Exception {
    startServer();
  }

  @Test
  void missingRoleIsInvalidArgumentNamingTheField() {
    client.createSession("err-role");
    Event noRole = Event.newBuilder().setId("x").setText("who said this?").build();
    SidecarException e =
        assertThrows(
            SidecarException.class,
            () -> client.session("err-role").append(u("u1", "fine"), noRole));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.getCode());
    assertTrue(e.getStatusMessage().contains("events[1].role"), e.getStatusMessage());
    assertEquals(Optional.of("events[1].role"), e.field());
    BadRequest.FieldViolation violation = e.fieldViolations().get(0);
    assertEquals("events[1].role", violation.getField());
    assertTrue(e.detail(BadRequest.class).isPresent());
    // Nothing of the batch was stored.
    assertEquals(0, client.session("err-role").events().count());
  }

  @Test
  void invalidPolicyNamesTheFieldAndCreatesNothing() {
    SidecarException e =
        assertThrows(
            SidecarException.class,
            () ->
                client.createSession(
                    "err-policy",
                    slidingWindow(2).toBuilder()
                        .setStrategy(
                            Strategy.newBuilder()
                                .setSlidingWindow(SlidingWindow.newBuilder().setMaxEvents(-1)))
                        .build(),
                    null));
    assertEquals(Optional.of("policy.strategy.sliding_window.max_events"), e.field());
    assertEquals(
        Status.Code.NOT_FOUND,
        assertThrows(SidecarException.class, () -> client.getSession("err-policy")).getCode());
  }

  @Test
  void staleExpectedVersionIsFailedPreconditionWithTheCurrentVersion() {
    client.createSession("err-version");
    long version = client.session("err-version").append(u("u1", "hi")).getVersion();
    SidecarException e =
        assertThrows(
            SidecarException.class,
            () ->
                client
                    .session("err-version")
                    .append(List.of(u("u2", "late")), AppendOptions.expectingVersion(version + 5)));
    assertEquals(Status.Code.FAILED_PRECONDITION, e.getCode());
    assertEquals(version, e.currentVersion().getAsLong());
    assertEquals("VERSION_MISMATCH", e.errorInfo().orElseThrow().getReason());
    // The right version goes through.
    client.session("err-version").append(List.of(u("u2", "late")), AppendOptions.expectingVersion(version));
  }

  @Test
  void absentSessionIsNotFoundAndTakenIdAlreadyExists() {
    assertEquals(
        Status.Code.NOT_FOUND,
        assertThrows(SidecarException.class, () -> client.session("err-absent").context()).getCode());
    client.createSession("err-taken");
    assertEquals(
        Status.Code.ALREADY_EXISTS,
        assertThrows(SidecarException.class, () -> client.createSession("err-taken")).getCode());
  }

  @Test
  void watchingAnAbsentSessionFailsAtOnce() {
    SidecarException e =
        assertThrows(SidecarException.class, () -> client.session("err-absent").watch());
    assertEquals(Status.Code.NOT_FOUND, e.getCode());
  }

  @Test
  void unaryCallPastItsDeadlineIsDeadlineExceeded() {
    client.createSession("err-deadline");
    SidecarException e =
        assertThrows(
            SidecarException.class,
            () -> client.withDeadline(Duration.ofNanos(1)).session("err-deadline").context());
    assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getCode());
    // The view changed nothing for the client it came from.
    client.session("err-deadline").context();
  }

  @Test
  void watchEndsWithDeadlineExceededWhenNothingLands() {
    client.createSession("err-watch");
    long started = System.nanoTime();
    try (Watch watch = client.session("err-watch").watch(Duration.ofMillis(500))) {
      SidecarException e = assertThrows(SidecarException.class, watch::next);
      assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getCode());
    }
    long elapsedMs = (System.nanoTime() - started) / 1_000_000;
    assertTrue(elapsedMs >= 450 && elapsedMs < 5_000, "elapsed " + elapsedMs + " ms");
  }

  @Test
  void cancelledStreamEndsWithCancelled() {
    client.createSession("err-cancel");
    EventStream stream = client.session("err-cancel").stream();
    stream.send(List.of(u("u1", "hi")));
    stream.cancel();
    SidecarException e =
        assertThrows(
            SidecarException.class,
            () -> {
              while (stream.next(Duration.ofSeconds(10)) != null) {
                // acks that arrived before the cancel
              }
            });
    assertEquals(Status.Code.CANCELLED, e.getCode());
  }
}
