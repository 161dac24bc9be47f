/**
 * The request side of a client stream: a queue, bounded in requests and in bytes, that the
 * transport reads as an async iterator.
 *
 * The Python and Go clients' sends wait while HTTP/2 flow control holds the stream (grpc.aio's
 * `write`, grpc-go's `SendMsg`). Connect's Node transport writes one message at a time and takes
 * the next only once Node's HTTP/2 stream has sent the last one, which flow control holds while the
 * server does not read, so the hold reaches as far as this queue: bounding it makes a send wait for
 * room the same way, instead of growing memory for a caller that sends faster than the server reads.
 */

import { Code } from "@connectrpc/connect";

import { SidecarError } from "./errors.js";

/** How much an `Outbox` holds that the transport has not taken yet. */
export interface OutboxBounds {
  /** At most this many items. */
  readonly maxItems: number;
  /** At most this many bytes; one larger item still goes alone when the queue is empty. */
  readonly maxBytes: number;
}

interface Entry<T> {
  readonly item: T;
  readonly bytes: number;
}

interface Waiter<T> extends Entry<T> {
  readonly admit: () => void;
  readonly refuse: (error: SidecarError) => void;
}

/**
 * A FIFO of items waiting for the transport. `push` resolves once the item is queued within the
 * bounds, waiting behind earlier pushes for room; it rejects once the outbox has failed (the call
 * ended, failed or was cancelled) or was closed. Nothing waits for ever on an outbox that failed.
 *
 * It is its own iterator, and `[Symbol.asyncIterator]()` returns it: Connect tells the request
 * iterable that the call is over (deadline, abort, the server's error, the end) by calling
 * `throw` / `return` on a *fresh* `[Symbol.asyncIterator]()`, which must reach this queue to
 * release what waits in it.
 */
export class Outbox<T> implements AsyncIterableIterator<T> {
  private readonly queued: Entry<T>[] = [];
  private queuedBytes = 0;
  private readonly waiting: Waiter<T>[] = [];
  private taker: ((result: IteratorResult<T>) => void) | undefined;
  private closed = false;
  private failure: SidecarError | undefined;

  constructor(readonly bounds: OutboxBounds) {}

  /** Items queued and not yet taken by the transport (waiting pushes not included). */
  get pendingItems(): number {
    return this.queued.length;
  }

  /** Their bytes, as given to `push`. */
  get pendingBytes(): number {
    return this.queuedBytes;
  }

  /** Pushes waiting for room. */
  get waitingPushes(): number {
    return this.waiting.length;
  }

  /** Queue `item` (`bytes` long) once there is room and every earlier push is queued. */
  push(item: T, bytes: number): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.closed) return Promise.reject(new SidecarError(Code.FailedPrecondition, "send after close()"));
    if (this.waiting.length === 0 && this.fits(bytes)) {
      this.enqueue({ item, bytes });
      return Promise.resolve();
    }
    return new Promise((admit, refuse) => this.waiting.push({ item, bytes, admit, refuse }));
  }

  /** No more pushes; what is queued or waiting still goes, then the iteration ends. */
  close(): void {
    this.closed = true;
    this.settleTaker();
  }

  /** The call is over: drop what is queued and reject every waiting and later push with `error`. */
  fail(error: SidecarError): void {
    if (this.failure !== undefined) return;
    this.failure = error;
    this.queued.length = 0;
    this.queuedBytes = 0;
    for (const waiter of this.waiting.splice(0)) waiter.refuse(error);
    this.settleTaker();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    const entry = this.take();
    if (entry !== undefined) return Promise.resolve({ done: false, value: entry.item });
    if (this.finished()) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve) => (this.taker = resolve));
  }

  /** The transport stops reading: the call ended, so nothing queued can be sent any more. */
  return(): Promise<IteratorResult<T>> {
    this.fail(new SidecarError(Code.FailedPrecondition, "the stream has ended"));
    return Promise.resolve({ done: true, value: undefined });
  }

  /** The call failed with `reason` (deadline, abort, the server's error). */
  throw(reason: unknown): Promise<IteratorResult<T>> {
    this.fail(SidecarError.from(reason));
    return Promise.resolve({ done: true, value: undefined });
  }

  /** Room for `bytes` more: always in an empty queue, so a large item goes alone. */
  private fits(bytes: number): boolean {
    if (this.queued.length === 0) return true;
    return this.queued.length < this.bounds.maxItems && this.queuedBytes + bytes <= this.bounds.maxBytes;
  }

  private enqueue(entry: Entry<T>): void {
    this.queued.push(entry);
    this.queuedBytes += entry.bytes;
    this.settleTaker();
  }

  /** The oldest queued item, making room for the pushes waiting behind it, in their order. */
  private take(): Entry<T> | undefined {
    const entry = this.queued.shift();
    if (entry === undefined) return undefined;
    this.queuedBytes -= entry.bytes;
    for (let next = this.waiting[0]; next !== undefined && this.fits(next.bytes); next = this.waiting[0]) {
      this.waiting.shift();
      this.queued.push(next);
      this.queuedBytes += next.bytes;
      next.admit();
    }
    return entry;
  }

  private finished(): boolean {
    return this.failure !== undefined || (this.closed && this.queued.length === 0 && this.waiting.length === 0);
  }

  /** Hand a waiting `next()` the oldest item, or the end. */
  private settleTaker(): void {
    const taker = this.taker;
    if (taker === undefined) return;
    const entry = this.take();
    if (entry !== undefined) {
      this.taker = undefined;
      taker({ done: false, value: entry.item });
    } else if (this.finished()) {
      this.taker = undefined;
      taker({ done: true, value: undefined });
    }
  }
}
