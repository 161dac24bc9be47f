/** What the tests import from the package, plus Connect's error class to fake a lost answer. */
export * from "../src/index.js";
export { ConnectError as ConnectErrorForTests } from "@connectrpc/connect";

/** Every item of an async iterable, in order. */
export async function drain<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}
