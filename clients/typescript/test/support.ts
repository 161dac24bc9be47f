/** What the tests import from the package, plus Connect's error class to fake a lost answer. */
import assert from "node:assert/strict";

import { Code, SidecarError } from "../src/index.js";

export * from "../src/index.js";
export { ConnectError as ConnectErrorForTests } from "@connectrpc/connect";

/** Every item of an async iterable, in order. */
export async function drain<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

/** The SidecarError `promise` rejects with, checked to carry `code`. */
export async function rejects(promise: Promise<unknown>, code: Code): Promise<SidecarError> {
  try {
    await promise;
  } catch (reason) {
    assert.ok(reason instanceof SidecarError, `expected a SidecarError, got ${String(reason)}`);
    assert.equal(reason.code, code, reason.message);
    return reason;
  }
  assert.fail(`expected ${Code[code]}, the call succeeded`);
}
