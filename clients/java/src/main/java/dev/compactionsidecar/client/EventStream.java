package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.CompactionServiceGrpc;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.ModelUsage;
import dev.compactionsidecar.v1.StreamEventsRequest;
import dev.compactionsidecar.v1.StreamEventsResponse;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.Metadata;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * One StreamEvents call: appends sent one after another, each answered on its own.
 *
 * <p>{@link #send} returns at once with the request id; the answers — an {@code append} ack, an
 * {@code error} (that request failed, nothing of it was stored, the stream goes on: see {@link
 * SidecarException#fromStatus}) or a background {@code compaction} of the session — are read with
 * {@link #next()} or by iterating. {@link #complete()} says nothing more will be sent; the server
 * then ends the call once every request is answered. {@link #close()} cancels the call if it has
 * not ended. Events get their ids before they are sent, so a batch can be re-sent after a broken
 * stream without being stored twice. Streams are never retried.
 *
 * <p>Sending is thread-safe; read from one thread.
 */
public final class EventStream implements AutoCloseable, Iterable<StreamEventsResponse> {
  private final String sessionId;
  private final ClientCall<StreamEventsRequest, StreamEventsResponse> call;
  private final Inbox<StreamEventsResponse> inbox = new Inbox<>();
  private int sent;
  private boolean completed;
  private boolean ended;

  EventStream(SidecarClient client, String sessionId, Duration deadline) {
    this.sessionId = sessionId;
    CallOptions options = client.streamCallOptions(deadline);
    this.call = client.channel().newCall(CompactionServiceGrpc.getStreamEventsMethod(), options);
    inbox.attach(call);
    synchronized (call) {
      call.start(inbox, new Metadata());
      call.request(Inbox.WINDOW);
    }
  }

  /** Append {@code events}; returns the request id its answer will carry ("0", "1", ...). */
  public String send(List<Event> events) {
    return send(events, null);
  }

  /**
   * Append {@code events} with a model call's usage report (null: none), as {@link
   * AppendOptions#usage()}; returns the request id its answer will carry.
   */
  public String send(List<Event> events, ModelUsage usage) {
    synchronized (call) {
      String requestId = Integer.toString(sent);
      StreamEventsRequest.Builder request =
          StreamEventsRequest.newBuilder().setRequestId(requestId).addAllEvents(events);
      if (usage != null) {
        request.setUsage(usage);
      }
      send(request.build());
      return requestId;
    }
  }

  /**
   * Send a whole request (for {@code expected_version}, {@code create_if_missing} or your own
   * request ids). An empty session id is this stream's session; events without ids get one.
   */
  public void send(StreamEventsRequest request) {
    StreamEventsRequest.Builder builder = request.toBuilder();
    if (builder.getSessionId().isEmpty()) {
      builder.setSessionId(sessionId);
    }
    builder.clearEvents().addAllEvents(Events.withIds(request.getEventsList()));
    synchronized (call) {
      if (completed) {
        throw new IllegalStateException("EventStream: send after complete()");
      }
      call.sendMessage(builder.build());
      sent++;
    }
  }

  /** Nothing more will be sent; the server ends the call once every request is answered. */
  public void complete() {
    synchronized (call) {
      if (!completed) {
        completed = true;
        call.halfClose();
      }
    }
  }

  /** The next answer, blocking; null once the call ended. Throws if the call failed. */
  public StreamEventsResponse next() {
    return next(null);
  }

  /** The next answer, blocking up to {@code timeout} (then DEADLINE_EXCEEDED, the call goes on). */
  public StreamEventsResponse next(Duration timeout) {
    StreamEventsResponse response = inbox.take(timeout);
    if (response == null) {
      ended = true;
    }
    return response;
  }

  /** {@link #complete()}, then every answer still to come, in order. */
  public List<StreamEventsResponse> drain() {
    complete();
    List<StreamEventsResponse> out = new ArrayList<>();
    for (StreamEventsResponse response : this) {
      out.add(response);
    }
    return out;
  }

  /** The answers as they arrive, blocking between them, until the call ends. */
  @Override
  public Iterator<StreamEventsResponse> iterator() {
    return new Iterator<>() {
      private StreamEventsResponse peeked;

      @Override
      public boolean hasNext() {
        if (peeked == null && !ended) {
          peeked = EventStream.this.next();
        }
        return peeked != null;
      }

      @Override
      public StreamEventsResponse next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        StreamEventsResponse out = peeked;
        peeked = null;
        return out;
      }
    };
  }

  /** Cancel the call (unanswered requests may or may not have been stored). */
  public void cancel() {
    synchronized (call) {
      call.cancel("cancelled by the client", null);
    }
  }

  /** Cancel the call unless it already ended. */
  @Override
  public void close() {
    if (!ended) {
      cancel();
    }
  }
}
