/**
 * Builders for compaction policies, so a caller writes
 * `policy(strategies.slidingWindow(20), { trigger: triggers.turnCount(30) })`
 * instead of spelling out protobuf oneof cases.
 */

import { fromJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";

import {
  Boundary,
  type ClearToolResultsSchema,
  type CompactionPolicy,
  CompactionPolicySchema,
  type StrategySchema,
  type SummarizeSchema,
  type TriggerSchema,
} from "./gen/compaction/v1/policy_pb.js";

export type TriggerInit = MessageInitShape<typeof TriggerSchema>;
export type StrategyInit = MessageInitShape<typeof StrategySchema>;
export type SummarizeInit = MessageInitShape<typeof SummarizeSchema>;
export type ClearToolResultsInit = MessageInitShape<typeof ClearToolResultsSchema>;

/** When a session compacts on its own (checked after every append). */
export const triggers = {
  /** More than `n` turns in the active window (the one in progress counts). */
  turnCount: (n: number): TriggerInit => ({ kind: { case: "turnCount", value: n } }),
  /** The system message, summaries and conversation reach `n` tokens. */
  tokenCount: (n: number): TriggerInit => ({ kind: { case: "tokenCount", value: n } }),
  /** More than `n` conversation events in the active window. */
  eventCount: (n: number): TriggerInit => ({ kind: { case: "eventCount", value: n } }),
  /** Every `n` completed turns since the last compaction. */
  intervalTurns: (n: number): TriggerInit => ({ kind: { case: "intervalTurns", value: n } }),
  anyOf: (...list: TriggerInit[]): TriggerInit => ({ kind: { case: "anyOf", value: { triggers: list } } }),
  allOf: (...list: TriggerInit[]): TriggerInit => ({ kind: { case: "allOf", value: { triggers: list } } }),
  always: (): TriggerInit => ({ kind: { case: "always", value: true } }),
  /**
   * The window reaches `fraction` (0 < x <= 1) of the session model's input window less its output
   * reserve (`Session.modelProfile`); refused for a session without a model.
   */
  contextFraction: (fraction: number): TriggerInit => ({ kind: { case: "contextFraction", value: fraction } }),
};

/** How a session is compacted; an omitted limit is the server's default. */
export const strategies = {
  slidingWindow: (maxEvents?: number): StrategyInit => ({ kind: { case: "slidingWindow", value: { maxEvents } } }),
  turnWindow: (maxTurns?: number): StrategyInit => ({ kind: { case: "turnWindow", value: { maxTurns } } }),
  tokenBudget: (maxTokens?: number): StrategyInit => ({ kind: { case: "tokenBudget", value: { maxTokens } } }),
  summarize: (options: SummarizeInit = {}): StrategyInit => ({ kind: { case: "summarize", value: options } }),
  /**
   * Replace all but the newest `keepToolUses` (default 3) tool results with a placeholder, in
   * place: nothing is archived, GetContext shows the placeholder (`cleared: true`), ListEvents and
   * search the original. `keepReasoningTurns` also clears the reasoning text of older turns,
   * signatures kept.
   */
  clearToolResults: (options: ClearToolResultsInit = {}): StrategyInit => ({
    kind: { case: "clearToolResults", value: options },
  }),
  /**
   * Run `steps` in order while the trigger still fires (a forced Compact runs them all); each step
   * lands as a compaction of its own. Steps are strategies, never pipelines.
   */
  pipeline: (...steps: StrategyInit[]): StrategyInit => ({ kind: { case: "pipeline", value: { steps } } }),
};

/** A policy: a strategy, an optional trigger, and where cuts may land (default TURN). */
export function policy(
  strategy: StrategyInit,
  options: { readonly trigger?: TriggerInit; readonly boundary?: Boundary } = {},
): MessageInitShape<typeof CompactionPolicySchema> {
  return {
    trigger: options.trigger,
    strategy: { ...strategy, boundary: options.boundary ?? Boundary.UNSPECIFIED },
  };
}

/**
 * A policy from its proto3 JSON document (a string or a parsed value): what `GetSession` prints,
 * e.g. `{"trigger": {"turnCount": 20}, "strategy": {"slidingWindow": {"maxEvents": 20}}}`, with
 * snake_case names accepted too, as every proto3 JSON parser does. Throws naming the field it
 * cannot read.
 */
export function policyFromJson(document: string | JsonValue): CompactionPolicy {
  return fromJson(CompactionPolicySchema, typeof document === "string" ? (JSON.parse(document) as JsonValue) : document);
}
