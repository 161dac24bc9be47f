package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.CompactionPolicy;

/**
 * Options of a compaction pass.
 *
 * @param policy overrides the session's policy for this pass; null keeps the session's
 * @param force skip the trigger: run the strategy now
 * @param expectedVersion when non-zero, fails with FAILED_PRECONDITION unless the session is at
 *     this version
 */
public record CompactOptions(CompactionPolicy policy, boolean force, long expectedVersion) {
  /** The session's policy, only if its trigger fires. */
  public static final CompactOptions DEFAULT = new CompactOptions(null, false, 0);

  /** The session's strategy, now, whatever its trigger says. */
  public static CompactOptions forced() {
    return new CompactOptions(null, true, 0);
  }

  /** The same options with {@code policy} for this pass only. */
  public CompactOptions withPolicy(CompactionPolicy policy) {
    return new CompactOptions(policy, force, expectedVersion);
  }
}
