package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.compactionsidecar.v1.CompactionServiceGrpc;
import dev.compactionsidecar.v1.StreamEventsRequest;
import dev.compactionsidecar.v1.StreamEventsResponse;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link EventStream#send} blocks on HTTP/2 flow control: against a server that reads nothing,
 * a sender gets only what the server's window and {@link EventStream#SEND_BUFFER_BYTES} hold
 * (plus the message being sent) through, then waits, and the end of the call — a cancel, the
 * deadline, the server's status — releases it with that status. ({@code SessionHandleTest} has
 * the real server take far more than the buffer while the answers are read.)
 */
@Timeout(120) // a send that never returns fails the class instead of hanging the build
class SendBackPressureTest {
  /** The deaf server's HTTP/2 window, per stream and per connection. */
  private static final int WINDOW = 64 * 1024;

  private static final int REQUEST_BYTES = 1024 * 1024;

  /** Sends that may return before one blocks: the window and the buffer, then the one sent. */
  private static final int MOST_ACCEPTED =
      1 + (WINDOW + EventStream.SEND_BUFFER_BYTES) / REQUEST_BYTES;

  private static final int SENDS = 16;

  private final CompletableFuture<ServerCallStreamObserver<StreamEventsResponse>> call =
      new CompletableFuture<>();
  private Server server;
  private SidecarClient client;

  /** StreamEvents that never asks for a request: what the client sends stays in flow control. */
  private final class Deaf extends CompactionServiceGrpc.CompactionServiceImplBase {
    @Override
    public StreamObserver<StreamEventsRequest> streamEvents(
        StreamObserver<StreamEventsResponse> responses) {
      ServerCallStreamObserver<StreamEventsResponse> observer =
          (ServerCallStreamObserver<StreamEventsResponse>) responses;
      observer.disableAutoRequest();
      call.complete(observer);
      return new StreamObserver<>() {
        @Override
        public void onNext(StreamEventsRequest request) {}

        @Override
        public void onError(Throwable t) {}

        @Override
        public void onCompleted() {}
      };
    }
  }

  /** Sends {@link #SENDS} requests of about 1 MiB on a thread of its own, counting the returns. */
  private static final class Sender {
    final Thread thread;
    volatile int sent;
    volatile Throwable failure;

    Sender(EventStream stream) {
      String text = "x".repeat(REQUEST_BYTES);
      thread =
          new Thread(
              () -> {
                try {
                  for (int n = 0; n < SENDS; n++) {
                    stream.send(List.of(u("e" + n, text)));
                    sent++;
                  }
                } catch (Throwable t) {
                  failure = t;
                }
              },
              "sender");
      thread.setDaemon(true);
      thread.start();
    }

    /** A sender on {@code stream}, once it is blocked on flow control (it must block). */
    static Sender blockedOn(EventStream stream) throws InterruptedException {
      Sender sender = new Sender(stream);
      assertTrue(sender.blocked(), "all " + SENDS + " sends returned while the server read nothing");
      return sender;
    }

    /** Waits for the sender to end; the SidecarException it ended with. */
    SidecarException failed() throws InterruptedException {
      thread.join(TimeUnit.SECONDS.toMillis(30));
      assertFalse(thread.isAlive(), "the sender is still blocked after 30 s");
      assertTrue(failure != null, "all " + sent + " sends returned while the server read nothing");
      return assertInstanceOf(SidecarException.class, failure);
    }

    /**
     * Waits until the sender is parked inside {@link EventStream#send} after a first send went
     * (so on flow control, not on the connection being made) (true), or has finished (false);
     * neither within 30 s fails.
     */
    boolean blocked() throws InterruptedException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (System.nanoTime() < deadline) {
        Thread.State state = thread.getState();
        if (state == Thread.State.TERMINATED) {
          return false;
        }
        if (sent > 0
            && (state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING)
            && Arrays.stream(thread.getStackTrace())
                .anyMatch(
                    f ->
                        f.getClassName().equals(EventStream.class.getName())
                            && f.getMethodName().equals("send"))) {
          return true;
        }
        Thread.sleep(10);
      }
      throw new AssertionError("the sender neither finished nor blocked in send within 30 s");
    }
  }

  @BeforeEach
  void start() throws Exception {
    server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .flowControlWindow(WINDOW)
            .addService(new Deaf())
            .build()
            .start();
    client = SidecarClient.builder("127.0.0.1:" + server.getPort()).build();
  }

  @AfterEach
  void stop() throws Exception {
    client.close();
    server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
  }

  @Test
  void sendBlocksWhileTheServerReadsNothingAndCancelReleasesIt() throws Exception {
    EventStream stream = client.session("unread").stream();
    Sender sender = Sender.blockedOn(stream);
    assertTrue(sender.sent <= MOST_ACCEPTED, sender.sent + " sends returned");

    stream.cancel();
    assertEquals(Status.Code.CANCELLED, sender.failed().getCode());
    assertTrue(sender.sent <= MOST_ACCEPTED, sender.sent + " sends returned");
    SidecarException late =
        assertThrows(SidecarException.class, () -> stream.send(List.of(u("late", "hi"))));
    assertEquals(Status.Code.CANCELLED, late.getCode());
  }

  @Test
  void completeDoesNotWaitForABlockedSendAndLaterSendsAreRefused() throws Exception {
    EventStream stream = client.session("unread").stream();
    Sender sender = Sender.blockedOn(stream);

    assertTimeoutPreemptively(Duration.ofSeconds(30), stream::complete);
    assertThrows(IllegalStateException.class, () -> stream.send(List.of(u("late", "hi"))));
    stream.cancel();
    assertEquals(Status.Code.CANCELLED, sender.failed().getCode());
  }

  @Test
  void theStreamsDeadlineReleasesABlockedSend() throws Exception {
    EventStream stream = client.session("unread").stream(Duration.ofMillis(500));
    Sender sender = new Sender(stream);
    assertEquals(Status.Code.DEADLINE_EXCEEDED, sender.failed().getCode());
    assertTrue(sender.sent <= MOST_ACCEPTED, sender.sent + " sends returned");
    SidecarException read = assertThrows(SidecarException.class, stream::next);
    assertEquals(Status.Code.DEADLINE_EXCEEDED, read.getCode());
  }

  @Test
  void theServersStatusReleasesABlockedSendUnread() throws Exception {
    EventStream stream = client.session("unread").stream();
    Sender sender = Sender.blockedOn(stream);

    call.get(30, TimeUnit.SECONDS)
        .onError(Status.RESOURCE_EXHAUSTED.withDescription("too much").asRuntimeException());
    SidecarException e = sender.failed();
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getCode());
    assertEquals("too much", e.getStatusMessage());
    assertTrue(sender.sent <= MOST_ACCEPTED, sender.sent + " sends returned");
  }
}
