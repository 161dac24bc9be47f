/**
 * Usage reports: what a provider counted for a model call, sent with an append to calibrate
 * the session's token estimates.
 */

import type { ModelUsage } from "./gen/compaction/v1/compaction_service_pb.js";

/**
 * What the provider reported for the model call made with the context of `contextVersion`
 * (`GetContextResponse.version`): `promptTokens` is Gemini's `usageMetadata.promptTokenCount`,
 * OpenAI's `usage.prompt_tokens` or `input_tokens`, Anthropic's `input_tokens` plus its cache
 * reads and writes. Sent with an append, it calibrates the session's token estimates.
 */
export interface ModelUsageInit {
  readonly contextVersion: bigint | number;
  readonly promptTokens: bigint | number;
}

/** The wire form of a usage report, or none. @internal */
export function usageMessage(usage: ModelUsageInit | undefined): Pick<ModelUsage, "contextVersion" | "promptTokens"> | undefined {
  if (usage === undefined) return undefined;
  return { contextVersion: BigInt(usage.contextVersion), promptTokens: BigInt(usage.promptTokens) };
}
