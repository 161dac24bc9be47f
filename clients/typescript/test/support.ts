/** What the tests import from the package, plus Connect's error class to fake a lost answer. */
export * from "../src/index.js";
export { ConnectError as ConnectErrorForTests } from "@connectrpc/connect";
