package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.CompactionServiceGrpc;
import dev.compactionsidecar.v1.WatchSessionRequest;
import dev.compactionsidecar.v1.WatchSessionResponse;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Metadata;
import java.time.Duration;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A WatchSession call: every compaction result of one session as it lands ({@code compaction}),
 * or how many results were dropped for a watcher that fell behind ({@code missed}).
 *
 * <p>The watch is in place on the server when {@link SessionHandle#watch()} returns (it waits for
 * the server's headers), so a compaction started after that is seen; results that landed before
 * are not replayed. Iterate to block between results; {@link #close()} cancels the call.
 */
public final class Watch implements AutoCloseable, Iterable<WatchSessionResponse> {
  private final ClientCall<WatchSessionRequest, WatchSessionResponse> call;
  private final Inbox<WatchSessionResponse> inbox = new Inbox<>();
  private boolean ended;

  Watch(SidecarClient client, String sessionId, Duration deadline) {
    CallOptions options = client.streamCallOptions(deadline);
    call = client.channel().newCall(CompactionServiceGrpc.getWatchSessionMethod(), options);
    inbox.attach(call);
    synchronized (call) {
      call.start(inbox, new Metadata());
      call.sendMessage(WatchSessionRequest.newBuilder().setSessionId(sessionId).build());
      call.halfClose();
      call.request(Inbox.WINDOW);
    }
    Duration wait = deadline != null ? deadline : client.defaultDeadline();
    try {
      if (wait == null) {
        inbox.headers().get();
      } else {
        inbox.headers().get(wait.toNanos(), TimeUnit.NANOSECONDS);
      }
    } catch (TimeoutException | ExecutionException e) {
      close();
      throw SidecarException.from(
          io.grpc.Status.DEADLINE_EXCEEDED.withDescription("watch not in place").asException());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      close();
      throw SidecarException.from(io.grpc.Status.CANCELLED.asException());
    }
    inbox.throwIfFailed();
  }

  /** The next update, blocking; null once the call ended. Throws if it failed (e.g. NOT_FOUND). */
  public WatchSessionResponse next() {
    return next(null);
  }

  /** The next update, blocking up to {@code timeout} (then DEADLINE_EXCEEDED; the watch goes on). */
  public WatchSessionResponse next(Duration timeout) {
    WatchSessionResponse update = inbox.take(timeout);
    if (update == null) {
      ended = true;
    }
    return update;
  }

  @Override
  public Iterator<WatchSessionResponse> iterator() {
    return new Iterator<>() {
      private WatchSessionResponse peeked;

      @Override
      public boolean hasNext() {
        if (peeked == null && !ended) {
          peeked = Watch.this.next();
        }
        return peeked != null;
      }

      @Override
      public WatchSessionResponse next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        WatchSessionResponse out = peeked;
        peeked = null;
        return out;
      }
    };
  }

  /** Stop watching: cancels the call. */
  @Override
  public void close() {
    synchronized (call) {
      call.cancel("watch closed by the client", null);
    }
  }
}
