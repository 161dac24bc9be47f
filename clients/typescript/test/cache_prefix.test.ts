/**
 * The window's cache prefix through `context()` against a real server: `cachePrefixId` kept by
 * appends and moved by a compaction or a restore, the stable prefix (`stablePrefixEvents`,
 * `stablePrefixTokens`) the window as the last change left it, also for a window read in parts.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { Role, SidecarClient, policy, strategies } from "./support.js";
import { startServer, type RunningServer } from "./server.js";

const turn = (n: number, text = `question ${n}`) => [
  { id: `u${n}`, role: Role.USER, text },
  { id: `a${n}`, role: Role.ASSISTANT, text: `answer ${n}` },
];

describe("cache prefix of the context", () => {
  let server: RunningServer;
  let client: SidecarClient;

  before(async () => {
    // 8 KiB: a window of a few KB comes from GetContext without its content.
    server = await startServer({ args: ["--max-message-bytes", "8192"] });
    client = new SidecarClient({ address: server.address });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  it("keeps the id through appends, moves it on a compaction and a restore", async () => {
    await client.createSession("ts-cache", { policy: policy(strategies.slidingWindow(2)) });
    const session = client.session("ts-cache");
    await session.append(turn(1));
    const first = await session.context();
    assert.equal(first.cachePrefixId.length, 32);
    assert.deepEqual([first.stablePrefixTokens, first.stablePrefixEvents], [0, 0]);

    await session.append(turn(2));
    assert.equal((await session.context()).cachePrefixId, first.cachePrefixId);

    await session.compact({ force: true });
    const compacted = await session.context();
    assert.notEqual(compacted.cachePrefixId, first.cachePrefixId);
    assert.equal(compacted.stablePrefixEvents, compacted.events.length);
    assert.equal(compacted.stablePrefixTokens, compacted.tokenCount);

    await session.append(turn(3));
    const grown = await session.context();
    assert.equal(grown.cachePrefixId, compacted.cachePrefixId);
    assert.deepEqual([grown.stablePrefixTokens, grown.stablePrefixEvents], [compacted.stablePrefixTokens, 2]);
    assert.deepEqual(
      grown.events.slice(0, grown.stablePrefixEvents).map((e) => e.id),
      compacted.events.map((e) => e.id),
    );

    await session.restore();
    const restored = await session.context();
    assert.ok(![first.cachePrefixId, compacted.cachePrefixId].includes(restored.cachePrefixId));
    assert.equal(restored.stablePrefixEvents, restored.events.length);
  });

  it("keeps the header answer's id and stable prefix when the window is read in parts", async () => {
    await client.createSession("ts-cache-big", { policy: policy(strategies.slidingWindow(4)) });
    const session = client.session("ts-cache-big");
    for (let n = 0; n < 4; n++) await session.append(turn(n, `q${n} ` + "x".repeat(1500)));
    await session.compact({ force: true });
    await session.append([{ id: "late", role: Role.USER, text: "y".repeat(1500) }]);
    const header = await client.raw.getContext({ sessionId: "ts-cache-big" });
    const window = await session.context();

    assert.equal(header.contentOmitted, true);
    assert.equal(window.contentOmitted, false);
    assert.deepEqual(window.events.map((e) => e.id), ["u2", "a2", "u3", "a3", "late"]);
    assert.equal(window.cachePrefixId, header.cachePrefixId);
    assert.equal(window.cachePrefixId.length, 32);
    assert.equal(window.stablePrefixEvents, 4);
    assert.equal(window.stablePrefixTokens, header.stablePrefixTokens);
    const prefix = window.events.slice(0, window.stablePrefixEvents);
    assert.equal(window.stablePrefixTokens, prefix.reduce((sum, e) => sum + e.tokenCount, 0));
  });
});
