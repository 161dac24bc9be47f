package dev.compactionsidecar.client;

/**
 * Options of a restore ({@link SessionHandle#restore(String, RestoreOptions)}).
 *
 * @param expectedVersion when non-zero, fails with FAILED_PRECONDITION unless the session is at
 *     this version
 * @param pauseAutoCompaction keep the session's trigger from compacting the restored window again
 *     until its policy is next set (the session's {@code auto_compaction_paused}); a forced
 *     compaction still runs
 */
public record RestoreOptions(long expectedVersion, boolean pauseAutoCompaction) {
  /** No version check, the trigger left as it is. */
  public static final RestoreOptions DEFAULT = new RestoreOptions(0, false);

  /** Restore and pause the trigger until the policy is next set. */
  public static RestoreOptions paused() {
    return new RestoreOptions(0, true);
  }

  /** The same options, checked against {@code expectedVersion}. */
  public RestoreOptions atVersion(long expectedVersion) {
    return new RestoreOptions(expectedVersion, pauseAutoCompaction);
  }
}
