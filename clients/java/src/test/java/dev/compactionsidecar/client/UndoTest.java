package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.a;
import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.slidingWindow;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.compactionsidecar.v1.Compaction;
import dev.compactionsidecar.v1.CompactionCause;
import dev.compactionsidecar.v1.CompactionResult;
import dev.compactionsidecar.v1.SearchHit;
import io.grpc.Status;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Undo against a real server: the history newest first, restore, and restores out of order. */
class UndoTest extends AgainstServer {
  @BeforeAll
  static void start() throws Exception {
    startServer();
  }

  /** Two forced compactions: the older archives turn 1, the newer turn 2; their ids, older first. */
  private static List<String> compactedTwice(String id) {
    client.createSession(id, slidingWindow(2), Map.of());
    SessionHandle chat = client.session(id);
    chat.append(u("u1", "question 1 about the walrus"), a("a1", "the walrus sleeps"));
    chat.append(u("u2", "question 2"), a("a2", "answer 2"));
    String older = chat.compact(CompactOptions.forced()).getCompactionId();
    chat.append(u("u3", "question 3"), a("a3", "answer 3"));
    String newer = chat.compact(CompactOptions.forced()).getCompactionId();
    return List.of(older, newer);
  }

  @Test
  void historyIsNewestFirstPageAfterPageAndSearchHitsNameTheirCompaction() {
    List<String> made = compactedTwice("java-undo-list");
    SessionHandle chat = client.session("java-undo-list");
    List<Compaction> history = chat.compactions(1).toList();
    assertEquals(
        List.of(made.get(1), made.get(0)), history.stream().map(Compaction::getCompactionId).toList());
    assertEquals(CompactionCause.COMPACTION_CAUSE_FORCE, history.get(1).getCause());
    assertEquals(List.of("u1", "a1"), history.get(1).getArchivedEventIdsList());
    SearchHit hit = chat.search("walrus").findFirst().orElseThrow();
    assertEquals(made.get(0), hit.getArchivedBy());
  }

  @Test
  void restoreUndoesTheNewestCompactionAndRecordsItself() {
    List<String> made = compactedTwice("java-undo-restore");
    SessionHandle chat = client.session("java-undo-restore");
    CompactionResult restore = chat.restore("", RestoreOptions.paused().atVersion(6));
    assertEquals("restore", restore.getStrategy());
    assertEquals(List.of("u2", "a2"), restore.getRestoredEventIdsList());
    assertEquals(List.of("u2", "a2", "u3", "a3"), ids(chat.context().getEventsList()));
    List<Compaction> history = chat.compactions().toList();
    assertEquals(CompactionCause.COMPACTION_CAUSE_RESTORE, history.get(0).getCause());
    assertEquals(made.get(1), history.get(0).getRestores());
    assertEquals(restore.getCompactionId(), history.get(1).getRestoredBy());
    assertTrue(chat.get().getAutoCompactionPaused());
  }

  @Test
  void restoreOutOfOrderIsRefusedNamingTheNewerCompaction() {
    List<String> made = compactedTwice("java-undo-order");
    SessionHandle chat = client.session("java-undo-order");
    SidecarException refused = assertThrows(SidecarException.class, () -> chat.restore(made.get(0)));
    assertEquals(Status.Code.FAILED_PRECONDITION, refused.getCode());
    assertTrue(refused.getStatusMessage().contains(made.get(1)), refused.getStatusMessage());
    assertEquals("RESTORE_ORDER", refused.preconditionViolations().get(0).getType());
    assertEquals(made.get(1), refused.preconditionViolations().get(0).getSubject());
    SidecarException unknown =
        assertThrows(SidecarException.class, () -> chat.restore("no-such-compaction"));
    assertEquals(Status.Code.NOT_FOUND, unknown.getCode());
    assertEquals(List.of("u3", "a3"), ids(chat.context().getEventsList()));
  }
}
