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
 * <p>{@link #send} returns with the request id once the request is handed to the transport; the
 * answers — an {@code append} ack, an {@code error} (that request failed, nothing of it was
 * stored, the stream goes on: see {@link SidecarException#fromStatus}) or a background {@code
 * compaction} of the session — are read with {@link #next()} or by iterating. {@link #complete()}
 * says nothing more will be sent; the server then ends the call once every request is answered.
 * {@link #close()} cancels the call if it has not ended. Events get their ids before they are
 * sent, so a batch can be re-sent after a broken stream without being stored twice. Streams are
 * never retried.
 *
 * <p>A send blocks while HTTP/2 flow control holds the stream, as the Python and Go clients' sends
 * do: the transport buffers at most {@link #SEND_BUFFER_BYTES} (plus the one message being sent)
 * before a send waits, so a caller sending faster than the server reads waits instead of filling
 * memory. The server stops reading while its answers go unread, so a caller sending more than a
 * little reads the answers as it goes (another thread). The wait ends with the call: a send that
 * is waiting, or comes after the end, throws {@link SidecarException} with the call's status
 * (DEADLINE_EXCEEDED past the stream's deadline, CANCELLED after {@link #cancel()}).
 *
 * <p>Sending is thread-safe (concurrent sends go out in the order they were called); read from one
 * thread.
 */
public final class EventStream implements AutoCloseable, Iterable<StreamEventsResponse> {
  /** How many bytes of requests the transport may hold before a send blocks: 32 KiB. */
  public static final int SEND_BUFFER_BYTES = Outbox.BUFFER_BYTES;

  private final String sessionId;
  private final Inbox<StreamEventsResponse> inbox = new Inbox<>();
  private final Outbox<StreamEventsRequest, StreamEventsResponse> outbox;
  private boolean ended;

  EventStream(SidecarClient client, String sessionId, Duration deadline) {
    this.sessionId = sessionId;
    CallOptions options = Outbox.withBound(client.streamCallOptions(deadline));
    ClientCall<StreamEventsRequest, StreamEventsResponse> call =
        client.channel().newCall(CompactionServiceGrpc.getStreamEventsMethod(), options);
    inbox.attach(call);
    outbox = new Outbox<>(call, inbox);
    synchronized (call) {
      call.start(outbox, new Metadata());
      call.request(Inbox.WINDOW);
    }
  }

  /**
   * Append {@code events}; returns the request id its answer will carry ("0", "1", ...). Blocks
   * while the transport holds {@link #SEND_BUFFER_BYTES}; see the class comment.
   */
  public String send(List<Event> events) {
    return send(events, null);
  }

  /**
   * Append {@code events} with a model call's usage report (null: none), as {@link
   * AppendOptions#usage()}; returns the request id its answer will carry. Blocks as {@link
   * #send(List)} does.
   */
  public String send(List<Event> events, ModelUsage usage) {
    StreamEventsRequest.Builder request = StreamEventsRequest.newBuilder().addAllEvents(events);
    if (usage != null) {
      request.setUsage(usage);
    }
    StreamEventsRequest template = ready(request);
    return outbox.send(n -> template.toBuilder().setRequestId(Integer.toString(n)).build())
        .getRequestId();
  }

  /**
   * Send a whole request (for {@code expected_version}, {@code create_if_missing} or your own
   * request ids). An empty session id is this stream's session; events without ids get one.
   * Blocks as {@link #send(List)} does.
   */
  public void send(StreamEventsRequest request) {
    StreamEventsRequest ready = ready(request.toBuilder());
    outbox.send(n -> ready);
  }

  /** {@code request} as sent: this stream's session unless it names one, every event with an id. */
  private StreamEventsRequest ready(StreamEventsRequest.Builder request) {
    if (request.getSessionId().isEmpty()) {
      request.setSessionId(sessionId);
    }
    List<Event> events = Events.withIds(request.getEventsList());
    return request.clearEvents().addAllEvents(events).build();
  }

  /**
   * Nothing more will be sent; the server ends the call once every request is answered. Never
   * blocks: a send blocked on the transport at that moment still goes, and a send after this
   * throws IllegalStateException.
   */
  public void complete() {
    outbox.halfClose();
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

  /**
   * Cancel the call (unanswered requests may or may not have been stored); a send blocked on the
   * transport throws CANCELLED.
   */
  public void cancel() {
    outbox.cancel("cancelled by the client");
  }

  /** Cancel the call unless it already ended. */
  @Override
  public void close() {
    if (!ended) {
      cancel();
    }
  }
}
