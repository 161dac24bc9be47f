/**
 * Start a real `compaction-sidecar serve` for the tests: SQLite in a temp dir, a port of its own.
 *
 * The binary is `SIDECAR_BIN`, else the repository's `.venv/bin/compaction-sidecar`
 * (what `make` sets up). A missing binary fails the test loudly: these tests
 * never skip.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** clients/typescript, from dist/test/server.js. */
export const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const REPO_ROOT = resolve(PACKAGE_DIR, "..", "..");

export function sidecarBinary(): string {
  const binary = process.env["SIDECAR_BIN"] || join(REPO_ROOT, ".venv", "bin", "compaction-sidecar");
  if (!existsSync(binary)) {
    throw new Error(`compaction-sidecar not found at ${binary}: run \`make\` (it sets up .venv) or set SIDECAR_BIN`);
  }
  return binary;
}

/** A port nothing listens on right now (for a server started later, as the retry test needs). */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once("error", fail);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => done(port));
    });
  });
}

export interface RunningServer {
  readonly address: string;
  readonly port: number;
  stop(): Promise<void>;
}

const LISTENING = /listening on \S+ \(port (\d+)\)/;

/**
 * Start the server and resolve once it prints its listening line.
 *
 * `port` 0 (the default) lets the kernel pick one, read back from that line.
 */
export function startServer(options: { port?: number; args?: readonly string[] } = {}): Promise<RunningServer> {
  const dir = mkdtempSync(join(tmpdir(), "sidecar-ts-"));
  const args = [
    "serve",
    "--listen",
    `127.0.0.1:${options.port ?? 0}`,
    "--store",
    `sqlite:///${join(dir, "sidecar.db")}`,
    "--shutdown-grace-s",
    "0.5",
    "--log-level",
    "WARNING",
    ...(options.args ?? []),
  ];
  const child: ChildProcess = spawn(sidecarBinary(), args, { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return new Promise((done, fail) => {
    let stdout = "";
    const timer = setTimeout(() => {
      void stop();
      fail(new Error(`compaction-sidecar did not start in 30 s:\n${stderr}`));
    }, 30_000);
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const found = LISTENING.exec(stdout);
      if (found?.[1] !== undefined) {
        clearTimeout(timer);
        const port = Number(found[1]);
        done({ address: `127.0.0.1:${port}`, port, stop });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`compaction-sidecar exited with ${code} before listening:\n${stderr}`));
    });
  });
}
