package dev.compactionsidecar.client;

/**
 * Options of an append.
 *
 * @param expectedVersion when non-zero, the append fails with FAILED_PRECONDITION unless the
 *     session is at this version ({@link SidecarException#currentVersion()} says where it is)
 * @param createIfMissing create the session, with the server's default policy, if it is absent
 */
public record AppendOptions(long expectedVersion, boolean createIfMissing) {
  /** No version check; the session must exist. */
  public static final AppendOptions DEFAULT = new AppendOptions(0, false);

  /** Fail unless the session is at {@code version}. */
  public static AppendOptions expectingVersion(long version) {
    return new AppendOptions(version, false);
  }

  /** Create the session if it is absent. */
  public static AppendOptions creatingIfMissing() {
    return new AppendOptions(0, true);
  }
}
