/**
 * The two long-lived calls: `EventStream` (StreamEvents, appends in and acks out)
 * and `Watch` (WatchSession, compaction results out).
 *
 * Both turn the raw protobuf messages into a small tagged union and every
 * failure into a SidecarError, so a caller switches on `kind` and never on
 * a oneof case name.
 */

import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, type CallOptions as ConnectCallOptions } from "@connectrpc/connect";

import {
  StreamEventsRequestSchema,
  type AppendEventsResponse,
  type StreamEventsResponse,
  type WatchSessionResponse,
} from "./gen/compaction/v1/compaction_service_pb.js";
import type { CompactionResult } from "./gen/compaction/v1/session_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";
import { SidecarError } from "./errors.js";
import { withIds, type EventInit } from "./ids.js";
import { Outbox, type OutboxBounds } from "./outbox.js";
import { usageMessage, type ModelUsageInit } from "./usage.js";

type StreamRequest = MessageInitShape<typeof StreamEventsRequestSchema>;

/**
 * How many requests `EventStream.send` may queue ahead of the transport (plus the one the
 * transport is writing): a handful keeps the stream busy while flow control lets it go.
 */
export const MAX_QUEUED_SENDS = 8;

/**
 * How many bytes of requests `EventStream.send` may queue ahead of the transport: 4 MiB, the
 * server's own read-ahead of a stream. A larger request goes alone once the queue is empty.
 */
export const MAX_QUEUED_SEND_BYTES = 4 * 1024 * 1024;

const SEND_QUEUE_BOUNDS: OutboxBounds = { maxItems: MAX_QUEUED_SENDS, maxBytes: MAX_QUEUED_SEND_BYTES };

/** A stream's append of `requestId` succeeded. */
export interface Ack {
  readonly kind: "ack";
  readonly requestId: string;
  readonly sessionId: string;
  readonly result: AppendEventsResponse;
}

/** A stream's append of `requestId` failed; nothing of it was stored, the stream goes on. */
export interface RequestFailed {
  readonly kind: "error";
  readonly requestId: string;
  readonly sessionId: string;
  readonly error: SidecarError;
  /** The google.rpc.Status as the server sent it. */
  readonly status: Status;
}

/** A background compaction of a session the stream appended to landed (or failed: `result.error`). */
export interface BackgroundCompaction {
  readonly kind: "compaction";
  readonly sessionId: string;
  readonly result: CompactionResult;
}

export type StreamMessage = Ack | RequestFailed | BackgroundCompaction;

/** Options of `EventStream.send`. */
export interface SendOptions {
  /** Echoed on the answer; default: "1", "2", ... in send order. */
  readonly requestId?: string;
  /** Append to another session on the same stream (default: the handle's). */
  readonly sessionId?: string;
  /** Fail this request unless the session is at this version. */
  readonly expectedVersion?: bigint | number;
  /** Create the session (with the server's default policy) if it is absent. */
  readonly createIfMissing?: boolean;
  /** A model call's usage report, as in `AppendOptions.usage`. */
  readonly usage?: ModelUsageInit;
}

/**
 * A call's answers, the first asked for as the call opens: a call that ends before anyone reads
 * it (cancelled, past its deadline, refused) rejects that promise, which has a handler, instead
 * of one inside Connect that has none (Node ends the process on an unhandled rejection).
 * Iterated once; leaving early tells the call, as `for await` would.
 */
class Answers<T> implements AsyncIterable<T> {
  private readonly iterator: AsyncIterator<T>;
  private first: Promise<IteratorResult<T>> | undefined;

  constructor(answers: AsyncIterable<T>) {
    this.iterator = answers[Symbol.asyncIterator]();
    this.first = this.iterator.next();
    this.first.catch(() => {}); // read by the iteration, which rethrows it
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    let ended = false;
    try {
      for (;;) {
        const next = this.first ?? this.iterator.next();
        this.first = undefined;
        const answer = await next;
        if (answer.done) {
          ended = true;
          return;
        }
        yield answer.value;
      }
    } catch (reason) {
      ended = true;
      throw reason;
    } finally {
      if (!ended) await this.iterator.return?.();
    }
  }
}

export function streamMessage(message: StreamEventsResponse): StreamMessage {
  const { requestId, sessionId } = message;
  switch (message.result.case) {
    case "append":
      return { kind: "ack", requestId, sessionId, result: message.result.value };
    case "error":
      return {
        kind: "error",
        requestId,
        sessionId,
        error: SidecarError.fromStatus(message.result.value),
        status: message.result.value,
      };
    case "compaction":
      return { kind: "compaction", sessionId, result: message.result.value };
    default:
      throw new SidecarError(Code.Unknown, "a StreamEvents response without a result (newer server?)");
  }
}

/**
 * StreamEvents: `send()` queues an append (events get their ids here) and
 * resolves to its request id; iterate the stream for the answers, in request
 * order, with background compaction results interleaved.
 *
 * Sends are back-pressured like the Python and Go clients': at most
 * `MAX_QUEUED_SENDS` requests and `MAX_QUEUED_SEND_BYTES` wait for the
 * transport, which takes them only as fast as HTTP/2 flow control lets it, and
 * a send beyond that waits for room. A server that stops reading while its
 * answers go unread holds the sender too, so a caller sending more than a few
 * requests reads the answers as it goes (another task iterating the stream).
 * A cancel, an abort or the deadline releases a waiting send at once; the end
 * of the call otherwise reaches it through that iteration.
 */
export class EventStream implements AsyncIterable<StreamMessage> {
  private readonly outbox = new Outbox<StreamRequest>(SEND_QUEUE_BOUNDS);
  private readonly abort = new AbortController();
  private readonly answers: Answers<StreamEventsResponse>;
  private sent = 0;

  constructor(
    open: (requests: AsyncIterable<StreamRequest>, options: ConnectCallOptions) => AsyncIterable<StreamEventsResponse>,
    readonly sessionId: string,
    options: ConnectCallOptions,
  ) {
    const signal = options.signal ? AbortSignal.any([options.signal, this.abort.signal]) : this.abort.signal;
    // An abort ends the call whatever the transport is doing: no send may wait on it after that.
    const aborted = (): void => this.outbox.fail(SidecarError.from(signal.reason));
    if (signal.aborted) aborted();
    else signal.addEventListener("abort", aborted, { once: true });
    this.answers = new Answers(open(this.outbox, { ...options, signal }));
  }

  /**
   * Queue an append; resolves to its request id, echoed on its answer, once it is
   * queued within `MAX_QUEUED_SENDS` and `MAX_QUEUED_SEND_BYTES` (waiting for room,
   * in send order). Rejects with SidecarError once the stream is closed
   * (FAILED_PRECONDITION), cancelled (CANCELLED) or has ended (the call's error, e.g.
   * DEADLINE_EXCEEDED); a send still waiting then rejects too.
   */
  send(events: Iterable<EventInit>, options: SendOptions = {}): Promise<string> {
    this.sent += 1;
    const requestId = options.requestId ?? String(this.sent);
    const request = create(StreamEventsRequestSchema, {
      requestId,
      sessionId: options.sessionId ?? this.sessionId,
      events: withIds(events),
      expectedVersion: BigInt(options.expectedVersion ?? 0),
      createIfMissing: options.createIfMissing ?? false,
      usage: usageMessage(options.usage),
    });
    // Encoded once more by the transport: the bound is on the bytes that go on the wire.
    const bytes = toBinary(StreamEventsRequestSchema, request).byteLength;
    const queued = this.outbox.push(request, bytes).then(() => requestId);
    // A caller that does not await a send (the API before back-pressure returned the id at
    // once) learns of the call's end from the iteration; its rejection must not crash Node.
    queued.catch(() => {});
    return queued;
  }

  /**
   * Half-close: no more sends; sends still waiting for room go first, the answers
   * to what was sent still arrive, then the iteration ends.
   */
  close(): void {
    this.outbox.close();
  }

  /** End the call now; the iteration and every send still waiting reject with CANCELLED. */
  cancel(): void {
    this.abort.abort();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<StreamMessage> {
    try {
      for await (const message of this.answers) {
        yield streamMessage(message);
      }
    } catch (reason) {
      const error = SidecarError.from(reason);
      this.outbox.fail(error);
      throw error;
    } finally {
      this.outbox.close();
    }
  }
}

/** The watcher fell behind and `count` compaction results were dropped for it. */
export interface Missed {
  readonly kind: "missed";
  readonly count: number;
}

/**
 * A compaction of the watched session landed, or a background pass ended without landing one
 * (`result.compacted` false: failed, with `result.error`; superseded; nothing to compact).
 */
export interface Compaction {
  readonly kind: "compaction";
  readonly result: CompactionResult;
}

export type WatchUpdate = Compaction | Missed;

/**
 * WatchSession as an async iterable of updates; failures (deadline, abort) reject as SidecarError.
 * Leaving the `for await` loop (break, return, throw) cancels the call: Connect's iterables do not
 * pass `return()` on to the call, so without this a left watch would stay open on the server.
 */
export class Watch implements AsyncIterable<WatchUpdate> {
  private readonly abort = new AbortController();
  private readonly responses: Answers<WatchSessionResponse>;

  constructor(
    open: (options: ConnectCallOptions) => AsyncIterable<WatchSessionResponse>,
    options: ConnectCallOptions,
  ) {
    const signal = options.signal ? AbortSignal.any([options.signal, this.abort.signal]) : this.abort.signal;
    this.responses = new Answers(open({ ...options, signal }));
  }

  /** End the call now; the iteration rejects with CANCELLED. */
  cancel(): void {
    this.abort.abort();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<WatchUpdate> {
    try {
      for await (const message of this.responses) {
        switch (message.update.case) {
          case "compaction":
            yield { kind: "compaction", result: message.update.value };
            break;
          case "missed":
            yield { kind: "missed", count: message.update.value };
            break;
          default:
            break; // an update kind added by a newer server
        }
      }
    } catch (reason) {
      throw SidecarError.from(reason);
    } finally {
      this.abort.abort();
    }
  }
}
