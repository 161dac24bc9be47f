package dev.compactionsidecar.client;

import io.grpc.ClientCall;
import io.grpc.Metadata;
import io.grpc.Status;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The receiving side of a streaming call: messages queue up here until taken, the terminal status
 * comes last.
 *
 * <p>Flow control follows the taker: a window of {@link #WINDOW} messages is requested up front
 * and one more each time one is taken, so a caller that stops reading stops the server too,
 * instead of filling memory.
 */
final class Inbox<T> extends ClientCall.Listener<T> {
  static final int WINDOW = 32;

  private record Closed(Status status, Metadata trailers) {}

  private final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
  private final CompletableFuture<Void> headers = new CompletableFuture<>();
  private ClientCall<?, T> call;
  private Closed closed;
  private volatile Closed closedEarly;

  void attach(ClientCall<?, T> call) {
    this.call = call;
  }

  /** Completes when the server sent its headers, or when the call ended before it did. */
  CompletableFuture<Void> headers() {
    return headers;
  }

  @Override
  public void onHeaders(Metadata metadata) {
    headers.complete(null);
  }

  @Override
  public void onMessage(T message) {
    queue.add(message);
  }

  @Override
  public void onClose(Status status, Metadata trailers) {
    Closed end = new Closed(status, trailers);
    closedEarly = end;
    headers.complete(null);
    queue.add(end);
  }

  /** Throws the call's error if it has already ended with one (before anything was taken). */
  void throwIfFailed() {
    Closed end = closedEarly;
    if (end != null && !end.status().isOk()) {
      throw SidecarException.from(end.status().asRuntimeException(end.trailers()));
    }
  }

  /**
   * The next message, or null once the call ended OK; throws {@link SidecarException} when it ended
   * with an error. Blocks up to {@code timeout} (null: for ever), then throws a DEADLINE_EXCEEDED
   * {@link SidecarException} without ending the call.
   */
  @SuppressWarnings("unchecked")
  T take(Duration timeout) {
    if (closed != null) {
      return end();
    }
    Object item;
    try {
      item =
          timeout == null ? queue.take() : queue.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw SidecarException.from(Status.CANCELLED.withDescription("interrupted").asException());
    }
    if (item == null) {
      throw SidecarException.from(
          Status.DEADLINE_EXCEEDED.withDescription("no message within " + timeout).asException());
    }
    if (item instanceof Closed c) {
      closed = c;
      return end();
    }
    synchronized (call) {
      call.request(1);
    }
    return (T) item;
  }

  private T end() {
    if (closed.status().isOk()) {
      return null;
    }
    throw SidecarException.from(closed.status().asRuntimeException(closed.trailers()));
  }
}
