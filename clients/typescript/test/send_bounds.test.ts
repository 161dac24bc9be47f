/**
 * `EventStream.send` is back-pressured: against a server that reads nothing, only what fits the
 * send queue's bounds (plus the one request the transport is writing) is accepted, the rest waits,
 * and every waiting send is released with an error when the call is cancelled, times out or ends.
 * (test/client.test.ts has the real server take more sends than the queue holds.)
 */

import assert from "node:assert/strict";
import http2 from "node:http2";
import { describe, it } from "node:test";

import {
  Code,
  MAX_QUEUED_SEND_BYTES,
  MAX_QUEUED_SENDS,
  Role,
  SidecarClient,
  SidecarError,
  drain,
  rejects,
  type EventStream,
} from "./support.js";

const MiB = 1024 * 1024;
/** A request of a little more than 1 MiB: the HTTP/2 window of a server that reads nothing holds it. */
const big = (n: number) => [{ role: Role.USER, text: `${n} ` + "x".repeat(MiB) }];
/** The most of 20 big sends that may be accepted: the queue's bytes, plus the one the transport writes. */
const MOST_BIG_ACCEPTED = Math.floor(MAX_QUEUED_SEND_BYTES / MiB) + 1;
const small = (n: number) => [{ role: Role.USER, text: `small ${n}` }];

/** An HTTP/2 server that answers StreamEvents' headers and never reads the request body. */
class DeafServer {
  private readonly server = http2.createServer();
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private arrived: (call: http2.ServerHttp2Stream) => void = () => {};
  /** The first call to arrive. */
  readonly call = new Promise<http2.ServerHttp2Stream>((done) => (this.arrived = done));

  async start(): Promise<string> {
    this.server.on("session", (session) => {
      this.sessions.add(session);
      session.on("close", () => this.sessions.delete(session));
    });
    this.server.on("stream", (call) => {
      call.on("error", () => {}); // the client's cancel resets the stream
      call.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      this.arrived(call);
    });
    await new Promise<void>((done) => this.server.listen(0, "127.0.0.1", done));
    const address = this.server.address();
    return `127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`;
  }

  /** End `call` with a gRPC status, the client still sending on it. */
  fail(call: http2.ServerHttp2Stream, code: Code, message: string): void {
    call.once("wantTrailers", () => call.sendTrailers({ "grpc-status": String(code), "grpc-message": message }));
    call.end();
  }

  async stop(): Promise<void> {
    for (const session of this.sessions) session.destroy();
    await new Promise<void>((done) => this.server.close(() => done()));
  }
}

/** Each send's outcome: its request id, or the SidecarError it was rejected with. */
function outcomes(sends: Promise<string>[]): Promise<(string | SidecarError)[]> {
  return Promise.all(
    sends.map((send) =>
      send.catch((reason: unknown) => {
        assert.ok(reason instanceof SidecarError, `a send rejected with ${String(reason)}`);
        return reason;
      }),
    ),
  );
}

/** Read the stream to its end; what it rejects with, if it does. */
async function ending(stream: EventStream): Promise<SidecarError | undefined> {
  try {
    await drain(stream);
    return undefined;
  } catch (reason) {
    assert.ok(reason instanceof SidecarError);
    return reason;
  }
}

/** Run `test` with a client of a server of its own that reads nothing. */
async function againstDeafServer(test: (client: SidecarClient, deaf: DeafServer) => Promise<void>): Promise<void> {
  const deaf = new DeafServer();
  const client = new SidecarClient({ address: await deaf.start() });
  try {
    await test(client, deaf);
  } finally {
    client.close();
    await deaf.stop();
  }
}

describe("EventStream.send against a server that reads nothing", () => {
  it("accepts no more than the byte bound of large requests; cancel rejects every waiting send", () =>
    againstDeafServer(async (client, deaf) => {
      const stream = client.session("unread").stream();
      const sends = Array.from({ length: 20 }, (_, n) => stream.send(big(n)));
      await deaf.call;
      const reading = ending(stream);
      stream.cancel();
      const done = await outcomes(sends);

      const accepted = done.filter((d) => typeof d === "string");
      assert.ok(accepted.length <= MOST_BIG_ACCEPTED, `${accepted.length} accepted`);
      assert.deepEqual(accepted, done.slice(0, accepted.length), "accepted in send order");
      for (const d of done.slice(accepted.length)) assert.equal((d as SidecarError).code, Code.Canceled);
      assert.equal((await reading)?.code, Code.Canceled);
    }),
  );

  it("accepts no more than the count bound of small requests behind one the transport cannot send", () =>
    againstDeafServer(async (client, deaf) => {
      const stream = client.session("unread").stream();
      const jam = stream.send(big(0));
      const sends = Array.from({ length: 3 * MAX_QUEUED_SENDS }, (_, n) => stream.send(small(n)));
      await deaf.call;
      const reading = ending(stream);
      stream.cancel();
      const done = await outcomes([jam, ...sends]);

      const accepted = done.filter((d) => typeof d === "string");
      assert.ok(accepted.length <= MAX_QUEUED_SENDS + 1, `${accepted.length} accepted`);
      assert.ok(done.slice(accepted.length).every((d) => d instanceof SidecarError && d.code === Code.Canceled));
      await reading;
    }),
  );

  it("rejects waiting sends with DEADLINE_EXCEEDED when the stream's deadline passes", () =>
    againstDeafServer(async (client) => {
      const stream = client.session("unread").stream({ timeoutMs: 300 });
      const sends = Array.from({ length: 20 }, (_, n) => stream.send(big(n)));
      const done = await outcomes(sends);
      const refused = done.filter((d) => d instanceof SidecarError);
      assert.ok(refused.length >= 20 - MOST_BIG_ACCEPTED);
      for (const error of refused) assert.equal(error.code, Code.DeadlineExceeded);
      assert.equal((await ending(stream))?.code, Code.DeadlineExceeded);
    }),
  );

  it("releases waiting sends with the server's status when it ends the call, as the answers are read", () =>
    againstDeafServer(async (client, deaf) => {
      const stream = client.session("unread").stream();
      const sends = Array.from({ length: 20 }, (_, n) => stream.send(big(n)));
      const reading = ending(stream);
      deaf.fail(await deaf.call, Code.ResourceExhausted, "too much");
      const refused = (await outcomes(sends)).filter((d) => d instanceof SidecarError);
      assert.ok(refused.length >= 20 - MOST_BIG_ACCEPTED);
      assert.equal((await reading)?.code, Code.ResourceExhausted);
      assert.ok((await outcomes([stream.send(small(0))]))[0] instanceof SidecarError, "a send after the end is refused");
    }),
  );

  it("releases waiting sends when the connection is lost, as the answers are read", () =>
    againstDeafServer(async (client, deaf) => {
      const stream = client.session("unread").stream();
      const sends = Array.from({ length: 20 }, (_, n) => stream.send(big(n)));
      const reading = ending(stream);
      (await deaf.call).session?.destroy();
      const refused = (await outcomes(sends)).filter((d) => d instanceof SidecarError);
      assert.ok(refused.length >= 20 - MOST_BIG_ACCEPTED);
      assert.ok((await reading) instanceof SidecarError);
    }),
  );

  it("rejects a send after close() with FAILED_PRECONDITION and one after cancel() with CANCELLED", () =>
    againstDeafServer(async (client) => {
      const closed = client.session("unread").stream();
      closed.close();
      await rejects(closed.send(small(0)), Code.FailedPrecondition);
      closed.cancel();
      await ending(closed);

      const cancelled = client.session("unread").stream();
      cancelled.cancel();
      await rejects(cancelled.send(small(0)), Code.Canceled);
      await ending(cancelled);
    }),
  );
});

/** Run `body`; the reasons of the promise rejections nobody handled meanwhile (Node's default is to crash on them). */
async function unhandledDuring(body: () => Promise<void>): Promise<unknown[]> {
  const unhandled: unknown[] = [];
  const seen = (reason: unknown): void => void unhandled.push(reason);
  process.on("unhandledRejection", seen);
  try {
    await body();
    await new Promise((done) => setTimeout(done, 200)); // rejections surface a few ticks later
  } finally {
    process.off("unhandledRejection", seen);
  }
  return unhandled;
}

describe("streams and watches ended with nobody listening", () => {
  it("cancelling a watch that was never read is no unhandled rejection", async () => {
    const unhandled = await unhandledDuring(() =>
      againstDeafServer(async (client, deaf) => {
        const watch = client.session("unread").watch();
        await deaf.call;
        watch.cancel();
      }),
    );
    assert.deepEqual(unhandled, []);
  });

  it("a send nobody awaits, waiting when the stream is cancelled, is no unhandled rejection", async () => {
    const unhandled = await unhandledDuring(() =>
      againstDeafServer(async (client, deaf) => {
        const stream = client.session("unread").stream();
        for (let n = 0; n < 20; n += 1) void stream.send(big(n)); // sent as the old API allowed: not awaited
        const reading = ending(stream);
        await deaf.call;
        stream.cancel();
        assert.equal((await reading)?.code, Code.Canceled);
      }),
    );
    assert.deepEqual(unhandled, []);
  });

  it("cancelling a stream that was never read is no unhandled rejection", async () => {
    const unhandled = await unhandledDuring(() =>
      againstDeafServer(async (client, deaf) => {
        const stream = client.session("unread").stream();
        await stream.send(small(0));
        await deaf.call;
        stream.cancel();
        await new Promise((done) => setTimeout(done, 50));
        assert.equal((await ending(stream))?.code, Code.Canceled, "read later, it says why it ended");
      }),
    );
    assert.deepEqual(unhandled, []);
  });
});
