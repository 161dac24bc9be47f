/**
 * The TypeScript client of the compaction sidecar.
 *
 * `SidecarClient` speaks compaction.v1.CompactionService over gRPC; a
 * session's log is reached through `client.session(id)`. Messages are the
 * generated protobuf-es types (re-exported below); failed calls throw
 * `SidecarError` with the status code and the server's google.rpc details.
 */

export { SidecarClient, type SidecarClientOptions } from "./client.js";
export { type CallOptions, type PolicyInit, type RawClient, type SearchOptions } from "./options.js";
export {
  SessionHandle,
  type AppendOptions,
  type CompactOptions,
  type CompactionsOptions,
  type ContextOptions,
  type EventsOptions,
  type LabelUpdateInit,
  type RestoreOptions,
} from "./session.js";
export { type ModelUsageInit } from "./usage.js";
export {
  EventStream,
  MAX_QUEUED_SEND_BYTES,
  MAX_QUEUED_SENDS,
  Watch,
  type Ack,
  type BackgroundCompaction,
  type Compaction,
  type Missed,
  type RequestFailed,
  type SendOptions,
  type StreamMessage,
  type WatchUpdate,
} from "./streams.js";
export { SidecarError, codeName, detailRegistry, type CodeName, type FieldViolation } from "./errors.js";
export { DEFAULT_RETRY_POLICY, type RetryPolicy } from "./retry.js";
export { newEventId, withIds, type EventInit } from "./ids.js";
export { Code } from "@connectrpc/connect";

export * from "./gen/compaction/v1/compaction_service_pb.js";
export * from "./gen/compaction/v1/event_pb.js";
export * from "./gen/compaction/v1/policy_pb.js";
export * from "./gen/compaction/v1/session_pb.js";
/** One entry of a session's compaction history (`session.compactions()`); `Compaction` is a watch update. */
export type { Compaction as CompactionRecord } from "./gen/compaction/v1/session_pb.js";
export {
  policy,
  policyFromJson,
  strategies,
  triggers,
  type ClearToolResultsInit,
  type StrategyInit,
  type SummarizeInit,
  type TriggerInit,
} from "./policy.js";
