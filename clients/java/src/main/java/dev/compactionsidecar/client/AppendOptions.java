package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.LabelUpdate;
import dev.compactionsidecar.v1.ModelUsage;
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
 * @param usage what the provider reported for the model call made with the context of {@code
 *     usage.context_version} (null: none); it calibrates the session's token estimates, and one
 *     the server cannot take is no error: the response's {@code usage_ignored_reason} says why
 */
public record AppendOptions(
    long expectedVersion,
    boolean createIfMissing,
    List<LabelUpdate> labelUpdates,
    ModelUsage usage) {
  /** No version check; the session must exist. */
  public static final AppendOptions DEFAULT = new AppendOptions(0, false);

  /** Copies {@code labelUpdates} (null: none). */
  public AppendOptions {
    labelUpdates = labelUpdates == null ? List.of() : List.copyOf(labelUpdates);
  }

  /** No usage report. */
  public AppendOptions(long expectedVersion, boolean createIfMissing, List<LabelUpdate> labelUpdates) {
    this(expectedVersion, createIfMissing, labelUpdates, null);
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
    return new AppendOptions(expectedVersion, createIfMissing, updates, usage);
  }

  /** The same options with {@code updates} stored with the events. */
  public AppendOptions withLabelUpdates(LabelUpdate... updates) {
    return withLabelUpdates(List.of(updates));
  }

  /** The same options with a usage report of the model call made with an earlier context. */
  public AppendOptions withUsage(ModelUsage report) {
    return new AppendOptions(expectedVersion, createIfMissing, labelUpdates, report);
  }

  /**
   * The same options with a usage report: {@code promptTokens} the provider counted for the call
   * made with the context at {@code contextVersion}.
   */
  public AppendOptions withUsage(long contextVersion, long promptTokens) {
    return withUsage(
        ModelUsage.newBuilder()
            .setContextVersion(contextVersion)
            .setPromptTokens(promptTokens)
            .build());
  }
}
