/**
 * Undo through the wrapper against a real server: the compaction history, newest first and paged,
 * restoring the newest compaction, an out-of-order restore refused, and search hits naming the
 * compaction that archived them.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import {
  Code,
  CompactionCause,
  Role,
  SidecarClient,
  drain,
  policy,
  rejects,
  strategies,
  type CompactionRecord,
} from "./support.js";
import { startServer, type RunningServer } from "./server.js";

const turn = (n: number) => [
  { id: `u${n}`, role: Role.USER, text: `question ${n} about the walrus` },
  { id: `a${n}`, role: Role.ASSISTANT, text: `answer ${n}: the walrus sleeps` },
];

describe("undo against a running server", () => {
  let server: RunningServer;
  let client: SidecarClient;

  before(async () => {
    server = await startServer();
    client = new SidecarClient({ address: server.address });
  });
  after(async () => {
    client?.close();
    await server?.stop();
  });

  /** A session with two forced compactions, the older archiving turn 1, the newer turn 2. */
  async function compactedTwice(sessionId: string): Promise<[string, string]> {
    await client.createSession(sessionId, { policy: policy(strategies.slidingWindow(2)) });
    const session = client.session(sessionId);
    await session.append([...turn(1), ...turn(2)]);
    const older = await session.compact({ force: true });
    await session.append(turn(3));
    const newer = await session.compact({ force: true });
    return [older.compactionId, newer.compactionId];
  }

  it("lists the history newest first, page after page, and names the compaction behind a search hit", async () => {
    const [older, newer] = await compactedTwice("ts-undo-list");
    const session = client.session("ts-undo-list");
    const history: CompactionRecord[] = await drain(session.compactions({ pageSize: 1 }));
    assert.deepEqual(
      history.map((c) => [c.compactionId, c.cause, c.archivedEventIds]),
      [
        [newer, CompactionCause.FORCE, ["u2", "a2"]],
        [older, CompactionCause.FORCE, ["u1", "a1"]],
      ],
    );
    const hits = await drain(session.search("question 1"));
    assert.equal(hits[0]?.event?.id, "u1");
    assert.equal(hits[0]?.archivedBy, older);
  });

  it("restores the newest compaction: the window back, the restore in the history, the trigger paused", async () => {
    const [, newer] = await compactedTwice("ts-undo-restore");
    const session = client.session("ts-undo-restore");
    const restore = await session.restore("", { expectedVersion: 5, pauseAutoCompaction: true });
    assert.equal(restore.strategy, "restore");
    assert.deepEqual(restore.restoredEventIds, ["u2", "a2"]);
    assert.deepEqual(
      (await session.context()).events.map((e) => e.id),
      ["u2", "a2", "u3", "a3"],
    );
    const [latest, undone] = await drain(session.compactions());
    assert.equal(latest?.cause, CompactionCause.RESTORE);
    assert.equal(latest?.restores, newer);
    assert.equal(undone?.restoredBy, restore.compactionId);
    assert.equal((await session.get()).autoCompactionPaused, true);
  });

  it("refuses an out-of-order restore, naming the newer compaction, and an unknown one", async () => {
    const [older, newer] = await compactedTwice("ts-undo-order");
    const session = client.session("ts-undo-order");
    const refused = await rejects(session.restore(older), Code.FailedPrecondition);
    assert.match(refused.rawMessage, new RegExp(newer));
    assert.deepEqual(refused.limits, [newer]);
    await rejects(session.restore("no-such-compaction"), Code.NotFound);
    assert.deepEqual((await session.context()).events.map((e) => e.id), ["u3", "a3"]);
  });
});
