package dev.compactionsidecar.client;

import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.Status;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;

/**
 * The sending side of a client stream: a send waits while the transport is not ready, as the
 * Python client's {@code write} and the Go client's {@code SendMsg} wait on HTTP/2 flow control,
 * instead of buffering without bound for a caller that sends faster than the server reads.
 *
 * <p>grpc-java's {@code sendMessage} never blocks: it queues. {@link ClientCall#isReady()} says
 * whether fewer than the call's on-ready threshold of bytes ({@link #BUFFER_BYTES}, frame headers
 * included) are queued in the transport; a send here waits until it is, so the transport holds at
 * most that many bytes plus one message, and so at most {@code BUFFER_BYTES / 5 + 1} messages
 * (each takes at least its 5-byte frame header). The wait ends when the transport is ready, or
 * when the call ends — the deadline, a cancel, the server's status, a lost connection — and the
 * send then throws that status. Senders take turns in arrival order, so messages go out in the
 * order their sends were called.
 *
 * <p>It listens to the call in front of the receiving listener, to learn when the transport is
 * ready and when the call ended.
 */
final class Outbox<ReqT, RespT>
    extends ForwardingClientCallListener.SimpleForwardingClientCallListener<RespT> {
  /**
   * How many bytes of messages the transport may hold before a send waits: grpc-java's default
   * on-ready threshold, set here so the bound is this client's, not a default that may move.
   */
  static final int BUFFER_BYTES = 32 * 1024;

  private final ClientCall<ReqT, RespT> call;
  private final ReentrantLock turn = new ReentrantLock(true);
  private int sent; // guarded by turn
  private boolean sending; // a send has its turn; guarded by call
  private boolean completing; // halfClose() was called; guarded by call
  private boolean halfClosed; // guarded by call
  private Status ended; // guarded by call
  private Metadata endedTrailers; // guarded by call

  Outbox(ClientCall<ReqT, RespT> call, ClientCall.Listener<RespT> receiver) {
    super(receiver);
    this.call = call;
  }

  /** The options a call sending through an outbox is made with: its on-ready threshold. */
  static CallOptions withBound(CallOptions options) {
    return options.withOnReadyThreshold(BUFFER_BYTES);
  }

  /**
   * Once every earlier send has gone and the transport is ready, send {@code message(n)}, {@code n}
   * being the number of messages sent before it; returns that message. Throws {@link
   * SidecarException} with the call's status once it has ended (FAILED_PRECONDITION if it ended
   * OK), CANCELLED if the thread is interrupted, and IllegalStateException if {@link #halfClose()}
   * came before its turn.
   */
  ReqT send(IntFunction<ReqT> message) {
    synchronized (call) {
      refuseAfterComplete(); // before waiting for a turn that a blocked send may hold
    }
    try {
      turn.lockInterruptibly();
    } catch (InterruptedException e) {
      throw interrupted();
    }
    try {
      synchronized (call) {
        refuseAfterComplete();
        sending = true;
        try {
          awaitReady();
          ReqT out = message.apply(sent);
          call.sendMessage(out);
          sent++;
          return out;
        } finally {
          sending = false;
          if (completing) {
            halfCloseNow();
          }
        }
      }
    } finally {
      turn.unlock();
    }
  }

  /**
   * Nothing more will be sent. Never waits: a send under way (waiting for the transport) still
   * goes, and the half-close follows it; a send whose turn had not come throws.
   */
  void halfClose() {
    synchronized (call) {
      completing = true;
      if (!sending) {
        halfCloseNow();
      }
    }
  }

  /** Cancel the call; a send waiting for the transport throws CANCELLED at once. */
  void cancel(String message) {
    synchronized (call) {
      call.cancel(message, null);
      end(Status.CANCELLED.withDescription(message), new Metadata());
    }
  }

  @Override
  public void onReady() {
    synchronized (call) {
      call.notifyAll();
    }
    super.onReady();
  }

  @Override
  public void onClose(Status status, Metadata trailers) {
    synchronized (call) {
      end(status, trailers);
    }
    super.onClose(status, trailers);
  }

  /** Called holding the call's monitor. */
  private void refuseAfterComplete() {
    if (completing) {
      throw new IllegalStateException("EventStream: send after complete()");
    }
  }

  /** Called holding the call's monitor; nothing to half-close on a call that ended. */
  private void halfCloseNow() {
    if (!halfClosed && ended == null) {
      halfClosed = true;
      call.halfClose();
    }
  }

  /** Called holding the call's monitor. */
  private void end(Status status, Metadata trailers) {
    if (ended == null) {
      ended = status;
      endedTrailers = trailers;
    }
    call.notifyAll();
  }

  /** Called holding the call's monitor, which waiting releases; onReady and onClose wake it. */
  private void awaitReady() {
    while (ended == null && !call.isReady()) {
      try {
        call.wait();
      } catch (InterruptedException e) {
        throw interrupted();
      }
    }
    if (ended != null && ended.isOk()) {
      throw SidecarException.from(
          Status.FAILED_PRECONDITION.withDescription("the stream has ended").asException());
    }
    if (ended != null) {
      throw SidecarException.from(ended.asRuntimeException(endedTrailers));
    }
  }

  private static SidecarException interrupted() {
    Thread.currentThread().interrupt();
    return SidecarException.from(Status.CANCELLED.withDescription("interrupted").asException());
  }
}
