/**
 * Retrying calls that are safe to repeat, on UNAVAILABLE only, with bounded backoff.
 *
 * A call is safe to repeat when doing it twice has the effect of doing it
 * once: reads, and appends whose events all carry an id chosen before the
 * first attempt (the server answers a re-sent id with the stored event).
 * Compact and CreateSession are never retried: a lost answer leaves no way to
 * tell "done" from "not done".
 *
 * Two bounds hold every retried call: at most `retries` repeats, and the
 * call's `timeoutMs` is a deadline for all attempts and backoffs together, so
 * a retried call never takes longer than an unretried one could.
 */

import { Code } from "@connectrpc/connect";

import { SidecarError } from "./errors.js";

/** How often and how patiently to repeat a call that failed with UNAVAILABLE. */
export interface RetryPolicy {
  /** Repeats after the first attempt (default 3; 0 turns retries off). */
  readonly retries: number;
  /** The first backoff in milliseconds (default 100). */
  readonly initialBackoffMs: number;
  /** The cap on a backoff in milliseconds (default 2000). */
  readonly maxBackoffMs: number;
  /** Each backoff is the previous one times this (default 2). */
  readonly multiplier: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  retries: 3,
  initialBackoffMs: 100,
  maxBackoffMs: 2000,
  multiplier: 2,
};

/** The status codes worth another attempt: the server could not be reached or was draining. */
const RETRYABLE: ReadonlySet<Code> = new Set([Code.Unavailable]);

/**
 * The n-th backoff (from 0): `initialBackoffMs * multiplier**n`, capped, and
 * jittered down by up to half so that clients cut off together do not come
 * back together.
 */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const ceiling = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Resolves after `ms`, or rejects with CANCELLED as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new SidecarError(Code.Canceled, "the call was aborted", [], { cause: signal.reason }));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new SidecarError(Code.Canceled, "the call was aborted", [], { cause: signal?.reason }));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Run `attempt(timeLeftMs)` until it succeeds or may not be repeated.
 *
 * `timeLeftMs` is what remains of `budgetMs` (undefined: no deadline); the
 * attempt passes it on as its own timeout. Errors are SidecarErrors; the last
 * one is thrown.
 */
export async function withRetries<T>(
  attempt: (timeLeftMs: number | undefined) => Promise<T>,
  policy: RetryPolicy,
  budgetMs: number | undefined,
  signal: AbortSignal | undefined,
): Promise<T> {
  const deadline = budgetMs === undefined ? undefined : Date.now() + budgetMs;
  for (let number = 0; ; number++) {
    const left = deadline === undefined ? undefined : Math.max(1, deadline - Date.now());
    try {
      return await attempt(left);
    } catch (reason) {
      const error = SidecarError.from(reason);
      if (!RETRYABLE.has(error.code) || number >= policy.retries || signal?.aborted) {
        throw error;
      }
      const delay = backoffMs(policy, number);
      if (deadline !== undefined && Date.now() + delay >= deadline) {
        throw error;
      }
      await sleep(delay, signal);
    }
  }
}
