package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.LabelUpdate;
import java.util.List;

/**
 * Options of an append.
 *
 * @param expectedVersion when non-zero, the append fails with FAILED_PRECONDITION unless the
 *     session is at this version ({@link SidecarException#currentVersion()} says where it is)
 * @param createIfMissing create the session, with the server's default policy, if it is absent
 * @param labelUpdates label changes stored in the same transaction as the events, with them or
 *     not at all: an update with an empty {@code session_id} is on the session appended to,
 *     another id names a session of the same tenant (created, with no policy, when absent); an
 *     update's non-zero {@code expected_version} fails the whole append with FAILED_PRECONDITION
 *     unless that session is at that version
 */
public record AppendOptions(
    long expectedVersion, boolean createIfMissing, List<LabelUpdate> labelUpdates) {
  /** No version check; the session must exist. */
  public static final AppendOptions DEFAULT = new AppendOptions(0, false);

  /** Copies {@code labelUpdates} (null: none). */
  public AppendOptions {
    labelUpdates = labelUpdates == null ? List.of() : List.copyOf(labelUpdates);
  }

  /** No label updates. */
  public AppendOptions(long expectedVersion, boolean createIfMissing) {
    this(expectedVersion, createIfMissing, List.of());
  }

  /** Fail unless the session is at {@code version}. */
  public static AppendOptions expectingVersion(long version) {
    return new AppendOptions(version, false);
  }

  /** Create the session if it is absent. */
  public static AppendOptions creatingIfMissing() {
    return new AppendOptions(0, true);
  }

  /** The same options with {@code updates} stored with the events. */
  public AppendOptions withLabelUpdates(List<LabelUpdate> updates) {
    return new AppendOptions(expectedVersion, createIfMissing, updates);
  }

  /** The same options with {@code updates} stored with the events. */
  public AppendOptions withLabelUpdates(LabelUpdate... updates) {
    return withLabelUpdates(List.of(updates));
  }
}
