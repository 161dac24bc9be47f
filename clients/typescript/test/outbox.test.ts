/**
 * The bounded queue behind `EventStream.send`, on its own: what is admitted, what waits, in which
 * order, and how waiting pushes are released.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ConnectError } from "@connectrpc/connect";

import { Outbox } from "../src/outbox.js";
import { Code, SidecarError, rejects } from "./support.js";

/** Whether `promise` is still pending once everything already runnable has run (no I/O here). */
async function waits(promise: Promise<unknown>): Promise<boolean> {
  const settled = promise.then(
    () => false,
    () => false,
  );
  return Promise.race([settled, new Promise<boolean>((done) => setImmediate(() => done(true)))]);
}

/** The next item the transport would take. */
async function take<T>(outbox: Outbox<T>): Promise<T | undefined> {
  const result = await outbox.next();
  return result.done === true ? undefined : result.value;
}

describe("Outbox", () => {
  it("queues up to its count bound, then a push waits until the transport takes one", async () => {
    const outbox = new Outbox<string>({ maxItems: 2, maxBytes: 1000 });
    const [a, b, c] = [outbox.push("a", 1), outbox.push("b", 1), outbox.push("c", 1)];
    assert.equal(await waits(a), false);
    assert.equal(await waits(b), false);
    assert.equal(await waits(c), true, "a third item waits for room");
    assert.equal(outbox.pendingItems, 2);

    assert.equal(await take(outbox), "a");
    assert.equal(await waits(c), false, "taking one admits the waiting push");
    assert.deepEqual([await take(outbox), await take(outbox)], ["b", "c"]);
  });

  it("queues up to its byte bound, in push order, and lets one larger item go alone", async () => {
    const outbox = new Outbox<string>({ maxItems: 8, maxBytes: 10 });
    const a = outbox.push("a", 6);
    const b = outbox.push("b", 6);
    const c = outbox.push("c", 1);
    assert.equal(await waits(a), false);
    assert.equal(await waits(b), true, "6 + 6 bytes is past the bound");
    assert.equal(await waits(c), true, "a small item does not overtake a waiting one");

    assert.equal(await take(outbox), "a");
    assert.equal(await waits(b), false);
    assert.equal(await waits(c), false);
    assert.equal(outbox.pendingBytes, 7);

    const big = outbox.push("big", 50);
    assert.equal(await waits(big), true, "larger than the bound: it waits for an empty queue");
    assert.deepEqual([await take(outbox), await take(outbox)], ["b", "c"]);
    assert.equal(await waits(big), false, "alone in the queue");
    const after = outbox.push("d", 1);
    assert.equal(await waits(after), true, "nothing joins an item past the bound");
    assert.equal(await take(outbox), "big");
    assert.equal(await waits(after), false);
  });

  it("on close, lets waiting pushes through, then ends; a push after close is FAILED_PRECONDITION", async () => {
    const outbox = new Outbox<string>({ maxItems: 1, maxBytes: 1000 });
    const [a, b] = [outbox.push("a", 1), outbox.push("b", 1)];
    outbox.close();
    await rejects(outbox.push("late", 1), Code.FailedPrecondition);
    assert.deepEqual([await take(outbox), await take(outbox), await take(outbox)], ["a", "b", undefined]);
    await Promise.all([a, b]);
  });

  it("on fail, rejects waiting and later pushes with the call's error and ends the iteration", async () => {
    const outbox = new Outbox<string>({ maxItems: 1, maxBytes: 1000 });
    await outbox.push("a", 1);
    const waiting = outbox.push("b", 1);
    outbox.fail(new SidecarError(Code.Unavailable, "the server went away"));
    await rejects(waiting, Code.Unavailable);
    await rejects(outbox.push("c", 1), Code.Unavailable);
    assert.equal(outbox.pendingItems, 0, "what was queued is dropped");
    assert.equal(await take(outbox), undefined);

    const idle = new Outbox<string>({ maxItems: 1, maxBytes: 1000 });
    const taking = idle.next(); // a transport waiting for the next request
    idle.fail(new SidecarError(Code.Canceled, "cancelled"));
    assert.equal((await taking).done, true);
  });

  it("is released by throw or return on a fresh iterator, as Connect ends a call's request iterable", async () => {
    const ends: [(o: Outbox<string>) => Promise<unknown>, Code][] = [
      [(o) => o[Symbol.asyncIterator]().throw(new ConnectError("timed out", Code.DeadlineExceeded)), Code.DeadlineExceeded],
      [(o) => o[Symbol.asyncIterator]().return(), Code.FailedPrecondition],
    ];
    for (const [end, code] of ends) {
      const outbox = new Outbox<string>({ maxItems: 1, maxBytes: 1000 });
      await outbox.push("a", 1);
      const waiting = outbox.push("b", 1);
      await end(outbox);
      await rejects(waiting, code);
    }
  });
});
