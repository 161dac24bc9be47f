/**
 * The wrapper's own behaviour against a real server: ids and retries, deadlines,
 * cancellation, error details, streams and watches.
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import type { Interceptor } from "@connectrpc/connect";

import {
  Code,
  ConnectErrorForTests,
  MAX_QUEUED_SENDS,
  Role,
  SidecarClient,
  SidecarError,
  drain,
  rejects,
  policy,
  strategies,
  triggers,
  type StreamMessage,
  type WatchUpdate,
} from "./support.js";
import { quickstart } from "../examples/quickstart.js";
import { freePort, startServer, type RunningServer } from "./server.js";

const turn = (n: number) => [
  { id: `u${n}`, role: Role.USER, text: `question ${n} about invoices and the billing export` },
  { id: `a${n}`, role: Role.ASSISTANT, text: `answer ${n}: the export ran at 0${n}:00 and produced ${n}00 rows` },
];

/** Records the event ids each AppendEvents attempt carried. */
function recordAppends(log: string[][]): Interceptor {
  return (next) => async (request) => {
    if (request.method.name === "AppendEvents" && !request.stream) {
      const message = request.message as unknown as { events: { id: string }[] };
      log.push(message.events.map((e) => e.id));
    }
    return next(request);
  };
}

describe("SidecarClient against a running server", () => {
  let server: RunningServer;
  let client: SidecarClient;

  before(async () => {
    server = await startServer({ args: ["--summarizer", "extractive"] });
    client = new SidecarClient({ address: server.address });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("gives events without an id one before the first attempt, and re-sends it after a lost answer", async () => {
    const attempts: string[][] = [];
    let lose = true;
    // The first answer is lost on its way back, as when a connection drops after the commit.
    const loseFirstAnswer: Interceptor = (next) => async (request) => {
      const response = await next(request);
      if (request.method.name === "AppendEvents" && lose) {
        lose = false;
        throw new ConnectErrorForTests("connection reset", Code.Unavailable);
      }
      return response;
    };
    const flaky = new SidecarClient({
      address: server.address,
      interceptors: [recordAppends(attempts), loseFirstAnswer],
      retry: { initialBackoffMs: 10 },
    });
    try {
      const session = flaky.session("retry-lost-answer");
      const result = await session.append(
        [{ role: Role.USER, text: "hello" }, { role: Role.ASSISTANT, text: "hi" }],
        { createIfMissing: true },
      );
      assert.equal(attempts.length, 2);
      assert.deepEqual(attempts[1], attempts[0]);
      assert.match(attempts[0]?.[0] ?? "", /^[0-9a-f]{32}$/);
      assert.deepEqual(result.events.map((e) => e.id), attempts[0]);
      const log = await drain(session.events());
      assert.deepEqual(log.map((e) => e.id), attempts[0], "stored once, not twice");
      assert.equal((await session.get()).version, 1n);
    } finally {
      flaky.close();
    }
  });

  it("exposes BadRequest, ErrorInfo and the status code of a failed call", async () => {
    const bad = await rejects(
      client.createSession("bad-policy", { policy: policy(strategies.summarize({ maxEventsToKeep: 2, overlap: 2 })) }),
      Code.InvalidArgument,
    );
    assert.equal(bad.codeName, "INVALID_ARGUMENT");
    assert.equal(bad.field, "policy.strategy.summarize.overlap");
    assert.match(bad.fieldViolations[0]?.description ?? "", /smaller than max_events_to_keep/);
    assert.match(bad.rawMessage, /^policy\.strategy\.summarize\.overlap: /);
    assert.ok(bad.message.startsWith("INVALID_ARGUMENT: "));

    const session = client.session("errors-version");
    await session.append(turn(0), { createIfMissing: true });
    const stale = await rejects(session.append(turn(1), { expectedVersion: 7 }), Code.FailedPrecondition);
    assert.equal(stale.currentVersion, 1n);
    assert.equal(stale.reason, "VERSION_MISMATCH");

    const missing = await rejects(client.session("no-such-session").context(), Code.NotFound);
    assert.deepEqual(missing.fieldViolations, []);
  });

  it("stores label updates with the append, on the session and on another one, or not at all", async () => {
    const session = client.session("labels-with-append");
    await session.append([{ id: "u1", role: Role.USER, text: "open ticket 42" }], {
      createIfMissing: true,
      labelUpdates: [{ set: { ticket: "42", state: "open" } }, { sessionId: "labels-index", set: { latest: "42" } }],
    });
    assert.deepEqual((await session.get()).labels, { ticket: "42", state: "open" });
    const index = await client.getSession("labels-index");
    assert.deepEqual(index.labels, { latest: "42" });

    const stale = await rejects(
      session.append([{ id: "u2", role: Role.USER, text: "close ticket 42" }], {
        labelUpdates: [
          { remove: ["state"] },
          { sessionId: "labels-index", set: { latest: "43" }, expectedVersion: index.version + 5n },
        ],
      }),
      Code.FailedPrecondition,
    );
    assert.equal(stale.codeName, "FAILED_PRECONDITION");
    assert.deepEqual((await drain(session.events())).map((e) => e.id), ["u1"], "the event was not stored");
    assert.deepEqual((await session.get()).labels, { ticket: "42", state: "open" });
    assert.deepEqual((await client.getSession("labels-index")).labels, { latest: "42" });
  });

  it("streams appends: acks in order, a failed request with its details, background summaries", async () => {
    await client.createSession("stream-summary", {
      policy: policy(strategies.summarize({ maxEventsToKeep: 2, overlap: 1, maxSummaryTokens: 20 }), {
        trigger: triggers.turnCount(2),
      }),
    });
    const stream = client.session("stream-summary").stream({ timeoutMs: 20_000 });
    const ids = await Promise.all([0, 1, 2].map((n) => stream.send(turn(n))));
    const bad = await stream.send([{ id: "x", text: "no role" }]);
    const messages: StreamMessage[] = [];
    for await (const message of stream) {
      messages.push(message);
      if (message.kind === "compaction") stream.close();
    }
    const acks = messages.filter((m) => m.kind === "ack");
    assert.deepEqual(acks.map((m) => m.requestId), ids);
    const failed = messages.find((m) => m.kind === "error");
    assert.equal(failed?.kind, "error");
    if (failed?.kind === "error") {
      assert.equal(failed.requestId, bad);
      assert.equal(failed.error.code, Code.InvalidArgument);
      assert.equal(failed.error.field, "events[0].role");
    }
    const compaction = messages.find((m) => m.kind === "compaction");
    assert.ok(compaction?.kind === "compaction" && compaction.result.compacted, "a background summary landed");
    const context = await client.session("stream-summary").context();
    assert.ok(context.events.some((e) => e.synthetic), "the summary turn is in the context");
  });

  it("lands more sends than the queue holds, in order, while another task reads the answers", async () => {
    const stream = client.session("bounded-send").stream({ timeoutMs: 60_000 });
    const reading = drain(stream);
    const ids: string[] = [];
    const text = "y".repeat(64 * 1024);
    for (let n = 0; n < 3 * MAX_QUEUED_SENDS; n++) {
      ids.push(await stream.send([{ role: Role.USER, text: `${n} ${text}` }], { createIfMissing: true }));
    }
    stream.close();
    const answers = await reading;
    assert.deepEqual(answers.filter((m) => m.kind === "ack").map((m) => m.requestId), ids);
    assert.equal((await client.getSession("bounded-send")).totalEventCount, BigInt(ids.length));
  });

  it("watches a session's compactions until aborted", async () => {
    const session = client.session("watched");
    await session.append([...turn(0), ...turn(1), ...turn(2)], { createIfMissing: true });
    const abort = new AbortController();
    const updates: WatchUpdate[] = [];
    const watching = rejects(
      (async () => {
        for await (const update of session.watch({ signal: abort.signal })) {
          updates.push(update);
          abort.abort();
        }
      })(),
      Code.Canceled,
    );
    // The server subscribes when the call arrives; compact until the watcher has seen one.
    for (let i = 0; i < 50 && updates.length === 0; i++) {
      await session.compact({ policy: policy(strategies.turnWindow(1)), force: true });
      await new Promise((done) => setTimeout(done, 50));
    }
    await watching;
    const first = updates[0];
    assert.ok(first?.kind === "compaction" && first.result.strategy === "turn_window");
  });

  it("ends the watch call when the for-await loop is left", async () => {
    const signals: AbortSignal[] = [];
    const spy: Interceptor = (next) => async (request) => {
      if (request.method.name === "WatchSession") signals.push(request.signal);
      return next(request);
    };
    const watcher = new SidecarClient({ address: server.address, interceptors: [spy] });
    try {
      const session = watcher.session("watched-then-left");
      await session.append([...turn(0), ...turn(1), ...turn(2)], { createIfMissing: true });
      let seen = 0;
      const watching = (async () => {
        for await (const _update of session.watch()) {
          seen += 1;
          break; // the caller is done: the call must end, not stay open on the server
        }
      })();
      for (let i = 0; i < 50 && seen === 0; i++) {
        await session.compact({ policy: policy(strategies.turnWindow(1)), force: true });
        await new Promise((done) => setTimeout(done, 50));
      }
      await watching;
      assert.equal(seen, 1);
      assert.equal(signals.length, 1);
      assert.ok(signals[0]?.aborted, "leaving the loop cancels the WatchSession call");
    } finally {
      watcher.close();
    }
  });

  it("ends a watch at its deadline with DEADLINE_EXCEEDED", async () => {
    await client.session("deadline").append(turn(0), { createIfMissing: true });
    const started = Date.now();
    await rejects(drain(client.session("deadline").watch({ timeoutMs: 300 })), Code.DeadlineExceeded);
    assert.ok(Date.now() - started < 5_000);
  });

  it("clears old tool results with a pipeline: placeholders in the context, originals in the log", async () => {
    const session = client.session("ts-clearing");
    const page = "pod checkout-7f9 OOMKilled, memory limit 512Mi exceeded while building invoices. ".repeat(4);
    const events = [
      { id: "u1", role: Role.USER, text: "why is checkout down?" },
      ...[1, 2, 3].flatMap((n) => [
        { id: `a${n}`, role: Role.ASSISTANT, toolCalls: [{ id: `c${n}`, name: "kubectl", argumentsJson: "{}" }] },
        { id: `t${n}`, role: Role.TOOL, toolResults: [{ callId: `c${n}`, name: "kubectl", content: page }] },
      ]),
    ];
    await client.createSession("ts-clearing", {
      policy: policy(
        strategies.pipeline(strategies.clearToolResults({ keepToolUses: 1 }), strategies.tokenBudget(10_000)),
      ),
    });
    await session.append(events);
    const result = await session.compact({ force: true });
    assert.equal(result.strategy, "pipeline");
    assert.deepEqual(result.clearedEventIds, ["t1", "t2"]);
    const context = await session.context();
    assert.deepEqual(context.events.filter((e) => e.cleared).map((e) => e.id), ["t1", "t2"]);
    assert.ok(!context.events[2]?.toolResults[0]?.content.includes("building invoices"));
    const log = await drain(session.events());
    assert.equal(log[2]?.toolResults[0]?.content, page);
    assert.ok(log[2]?.cleared);
  });

  it("runs the README example", async () => {
    const texts = await quickstart(server.address);
    // turn_count(3) fired on the 4th turn; sliding_window(4) kept the last two turns.
    assert.deepEqual(texts, ["check disk 3", "disk 3 ok", "check disk 4", "disk 4 ok"]);
  });
});

describe("SidecarClient retries, deadlines and cancellation without a server", () => {
  it("retries an append on UNAVAILABLE until the server comes up, with the same ids", async () => {
    const port = await freePort();
    const attempts: string[][] = [];
    const client = new SidecarClient({
      address: `127.0.0.1:${port}`,
      interceptors: [recordAppends(attempts)],
      retry: { retries: 30, initialBackoffMs: 100, maxBackoffMs: 400 },
      timeoutMs: 30_000,
    });
    let server: RunningServer | undefined;
    try {
      const appended = client.session("late-server").append(turn(0), { createIfMissing: true });
      while (attempts.length === 0) await new Promise((done) => setTimeout(done, 10));
      server = await startServer({ port });
      const result = await appended;
      assert.ok(attempts.length >= 2, `expected retries, saw ${attempts.length} attempt(s)`);
      assert.ok(attempts.every((ids) => ids.join() === "u0,a0"));
      assert.deepEqual(result.events.map((e) => e.id), ["u0", "a0"]);
    } finally {
      client.close();
      await server?.stop();
    }
  });

  it("never retries Compact", async () => {
    const port = await freePort();
    let attempts = 0;
    const count: Interceptor = (next) => (request) => {
      attempts += 1;
      return next(request);
    };
    const client = new SidecarClient({ address: `127.0.0.1:${port}`, interceptors: [count], retry: { initialBackoffMs: 10 } });
    try {
      await rejects(client.session("s").compact({ force: true }), Code.Unavailable);
      assert.equal(attempts, 1);
    } finally {
      client.close();
    }
  });

  it("bounds all attempts of a retried call by its timeoutMs", async () => {
    const port = await freePort();
    let attempts = 0;
    const count: Interceptor = (next) => (request) => {
      attempts += 1;
      return next(request);
    };
    const client = new SidecarClient({
      address: `127.0.0.1:${port}`,
      interceptors: [count],
      retry: { retries: 1000, initialBackoffMs: 50 },
    });
    try {
      const started = Date.now();
      const error = await client.session("s").context({ timeoutMs: 600 }).then(
        () => assert.fail("no server, yet the call succeeded"),
        (reason: unknown) => reason,
      );
      // The last attempt's UNAVAILABLE, or DEADLINE_EXCEEDED if the budget ran out mid-attempt.
      assert.ok(error instanceof SidecarError);
      assert.ok([Code.Unavailable, Code.DeadlineExceeded].includes(error.code), error.message);
      assert.ok(Date.now() - started < 3_000, `took ${Date.now() - started} ms`);
      assert.ok(attempts > 1 && attempts < 1000, `${attempts} attempts`);
    } finally {
      client.close();
    }
  });

  it("cancels a call and its retries when the signal aborts", async () => {
    const port = await freePort();
    const client = new SidecarClient({ address: `127.0.0.1:${port}`, retry: { retries: 1000, initialBackoffMs: 100 } });
    try {
      const abort = new AbortController();
      setTimeout(() => abort.abort(), 300);
      const started = Date.now();
      await rejects(client.session("s").append(turn(0), { signal: abort.signal }), Code.Canceled);
      assert.ok(Date.now() - started < 2_000, `took ${Date.now() - started} ms`);
    } finally {
      client.close();
    }
  });
});

describe("SidecarClient with bearer tokens and tenants", () => {
  let server: RunningServer;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "sidecar-ts-auth-"));
    const tokens = join(dir, "tokens");
    writeFileSync(tokens, "acme token-of-acme\nglobex token-of-globex\n");
    server = await startServer({ args: ["--auth-token-file", tokens] });
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("sends its token on every call, and a tenant sees only its own sessions", async () => {
    const acme = new SidecarClient({ address: server.address, token: "token-of-acme" });
    const globex = new SidecarClient({ address: server.address, token: "token-of-globex" });
    const anonymous = new SidecarClient({ address: server.address, retry: { retries: 0 } });
    const wrong = new SidecarClient({ address: server.address, token: "not-a-token", retry: { retries: 0 } });
    try {
      await acme.session("shared-id").append(turn(0), { createIfMissing: true });
      assert.deepEqual((await acme.session("shared-id").context()).events.map((e) => e.id), ["u0", "a0"]);
      // Another tenant: the same id names nothing of theirs, and is theirs to use.
      await rejects(globex.session("shared-id").context(), Code.NotFound);
      await globex.session("shared-id").append(turn(1), { createIfMissing: true });
      assert.deepEqual((await globex.session("shared-id").context()).events.map((e) => e.id), ["u1", "a1"]);
      assert.deepEqual((await acme.session("shared-id").context()).events.map((e) => e.id), ["u0", "a0"]);
      const found = await drain(acme.search("invoices", { includeActive: true }));
      assert.deepEqual(found.map((h) => [h.sessionId, h.event?.id]), [["shared-id", "u0"]]);
      await rejects(anonymous.session("shared-id").context(), Code.Unauthenticated);
      await rejects(wrong.session("shared-id").context(), Code.Unauthenticated);
    } finally {
      acme.close();
      globex.close();
      anonymous.close();
      wrong.close();
    }
  });
});

describe("context of a window too large for one answer", () => {
  let server: RunningServer;

  before(async () => {
    // 8 KiB: a window of a few KB comes from GetContext without its content.
    server = await startServer({ args: ["--max-message-bytes", "8192"] });
  });
  after(async () => {
    await server?.stop();
  });

  it("reads a window in parts within one timeoutMs for all its calls", async () => {
    const plain = new SidecarClient({ address: server.address });
    let calls = 0;
    // Every call takes 200 ms: the GetContext answer and the ListEvents pages together pass 500 ms.
    const slow: Interceptor = (next) => async (request) => {
      calls += 1;
      await new Promise((done) => setTimeout(done, 200));
      return next(request);
    };
    const slowClient = new SidecarClient({ address: server.address, interceptors: [slow] });
    try {
      const big = ["s0", "s1", "s2", "s3"].map((id) => ({ id, role: Role.USER, text: id + "y".repeat(1500) }));
      await plain.session("big-slow").append(big, { createIfMissing: true });
      const started = Date.now();
      await rejects(slowClient.session("big-slow").context({ timeoutMs: 500 }), Code.DeadlineExceeded);
      assert.ok(calls >= 2, "the window was read in parts");
      assert.ok(Date.now() - started < 900, `context() took ${Date.now() - started} ms with timeoutMs 500`);
    } finally {
      plain.close();
      slowClient.close();
    }
  });

  it("is read in pages, and read again when the window changed in between", async () => {
    const plain = new SidecarClient({ address: server.address });
    const omitted: boolean[] = [];
    // An append lands between the GetContext answer and the ListEvents pages.
    const lateAppend: Interceptor = (next) => async (request) => {
      const response = await next(request);
      if (request.method.name === "GetContext" && !response.stream) {
        omitted.push((response.message as unknown as { contentOmitted: boolean }).contentOmitted);
        if (omitted.length === 1) {
          await plain.session("big").append([{ id: "late", role: Role.USER, text: "late" }]);
        }
      }
      return response;
    };
    const watched = new SidecarClient({ address: server.address, interceptors: [lateAppend] });
    try {
      const big = ["q0", "q1", "q2", "q3"].map((id) => ({ id, role: Role.USER, text: id + "x".repeat(1500) }));
      await plain.session("big").append(big, { createIfMissing: true });
      const window = await watched.session("big").context();
      assert.deepEqual(omitted, [true, true]);
      assert.deepEqual(window.events.map((e) => e.id), ["q0", "q1", "q2", "q3", "late"]);
      assert.deepEqual(window.events.map((e) => e.text.length), [1502, 1502, 1502, 1502, 4]);
      assert.equal(window.contentOmitted, false);
      assert.equal(window.version, 2n);
    } finally {
      plain.close();
      watched.close();
    }
  });
});
