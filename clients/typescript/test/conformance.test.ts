/**
 * The shared conformance scenarios (tests/conformance/scenarios.json) against a
 * real `compaction-sidecar serve`, through SidecarClient: one test per scenario.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";

import { SidecarClient } from "../src/index.js";
import { capture, check, loadScenarios, match, runScenario, scenarioPath, substitute, type Json } from "./conformance.js";
import { startServer, type RunningServer } from "./server.js";

const doc = loadScenarios();

describe(`conformance (${scenarioPath()})`, () => {
  let server: RunningServer;
  let client: SidecarClient;

  before(async () => {
    server = await startServer({ args: doc.server_args });
    client = new SidecarClient({ address: server.address, timeoutMs: 30_000 });
  });

  after(async () => {
    client?.close();
    await server?.stop();
  });

  for (const scenario of doc.scenarios) {
    it(scenario.name, async () => {
      const failures = await runScenario(client, scenario);
      assert.deepEqual(failures, [], failures.join("\n"));
    });
  }
});

describe("conformance matching rules", () => {
  const cases: [Json, Json, boolean][] = [
    [{ version: "2" }, { version: 2, other: 1 }, true],
    [{ version: "2" }, { version: "3" }, false],
    [{ compacted: false }, {}, true],
    [{ events: [] }, {}, true],
    [{ version: "0" }, {}, true],
    [{ compacted: true }, {}, false],
    [{ events: [{ id: "*" }] }, { events: [{ id: "x" }, { id: "y" }] }, false],
    [["*", "b"], ["a", "b"], true],
    [{ a: { b: "c" } }, { a: { b: "c", d: "e" } }, true],
    [{ tokenCount: "1.0" }, { tokenCount: 1 }, true],
    [{ text: "yes" }, { text: "no" }, false],
  ];
  for (const [expected, actual, ok] of cases) {
    it(`${JSON.stringify(expected)} vs ${JSON.stringify(actual)} -> ${ok}`, () => {
      assert.equal(match(expected, actual).length === 0, ok);
    });
  }

  it("reports a wrong expectation with the path and both sides", () => {
    const outcome = { code: "OK", message: "", fieldViolations: [], response: { events: [{ id: "u1" }], version: "1" } };
    assert.deepEqual(check({ event_ids: ["u2"], response: { version: "1" } }, outcome), [
      'event_ids[0]: expected "u2", got "u1"',
    ]);
    assert.deepEqual(check({ code: "NOT_FOUND" }, outcome), ["code: expected NOT_FOUND, got OK ()"]);
  });

  it("matches rendered against the parsed renderedJson", () => {
    const outcome = { code: "OK", message: "", fieldViolations: [], response: { renderedJson: '{"messages":[{"role":"user"}]}' } };
    assert.deepEqual(check({ rendered: { messages: [{ role: "user" }] } }, outcome), []);
    assert.deepEqual(check({ rendered: { messages: [{ role: "system" }] } }, outcome), [
      'rendered.messages[0].role: expected "system", got "user"',
    ]);
    const unrendered = { ...outcome, response: {} };
    assert.deepEqual(check({ rendered: {} }, unrendered), ["rendered: the response has no renderedJson"]);
  });

  it("substitutes values captured from an earlier step's response into later steps", () => {
    const response = { result: { compactionId: "c9" }, compactions: [{ compactionId: "c8" }] };
    const [values, missing] = capture({ newer: "result.compactionId", older: "compactions.0.compactionId" }, response);
    assert.deepEqual([...values], [["newer", "c9"], ["older", "c8"]]);
    assert.deepEqual(missing, []);
    const step = { request: { compactionId: "${older}" }, expect: { message_contains: "${newer} is" } };
    assert.deepEqual(substitute(step, values), { request: { compactionId: "c8" }, expect: { message_contains: "c9 is" } });
    assert.deepEqual(capture({ token: "nextPageToken" }, { compactions: [] })[1], [
      'capture token: no string at nextPageToken of {"compactions":[]}',
    ]);
    assert.throws(() => substitute({ compactionId: "${never}" }, new Map()), /was not captured/);
  });

  it("fails differs when the value matches one listed, is absent, or the values are no list", () => {
    const outcome = { code: "OK", message: "", fieldViolations: [], response: { cachePrefixId: "p2", stablePrefixEvents: 2 } };
    assert.deepEqual(check({ differs: { cachePrefixId: ["p0", "p1"] } }, outcome), []);
    assert.deepEqual(check({ differs: { cachePrefixId: ["p1", "p2"] } }, outcome), [
      'differs cachePrefixId: expected other than "p2", got "p2"',
    ]);
    assert.deepEqual(check({ differs: { stablePrefixEvents: ["2"] } }, outcome), [
      'differs stablePrefixEvents: expected other than "2", got 2',
    ]);
    assert.deepEqual(check({ differs: { cachePrefixId: ["p1"] } }, { ...outcome, response: {} }), [
      "differs cachePrefixId: absent from {}",
    ]);
    assert.deepEqual(check({ differs: { cachePrefixId: "p1" } }, outcome), [
      'differs cachePrefixId: expected a list of values, got "p1"',
    ]);
  });
});
