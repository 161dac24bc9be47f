/**
 * `SidecarClient`: a connection to the compaction sidecar, for sessions and search.
 *
 * Calls go over gRPC (HTTP/2, plaintext h2c to a local sidecar or TLS) through
 * Connect's gRPC transport, and take and return the generated protobuf-es
 * messages, which are plain typed objects: pass `{ role: Role.USER, text: "hi" }`
 * where an Event is expected. A failed call throws `SidecarError`. Reads and
 * appends are retried on UNAVAILABLE; CreateSession, UpdateSession,
 * DeleteSession, Compact, RestoreCompaction and the streams never are. Every call takes
 * `timeoutMs` (a deadline for all its attempts together, default the client's)
 * and `signal` (an AbortSignal that cancels it).
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, type CallOptions as ConnectCallOptions, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import type * as http2 from "node:http2";

import {
  CompactionService,
  type SearchEventsRequestSchema,
  type SearchHit,
} from "./gen/compaction/v1/compaction_service_pb.js";
import type { Session } from "./gen/compaction/v1/session_pb.js";
import { SidecarError } from "./errors.js";
import type { CallOptions, PolicyInit, RawClient, SearchOptions } from "./options.js";
import { DEFAULT_RETRY_POLICY, withRetries, type RetryPolicy } from "./retry.js";
import { SessionHandle, type SessionClient } from "./session.js";

export interface SidecarClientOptions {
  /** Where the sidecar listens: `host:port` (plaintext h2c), or an `http://` / `https://` URL. */
  readonly address: string;
  /** Sent as `authorization: Bearer <token>` on every call. */
  readonly token?: string;
  /** The default deadline of each call, in milliseconds (default 30000; `undefined` in a call keeps it). */
  readonly timeoutMs?: number;
  /** Retries of safe calls on UNAVAILABLE (default: 3 repeats, 100 ms doubling to 2 s). */
  readonly retry?: Partial<RetryPolicy>;
  /** TLS settings (ca, cert, key, servername...) for an `https://` address. */
  readonly tls?: http2.SecureClientSessionOptions;
  /** Connect interceptors (tracing, tests), outermost first. */
  readonly interceptors?: readonly Interceptor[];
}

function baseUrl(address: string): string {
  return /^https?:\/\//.test(address) ? address : `http://${address}`;
}

export class SidecarClient implements SessionClient {
  /** The generated client, for anything the wrapper does not cover. */
  readonly raw: RawClient;
  readonly timeoutMs: number | undefined;
  readonly retryPolicy: RetryPolicy;
  private readonly sessions: Http2SessionManager;

  constructor(options: SidecarClientOptions) {
    const url = baseUrl(options.address);
    this.sessions = new Http2SessionManager(url, {}, options.tls);
    const interceptors: Interceptor[] = [...(options.interceptors ?? [])];
    if (options.token !== undefined) {
      const header = `Bearer ${options.token}`;
      interceptors.unshift((next) => (request) => {
        request.header.set("authorization", header);
        return next(request);
      });
    }
    const transport = createGrpcTransport({ baseUrl: url, sessionManager: this.sessions, interceptors });
    this.raw = createClient(CompactionService, transport);
    this.timeoutMs = "timeoutMs" in options ? options.timeoutMs : 30_000;
    this.retryPolicy = { ...DEFAULT_RETRY_POLICY, ...options.retry };
  }

  /** Close the HTTP/2 connection; open streams and watches end. */
  close(): void {
    this.sessions.abort();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * One unary call, retried on UNAVAILABLE when `retry` (the caller vouches it is safe).
   * @internal
   */
  async unary<T>(
    call: (options: ConnectCallOptions) => Promise<T>,
    retry: boolean,
    options: CallOptions | undefined,
  ): Promise<T> {
    const budget = options?.timeoutMs ?? this.timeoutMs;
    const signal = options?.signal;
    const attempt = (timeoutMs: number | undefined): Promise<T> =>
      call({ timeoutMs, signal }).catch((reason: unknown) => {
        throw SidecarError.from(reason);
      });
    if (!retry) {
      return attempt(budget);
    }
    return withRetries(attempt, this.retryPolicy, budget, signal);
  }

  /** Options for a stream: the deadline is the whole stream's, the signal ends it. @internal */
  streamOptions(options: CallOptions | undefined): ConnectCallOptions {
    return { timeoutMs: options?.timeoutMs, signal: options?.signal };
  }

  // -- sessions ---------------------------------------------------------------

  /**
   * Create a session; without a policy it gets the server's default.
   * `model` is the model the agent calls with its context (e.g. "gemini-2.5-flash"): the
   * session then shows its `modelProfile`; one the server has no profile of is
   * INVALID_ARGUMENT naming "model".
   * Not retried: after a lost answer, ALREADY_EXISTS could not tell our session from someone else's.
   */
  createSession(
    sessionId: string,
    init: {
      readonly policy?: PolicyInit;
      readonly labels?: Record<string, string>;
      readonly model?: string;
    } = {},
    options?: CallOptions,
  ): Promise<Session> {
    const request = { sessionId, policy: init.policy, labels: init.labels ?? {}, model: init.model ?? "" };
    return this.unary((o) => this.raw.createSession(request, o), false, options);
  }

  /** A session's header: version, policy, counters. NOT_FOUND if absent. */
  getSession(sessionId: string, options?: CallOptions): Promise<Session> {
    return this.unary((o) => this.raw.getSession({ sessionId }, o), true, options);
  }

  /** Every session having all of `labelFilter`, in id order, page after page. */
  listSessions(
    filter: { readonly labelFilter?: Record<string, string>; readonly pageSize?: number } = {},
    options?: CallOptions,
  ): AsyncIterable<Session> {
    const request = { labelFilter: filter.labelFilter ?? {}, pageSize: filter.pageSize ?? 0 };
    return this.paged(async (pageToken) => {
      const page = await this.unary((o) => this.raw.listSessions({ ...request, pageToken }, o), true, options);
      return [page.sessions, page.nextPageToken];
    });
  }

  /**
   * Replace a session's policy, labels and/or model; only the ones given change.
   * `policy: null` removes the policy, `model: ""` the model. With `expectedVersion` it fails with
   * FAILED_PRECONDITION unless the session is at that version. Not retried:
   * every update moves the version on.
   */
  updateSession(
    sessionId: string,
    update: {
      readonly policy?: PolicyInit | null;
      readonly labels?: Record<string, string>;
      readonly model?: string;
      readonly expectedVersion?: bigint | number;
    },
    options?: CallOptions,
  ): Promise<Session> {
    const paths: string[] = [];
    if (update.policy !== undefined) paths.push("policy");
    if (update.labels !== undefined) paths.push("labels");
    if (update.model !== undefined) paths.push("model");
    if (paths.length === 0) {
      return Promise.reject(new TypeError("updateSession: pass policy, labels and/or model"));
    }
    const request = {
      session: {
        sessionId,
        policy: update.policy ?? undefined,
        labels: update.labels ?? {},
        model: update.model ?? "",
      },
      updateMask: create(FieldMaskSchema, { paths }),
      expectedVersion: BigInt(update.expectedVersion ?? 0),
    };
    return this.unary((o) => this.raw.updateSession(request, o), false, options);
  }

  /** Delete a session and its whole log. Not retried: a repeat would report NOT_FOUND. */
  async deleteSession(sessionId: string, options?: CallOptions): Promise<void> {
    await this.unary((o) => this.raw.deleteSession({ sessionId }, o), false, options);
  }

  /** A handle on one session's log; makes no call. */
  session(sessionId: string): SessionHandle {
    return new SessionHandle(this, sessionId);
  }

  /**
   * Full-text search over archived events (and the active ones with
   * `includeActive`), every session unless `sessionId`; best hits first, page after page.
   */
  search(query: string, options: SearchOptions = {}): AsyncIterable<SearchHit> {
    const request: MessageInitShape<typeof SearchEventsRequestSchema> = {
      query,
      sessionId: options.sessionId ?? "",
      roles: [...(options.roles ?? [])],
      includeActive: options.includeActive ?? false,
      pageSize: options.pageSize ?? 0,
    };
    if (options.since !== undefined) request.since = timestampFromDate(options.since);
    if (options.until !== undefined) request.until = timestampFromDate(options.until);
    return this.paged(async (pageToken) => {
      const page = await this.unary((o) => this.raw.searchEvents({ ...request, pageToken }, o), true, options);
      return [page.hits, page.nextPageToken];
    });
  }

  /** Every item of every page: `fetch(pageToken)` returns a page and the next token. @internal */
  async *paged<T>(fetch: (pageToken: string) => Promise<[readonly T[], string]>): AsyncGenerator<T> {
    let token = "";
    do {
      const [items, next] = await fetch(token);
      yield* items;
      token = next;
    } while (token !== "");
  }
}
