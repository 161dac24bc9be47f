/**
 * Issue 20's fields through the wrapper: reasoning and signatures kept byte for byte, the
 * session's model, usage reports on appends and streams, and contexts rendered for a provider.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import type { Interceptor } from "@connectrpc/connect";

import {
  Code,
  ConnectErrorForTests,
  ContextFormat,
  EventStream,
  Role,
  SidecarClient,
  SidecarError,
  drain,
  policy,
  rejects,
  strategies,
  triggers,
  type EventInit,
} from "./support.js";
import { startServer, type RunningServer } from "./server.js";

const bytes = (...values: number[]) => new Uint8Array(values);
const THOUGHT = { text: "order 42 is in the lookup tool", signature: bytes(0xfb, 0xff, 0xbf, 1, 2, 3) };
const REDACTED = { signature: bytes(0, 1, 0xfe, 0xff), redacted: true };
const SUMMARY = { text: "looked it up", signature: bytes(0xfb, 0xef, 9), id: "rs_1" };
const CALL_SIGNATURE = bytes(0xfa, 0xfb, 0xfc, 7);

/** A user question, the assistant's reasoning and signed call, the tool's answer. */
function toolLoop(prefix: string): EventInit[] {
  return [
    { id: `${prefix}u`, role: Role.USER, text: "Where is order 42?" },
    {
      id: `${prefix}a`,
      role: Role.ASSISTANT,
      text: "Let me look.",
      reasoning: [THOUGHT, REDACTED, SUMMARY],
      toolCalls: [{ id: "c1", name: "lookup_order", argumentsJson: '{"order":42}', signature: CALL_SIGNATURE }],
    },
    { id: `${prefix}t`, role: Role.TOOL, toolResults: [{ callId: "c1", name: "lookup_order", content: "shipped" }] },
  ];
}

interface Signed {
  readonly reasoning: readonly { text: string; signature: Uint8Array; redacted: boolean; id: string }[];
  readonly toolCalls: readonly { signature: Uint8Array }[];
}

/** What a provider needs back: every reasoning block and call signature, as plain values. */
function signed(events: readonly Signed[]): unknown[] {
  return events.map((e) => ({
    reasoning: e.reasoning.map((r) => ({ text: r.text, signature: [...r.signature], redacted: r.redacted, id: r.id })),
    calls: e.toolCalls.map((c) => [...c.signature]),
  }));
}

const WANT = [
  { reasoning: [], calls: [] },
  {
    reasoning: [
      { text: THOUGHT.text, signature: [...THOUGHT.signature], redacted: false, id: "" },
      { text: "", signature: [...REDACTED.signature], redacted: true, id: "" },
      { text: SUMMARY.text, signature: [...SUMMARY.signature], redacted: false, id: "rs_1" },
    ],
    calls: [[...CALL_SIGNATURE]],
  },
  { reasoning: [], calls: [] },
];

/** Records each unary request of `method` and answers ABORTED: the wire request, no server behaviour. */
function capture(method: string, into: unknown[]): Interceptor {
  return (next) => async (request) => {
    if (request.method.name === method && !request.stream) {
      into.push(request.message);
      throw new ConnectErrorForTests("captured", Code.Aborted);
    }
    return next(request);
  };
}

describe("provider fields against a running server", () => {
  let server: RunningServer;
  let client: SidecarClient;

  before(async () => {
    server = await startServer({ args: ["--max-message-bytes", "8192"] });
    client = new SidecarClient({ address: server.address });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("keeps reasoning and call signatures byte for byte: ack, context, log and stream", async () => {
    const session = client.session("ts-reasoning");
    const ack = await session.append(toolLoop("r"), { createIfMissing: true });
    const context = await session.context();
    const log = await drain(session.events());
    const stream = client.session("ts-reasoning-stream").stream();
    await stream.send(toolLoop("s"), { createIfMissing: true });
    stream.close();
    const [streamed, ...rest] = await drain(stream);

    assert.deepEqual(signed(ack.events), WANT);
    assert.deepEqual(signed(context.events), WANT);
    assert.deepEqual(signed(log), WANT);
    assert.equal(rest.length, 0);
    assert.equal(streamed?.kind, "ack");
    assert.deepEqual(signed(streamed?.kind === "ack" ? streamed.result.events : []), WANT);
  });

  it("reads a window too large for one answer as events only, reasoning kept, renderedJson empty", async () => {
    const session = client.session("ts-big-rendered");
    const big = ["q0", "q1", "q2", "q3"].map((id) => ({ id, role: Role.USER, text: id + "x".repeat(1500) }));
    await session.append(big, { createIfMissing: true });
    await session.append(toolLoop("r"));
    const answer = await client.raw.getContext({ sessionId: "ts-big-rendered", format: ContextFormat.GEMINI });
    const window = await session.context({ format: ContextFormat.GEMINI });

    assert.equal(answer.contentOmitted, true);
    assert.deepEqual(window.events.map((e) => e.id), ["q0", "q1", "q2", "q3", "ru", "ra", "rt"]);
    assert.deepEqual(signed(window.events.slice(4)), WANT);
    assert.equal(window.contentOmitted, false);
    assert.equal(window.renderedJson, "");
    assert.equal(window.estimatedPromptTokens, answer.estimatedPromptTokens);
  });

  it("gives a session with a model its profile, calibrates it by usage reports, and renders its context", async () => {
    const created = await client.createSession("ts-model", { model: "gemini-2.5-flash" });
    const session = client.session("ts-model");
    const appended = await session.append([{ role: Role.USER, text: "Where is order 42?" }]);
    // Appends are estimated; a forced pass plans on exact counts, so the window read next is exact.
    assert.equal(appended.events[0]?.tokenCountEstimated, true);
    await session.compact({ force: true });
    const sent = await session.context();
    assert.equal(sent.tokenCountEstimated, false);
    const counted = await session.append([{ role: Role.USER, text: "and 43?" }], {
      usage: { contextVersion: sent.version, promptTokens: 2n * BigInt(sent.tokenCount) },
    });
    const calibrated = await session.get();
    const rendered = await session.context({ format: ContextFormat.OPENAI_CHAT });
    const ignored = await session.append([{ role: Role.USER, text: "thanks" }], { usage: { contextVersion: 999, promptTokens: 10 } });
    const renamed = await client.updateSession("ts-model", { model: "claude-sonnet-4-5" });
    const unknown = await rejects(client.createSession("ts-model-2", { model: "no-such-model" }), Code.InvalidArgument);

    assert.equal(created.model, "gemini-2.5-flash");
    assert.deepEqual(
      [created.modelProfile?.provider, created.modelProfile?.inputWindowTokens, created.modelProfile?.maxOutputTokens],
      ["gemini", 1048576, 65536],
    );
    assert.equal(created.calibration?.factor, 1);
    assert.equal(counted.usageIgnoredReason, "");
    assert.deepEqual([calibrated.calibration?.factor, calibrated.calibration?.samples], [2, 1n]);
    assert.equal(rendered.estimatedPromptTokens, 2 * rendered.tokenCount);
    assert.deepEqual(JSON.parse(rendered.renderedJson), {
      messages: [
        { role: "user", content: "Where is order 42?" },
        { role: "user", content: "and 43?" },
      ],
    });
    assert.match(ignored.usageIgnoredReason, /999/);
    assert.equal(renamed.modelProfile?.provider, "anthropic");
    assert.equal(unknown.field, "model");
  });

  it("builds a context_fraction trigger and a clearing that keeps reasoning turns", async () => {
    const created = await client.createSession("ts-fraction", {
      model: "gpt-4o",
      policy: policy(strategies.clearToolResults({ keepToolUses: 1, keepReasoningTurns: 1 }), {
        trigger: triggers.contextFraction(0.5),
      }),
    });
    const unmodelled = await rejects(
      client.createSession("ts-fraction-2", { policy: policy(strategies.slidingWindow(2), { trigger: triggers.contextFraction(0.5) }) }),
      Code.InvalidArgument,
    );

    assert.deepEqual(created.policy?.trigger?.kind, { case: "contextFraction", value: 0.5 });
    const strategy = created.policy?.strategy?.kind;
    assert.equal(strategy?.case === "clearToolResults" ? strategy.value.keepReasoningTurns : undefined, 1);
    assert.equal(unmodelled.field, "policy.trigger.context_fraction");
  });

  it("sends the model on create and names it in an update's mask", async () => {
    const seen: unknown[] = [];
    const recorded = new SidecarClient({
      address: server.address,
      interceptors: [capture("CreateSession", seen), capture("UpdateSession", seen)],
    });
    try {
      await assert.rejects(recorded.createSession("m", { model: "gemini-2.5-flash" }), SidecarError);
      await assert.rejects(recorded.updateSession("m", { model: "gpt-5", expectedVersion: 2 }), SidecarError);
      await assert.rejects(recorded.updateSession("m", { labels: { a: "b" }, model: "" }), SidecarError);
      await assert.rejects(recorded.updateSession("m", {}), TypeError);
    } finally {
      recorded.close();
    }
    const [create, rename, clear] = seen as [
      { model: string },
      { session: { model: string }; updateMask: { paths: string[] }; expectedVersion: bigint },
      { session: { model: string }; updateMask: { paths: string[] } },
    ];
    assert.equal(create.model, "gemini-2.5-flash");
    assert.deepEqual(rename.updateMask.paths, ["model"]);
    assert.equal(rename.session.model, "gpt-5");
    assert.equal(rename.expectedVersion, 2n);
    assert.deepEqual(clear.updateMask.paths, ["labels", "model"]);
    assert.equal(clear.session.model, "");
  });

  it("sends a usage report with an append and a context's format", async () => {
    const seen: unknown[] = [];
    const recorded = new SidecarClient({
      address: server.address,
      interceptors: [capture("AppendEvents", seen), capture("GetContext", seen)],
    });
    try {
      const session = recorded.session("u");
      await assert.rejects(session.append([{ role: Role.USER, text: "hi" }], { usage: { contextVersion: 7, promptTokens: 1234 } }));
      await assert.rejects(session.append([{ role: Role.USER, text: "hi" }]));
      await assert.rejects(session.context({ format: ContextFormat.ANTHROPIC }));
      await assert.rejects(session.context());
    } finally {
      recorded.close();
    }
    const [reported, plain, rendered, unrendered] = seen as [
      { usage?: { contextVersion: bigint; promptTokens: bigint } },
      { usage?: unknown },
      { format: ContextFormat },
      { format: ContextFormat },
    ];
    assert.deepEqual(reported.usage && [reported.usage.contextVersion, reported.usage.promptTokens], [7n, 1234n]);
    assert.equal(plain.usage, undefined);
    assert.equal(rendered.format, ContextFormat.ANTHROPIC);
    assert.equal(unrendered.format, ContextFormat.UNSPECIFIED);
  });
});

describe("EventStream.send", () => {
  it("puts a usage report on the request it queues", async () => {
    const sent: { usage?: { contextVersion: bigint; promptTokens: bigint } }[] = [];
    const stream = new EventStream(
      async function* (requests) {
        for await (const request of requests) sent.push(request as (typeof sent)[number]);
      },
      "s",
      {},
    );
    await stream.send([{ role: Role.USER, text: "hi" }], { usage: { contextVersion: 3n, promptTokens: 99 } });
    await stream.send([{ role: Role.USER, text: "again" }]);
    stream.close();
    await drain(stream);

    const usage = sent[0]?.usage;
    assert.deepEqual(usage && [usage.contextVersion, usage.promptTokens], [3n, 99n]);
    assert.equal(sent[1]?.usage, undefined);
  });
});
