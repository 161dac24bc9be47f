package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.a;
import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.slidingWindow;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.GetContextRequest;
import dev.compactionsidecar.v1.GetContextResponse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The window's cache prefix through {@code context()}: {@code cachePrefixId} kept by appends and
 * moved by a compaction or a restore, the stable prefix the window as the last change left it,
 * also for a window read in parts.
 */
class CachePrefixTest extends AgainstServer {
  @BeforeAll
  static void start() throws Exception {
    // 8 KiB: a window of a few KB is too large for one answer.
    startServer("--max-message-bytes", "8192");
  }

  @Test
  void appendsKeepTheIdAndACompactionOrARestoreMovesIt() {
    client.createSession("java-cache", slidingWindow(2), Map.of());
    SessionHandle chat = client.session("java-cache");
    chat.append(u("u1", "question 1"), a("a1", "answer 1"));
    GetContextResponse first = chat.context();
    assertEquals(32, first.getCachePrefixId().length());
    assertEquals(0, first.getStablePrefixTokens());
    assertEquals(0, first.getStablePrefixEvents());

    chat.append(u("u2", "question 2"), a("a2", "answer 2"));
    assertEquals(first.getCachePrefixId(), chat.context().getCachePrefixId());

    chat.compact(CompactOptions.forced());
    GetContextResponse compacted = chat.context();
    assertNotEquals(first.getCachePrefixId(), compacted.getCachePrefixId());
    assertEquals(compacted.getEventsCount(), compacted.getStablePrefixEvents());
    assertEquals(compacted.getTokenCount(), compacted.getStablePrefixTokens());

    chat.append(u("u3", "question 3"));
    GetContextResponse grown = chat.context();
    assertEquals(compacted.getCachePrefixId(), grown.getCachePrefixId());
    assertEquals(compacted.getStablePrefixTokens(), grown.getStablePrefixTokens());
    assertEquals(2, grown.getStablePrefixEvents());
    assertEquals(
        ids(compacted.getEventsList()),
        ids(grown.getEventsList().subList(0, grown.getStablePrefixEvents())));

    chat.restore();
    GetContextResponse restored = chat.context();
    assertFalse(
        List.of(first.getCachePrefixId(), compacted.getCachePrefixId())
            .contains(restored.getCachePrefixId()));
    assertEquals(restored.getEventsCount(), restored.getStablePrefixEvents());
  }

  @Test
  void aWindowReadInPartsKeepsTheHeaderAnswersPrefix() {
    client.createSession("java-cache-big", slidingWindow(4), Map.of());
    SessionHandle chat = client.session("java-cache-big");
    for (int n = 0; n < 4; n++) {
      chat.append(u("u" + n, "q" + n + " " + "x".repeat(1500)), a("a" + n, "answer " + n));
    }
    chat.compact(CompactOptions.forced());
    chat.append(u("late", "y".repeat(1500)));
    GetContextResponse header =
        client
            .blockingStub()
            .getContext(GetContextRequest.newBuilder().setSessionId("java-cache-big").build());
    GetContextResponse window = chat.context();

    assertTrue(header.getContentOmitted());
    assertFalse(window.getContentOmitted());
    assertEquals(List.of("u2", "a2", "u3", "a3", "late"), ids(window.getEventsList()));
    assertEquals(32, window.getCachePrefixId().length());
    assertEquals(header.getCachePrefixId(), window.getCachePrefixId());
    assertEquals(4, window.getStablePrefixEvents());
    assertEquals(header.getStablePrefixTokens(), window.getStablePrefixTokens());
    int prefixTokens = 0;
    for (Event event : window.getEventsList().subList(0, 4)) {
      prefixTokens += event.getTokenCount();
    }
    assertEquals(prefixTokens, window.getStablePrefixTokens());
  }
}
