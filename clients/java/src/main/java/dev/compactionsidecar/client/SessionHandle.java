package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.AppendEventsRequest;
import dev.compactionsidecar.v1.AppendEventsResponse;
import dev.compactionsidecar.v1.CompactRequest;
import dev.compactionsidecar.v1.Compaction;
import dev.compactionsidecar.v1.CompactionResult;
import dev.compactionsidecar.v1.ContextFormat;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.GetContextRequest;
import dev.compactionsidecar.v1.GetContextResponse;
import dev.compactionsidecar.v1.ListCompactionsRequest;
import dev.compactionsidecar.v1.ListCompactionsResponse;
import dev.compactionsidecar.v1.ListEventsRequest;
import dev.compactionsidecar.v1.ListEventsResponse;
import dev.compactionsidecar.v1.RestoreCompactionRequest;
import dev.compactionsidecar.v1.SearchEventsRequest;
import dev.compactionsidecar.v1.SearchHit;
import dev.compactionsidecar.v1.Session;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * One session's log: append, stream, read the compacted context, compact, restore, watch, list its
 * events and compactions, search.
 *
 * <p>Made by {@link SidecarClient#session(String)}; holds no state but the id, so it is cheap and
 * thread-safe.
 */
public final class SessionHandle {
  /** Reads of a window sent without content before {@link #context()} settles for the last. */
  private static final int WHOLE_WINDOW_TRIES = 3;

  private final SidecarClient client;
  private final String sessionId;

  SessionHandle(SidecarClient client, String sessionId) {
    this.client = client;
    this.sessionId = sessionId;
  }

  /** The session's id. */
  public String id() {
    return sessionId;
  }

  /** The session's header: version, policy, counters. */
  public Session get() {
    return client.getSession(sessionId);
  }

  /** Store {@code events} in one transaction; see {@link #append(List, AppendOptions)}. */
  public AppendEventsResponse append(Event... events) {
    return append(List.of(events), AppendOptions.DEFAULT);
  }

  /** Store {@code events} in one transaction; see {@link #append(List, AppendOptions)}. */
  public AppendEventsResponse append(List<Event> events) {
    return append(events, AppendOptions.DEFAULT);
  }

  /**
   * Store {@code events} in one transaction, in order, then compact if the session's trigger fires
   * (the response's {@code compaction}, or {@code compaction_scheduled} for a summarizing pass).
   *
   * <p>Events without an id get one before the first attempt, so the retries on UNAVAILABLE
   * re-send the same ids and the server, answering a re-sent id with the stored event, stores each
   * once.
   */
  public AppendEventsResponse append(List<Event> events, AppendOptions options) {
    AppendEventsRequest.Builder request =
        AppendEventsRequest.newBuilder()
            .setSessionId(sessionId)
            .addAllEvents(Events.withIds(events))
            .setExpectedVersion(options.expectedVersion())
            .setCreateIfMissing(options.createIfMissing())
            .addAllLabelUpdates(options.labelUpdates());
    if (options.usage() != null) {
      request.setUsage(options.usage());
    }
    AppendEventsRequest built = request.build();
    return client.unary(stub -> stub.appendEvents(built), true);
  }

  /** A StreamEvents call for appending to this session; no deadline. Close it when done. */
  public EventStream stream() {
    return new EventStream(client, sessionId, null);
  }

  /** A StreamEvents call that ends with DEADLINE_EXCEEDED after {@code deadline}. */
  public EventStream stream(Duration deadline) {
    return new EventStream(client, sessionId, deadline);
  }

  /**
   * The compacted context to send to the model: the active window, in log order.
   *
   * <p>A window too large for one answer comes from the server without its events' content ({@code
   * content_omitted}); it is then read in byte-bounded pages (ListEvents, active only) and put
   * together, so the answer always holds every event's content. When the window changed between
   * the two reads it is read again, a few times at most.
   */
  public GetContextResponse context() {
    return context(ContextFormat.CONTEXT_FORMAT_UNSPECIFIED);
  }

  /**
   * The compacted context, also rendered as {@code format}'s request fragment ({@code
   * rendered_json}, e.g. {@code {"contents": [...]}} for Gemini), ready to merge into the
   * provider's request body; {@code CONTEXT_FORMAT_UNSPECIFIED} renders nothing.
   *
   * <p>A window read in parts (see {@link #context()}) comes as events only: the server renders
   * only what it sends in one answer, so {@code rendered_json} is then empty ({@code
   * estimated_prompt_tokens} is kept).
   */
  public GetContextResponse context(ContextFormat format) {
    GetContextRequest request =
        GetContextRequest.newBuilder().setSessionId(sessionId).setFormat(format).build();
    for (int attempt = 1; ; attempt++) {
      GetContextResponse answer = client.unary(stub -> stub.getContext(request), true);
      if (!answer.getContentOmitted()) {
        return answer;
      }
      List<Event> listed;
      try (Stream<Event> events = events(true)) {
        listed = events.toList();
      }
      boolean same = sameWindow(listed, answer.getEventsList());
      if (answer.getEventsOmitted()) {
        // Too many events to list even without content: nothing to compare the pages with, so a
        // second answer tells whether a write came in between.
        GetContextResponse again = client.unary(stub -> stub.getContext(request), true);
        same =
            again.getVersion() == answer.getVersion()
                && again.getCachePrefixId().equals(answer.getCachePrefixId());
      }
      if (attempt >= WHOLE_WINDOW_TRIES || same) {
        return answer.toBuilder()
            .clearEvents()
            .addAllEvents(listed)
            .setContentOmitted(false)
            .setEventsOmitted(false)
            .build();
      }
    }
  }

  /**
   * Whether {@code a} lists the same window as {@code b} (content aside). Ids alone are not
   * enough: a clearing changes events in place, keeping their ids, and sets their flag and token
   * count. A count that is an estimate on either side ({@code tokenCountEstimated}) is not
   * compared: its exact count may have landed in between, which changes no version and nothing
   * the model is sent.
   */
  private static boolean sameWindow(List<Event> a, List<Event> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      Event x = a.get(i);
      Event y = b.get(i);
      if (!x.getId().equals(y.getId())
          || x.getCleared() != y.getCleared()
          || (x.getTokenCount() != y.getTokenCount()
              && !x.getTokenCountEstimated()
              && !y.getTokenCountEstimated())) {
        return false;
      }
    }
    return true;
  }

  /** Run a compaction pass now if the session's trigger fires, and wait for its result. */
  public CompactionResult compact() {
    return compact(CompactOptions.DEFAULT);
  }

  /**
   * Run a compaction pass now and wait for its result. Never retried: a lost answer leaves no way
   * to tell "done" from "not done". A summarizing pass can take a while: use {@code
   * client.withDeadline(...)} for a longer deadline.
   */
  public CompactionResult compact(CompactOptions options) {
    CompactRequest.Builder request =
        CompactRequest.newBuilder()
            .setSessionId(sessionId)
            .setForce(options.force())
            .setExpectedVersion(options.expectedVersion());
    if (options.policy() != null) {
      request.setPolicy(options.policy());
    }
    CompactRequest built = request.build();
    return client.unary(stub -> stub.compact(built), false).getResult();
  }

  /** Undo the newest compaction still standing; see {@link #restore(String, RestoreOptions)}. */
  public CompactionResult restore() {
    return restore("", RestoreOptions.DEFAULT);
  }

  /** Undo compaction {@code compactionId}; see {@link #restore(String, RestoreOptions)}. */
  public CompactionResult restore(String compactionId) {
    return restore(compactionId, RestoreOptions.DEFAULT);
  }

  /**
   * Undo the session's newest compaction still standing ({@code compactionId} "": that one): what
   * it archived is active again in place, what it cleared uncleared, the summary turn it inserted
   * archived; nothing is deleted. The result has strategy "restore", its own compaction id, the
   * window after it ({@code active_events}) and {@code restored_event_ids}.
   *
   * <p>Naming an older compaction fails with FAILED_PRECONDITION naming the one to restore first
   * (in the message and in {@link SidecarException#preconditionViolations()}, type {@code
   * RESTORE_ORDER}); an unknown one with NOT_FOUND. Never retried: a lost answer may hide a restore
   * that landed.
   */
  public CompactionResult restore(String compactionId, RestoreOptions options) {
    RestoreCompactionRequest request =
        RestoreCompactionRequest.newBuilder()
            .setSessionId(sessionId)
            .setCompactionId(compactionId)
            .setExpectedVersion(options.expectedVersion())
            .setPauseAutoCompaction(options.pauseAutoCompaction())
            .build();
    return client.unary(stub -> stub.restoreCompaction(request), false).getResult();
  }

  /** The session's compaction history, newest first, in pages of the server's default size. */
  public Stream<Compaction> compactions() {
    return compactions(0);
  }

  /**
   * The session's compaction history, newest first, fetched {@code pageSize} at a time (0: the
   * server's default): each with its cause, what it archived (a summary turn stands for its {@code
   * archived_event_ids}), cleared and inserted, and {@code restored_by} / {@code restores} once a
   * restore undid it.
   */
  public Stream<Compaction> compactions(int pageSize) {
    return Pages.stream(
        token -> {
          ListCompactionsRequest request =
              ListCompactionsRequest.newBuilder()
                  .setSessionId(sessionId)
                  .setPageSize(pageSize)
                  .setPageToken(token)
                  .build();
          ListCompactionsResponse page = client.unary(stub -> stub.listCompactions(request), true);
          List<Compaction> records = new ArrayList<>();
          for (Compaction record : page.getCompactionsList()) {
            boolean omitted =
                record.getArchivedEventIdsOmitted()
                    || record.getClearedEventIdsOmitted()
                    || record.getInsertedEventIdsOmitted();
            records.add(omitted ? withIds(record) : record);
          }
          return new Pages.Page<>(records, page.getNextPageToken());
        });
  }

  /**
   * {@code record} with its id lists whole again, when the server left them out (too many ids for
   * one page): read page by page with ListCompactions {@code ids_of}.
   */
  private Compaction withIds(Compaction record) {
    Compaction.Builder whole =
        record.toBuilder()
            .clearArchivedEventIds()
            .clearClearedEventIds()
            .clearInsertedEventIds()
            .setArchivedEventIdsOmitted(false)
            .setClearedEventIdsOmitted(false)
            .setInsertedEventIdsOmitted(false);
    String token = "";
    do {
      ListCompactionsRequest request =
          ListCompactionsRequest.newBuilder()
              .setSessionId(sessionId)
              .setIdsOf(record.getCompactionId())
              .setPageToken(token)
              .build();
      ListCompactionsResponse page = client.unary(stub -> stub.listCompactions(request), true);
      for (Compaction part : page.getCompactionsList()) {
        whole.addAllArchivedEventIds(part.getArchivedEventIdsList());
        whole.addAllClearedEventIds(part.getClearedEventIdsList());
        whole.addAllInsertedEventIds(part.getInsertedEventIdsList());
      }
      token = page.getNextPageToken();
    } while (!token.isEmpty());
    return whole.build();
  }

  /** Watch the session's compaction results; no deadline. Close it to stop. */
  public Watch watch() {
    return new Watch(client, sessionId, null);
  }

  /** Watch the session's compaction results; the call ends with DEADLINE_EXCEEDED after it. */
  public Watch watch(Duration deadline) {
    return new Watch(client, sessionId, deadline);
  }

  /** The whole log, archived events included, in log order, page by page. */
  public Stream<Event> events() {
    return events(false);
  }

  /** The log in order; with {@code activeOnly}, only the active window. */
  public Stream<Event> events(boolean activeOnly) {
    return Pages.stream(
        token -> {
          ListEventsRequest request =
              ListEventsRequest.newBuilder()
                  .setSessionId(sessionId)
                  .setActiveOnly(activeOnly)
                  .setPageToken(token)
                  .build();
          ListEventsResponse page = client.unary(stub -> stub.listEvents(request), true);
          return new Pages.Page<>(page.getEventsList(), page.getNextPageToken());
        });
  }

  /** Full-text search over this session's archived events, best first. */
  public Stream<SearchHit> search(String query) {
    return search(SearchEventsRequest.newBuilder().setQuery(query).build());
  }

  /** Search this session with every filter of the API (roles, active events too, time range). */
  public Stream<SearchHit> search(SearchEventsRequest request) {
    return client.search(request.toBuilder().setSessionId(sessionId).build());
  }

  /** Delete the session and its whole log. Not retried. */
  public void delete() {
    client.deleteSession(sessionId);
  }
}
