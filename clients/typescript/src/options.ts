/**
 * The types the client and a session handle both speak in: the raw generated client their
 * calls go through, per-call options, a policy as a plain object, and the options of `search`.
 * Both import them from here, so neither imports the other for them.
 */

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";

import type { CompactionService } from "./gen/compaction/v1/compaction_service_pb.js";
import type { Role } from "./gen/compaction/v1/event_pb.js";
import type { CompactionPolicySchema } from "./gen/compaction/v1/policy_pb.js";

/** The generated Connect client of compaction.v1.CompactionService: every RPC, raw. */
export type RawClient = Client<typeof CompactionService>;

/** A policy as a plain object: `{ trigger: { kind: { case: "turnCount", value: 20 } }, ... }`. */
export type PolicyInit = MessageInitShape<typeof CompactionPolicySchema>;

/** Per-call options. */
export interface CallOptions {
  /** A deadline for the call, all its retries and backoffs included. Default: the client's `timeoutMs`. */
  readonly timeoutMs?: number;
  /** Cancels the call (and its retries): it rejects with CANCELLED. */
  readonly signal?: AbortSignal;
}

/** Options of `search`. */
export interface SearchOptions extends CallOptions {
  /** Restrict to one session; unset searches every session. */
  readonly sessionId?: string;
  /** Restrict to these roles. */
  readonly roles?: readonly Role[];
  /** Search the active window too (archived events are always searched). */
  readonly includeActive?: boolean;
  /** Events at or after this time. */
  readonly since?: Date;
  /** Events before this time. */
  readonly until?: Date;
  /** Hits per page fetched (default: the server's, 100). */
  readonly pageSize?: number;
}
