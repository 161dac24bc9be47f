package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.a;
import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.slidingWindow;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.compactionsidecar.v1.AppendEventsResponse;
import dev.compactionsidecar.v1.ClearToolResults;
import dev.compactionsidecar.v1.CompactionPolicy;
import dev.compactionsidecar.v1.CompactionResult;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.GetContextResponse;
import dev.compactionsidecar.v1.LabelUpdate;
import dev.compactionsidecar.v1.Pipeline;
import dev.compactionsidecar.v1.Role;
import dev.compactionsidecar.v1.SearchEventsRequest;
import dev.compactionsidecar.v1.SearchHit;
import dev.compactionsidecar.v1.Session;
import dev.compactionsidecar.v1.Strategy;
import dev.compactionsidecar.v1.StreamEventsRequest;
import dev.compactionsidecar.v1.StreamEventsResponse;
import dev.compactionsidecar.v1.TokenBudget;
import dev.compactionsidecar.v1.ToolCall;
import dev.compactionsidecar.v1.ToolResult;
import dev.compactionsidecar.v1.Trigger;
import dev.compactionsidecar.v1.TurnWindow;
import dev.compactionsidecar.v1.WatchSessionResponse;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The wrapper against a real server: append, context, compact, events, search, stream, watch. */
class SessionHandleTest extends AgainstServer {
  @BeforeAll
  static void start() throws Exception {
    startServer();
  }

  /** Three turns: an outage in the oldest, so search has something archived to find. */
  private static SessionHandle threeTurns(String id) {
    client.createSession(id, slidingWindow(2), Map.of("team", "sre"));
    SessionHandle chat = client.session(id);
    chat.append(u("u1", "disk full on node-7"), a("a1", "rotated the logs"));
    chat.append(u("u2", "latency is up"), a("a2", "scaled the pool"));
    chat.append(u("u3", "all good now?"), a("a3", "yes"));
    return chat;
  }

  @Test
  void appendStoresInOrderAndGivesIdsToEventsWithout() {
    client.createSession("append-1");
    SessionHandle chat = client.session("append-1");
    AppendEventsResponse first = chat.append(Events.user("hello"), Events.assistant("hi"));
    assertEquals(2, first.getEventsCount());
    for (Event stored : first.getEventsList()) {
      assertTrue(stored.getId().matches("[0-9a-f]{32}"), stored.getId());
    }
    AppendEventsResponse second = chat.append(List.of(u("u2", "again")));
    assertTrue(second.getVersion() > first.getVersion());
    List<String> log = ids(chat.events().collect(Collectors.toList()));
    assertEquals(List.of(first.getEvents(0).getId(), first.getEvents(1).getId(), "u2"), log);
    assertEquals(log, ids(chat.context().getEventsList()));
  }

  @Test
  void forcedCompactionArchivesOldestTurnsAndKeepsThemSearchable() {
    SessionHandle chat = threeTurns("compact-1");
    CompactionResult result = chat.compact(CompactOptions.forced());

    assertTrue(result.getCompacted());
    assertEquals(List.of("u1", "a1", "u2", "a2"), ids(result.getArchivedEventsList()));
    assertEquals(List.of("u3", "a3"), ids(chat.context().getEventsList()));
    List<Event> log = chat.events().collect(Collectors.toList());
    assertEquals(List.of("u1", "a1", "u2", "a2", "u3", "a3"), ids(log));
    assertEquals(
        List.of("u1", "a1", "u2", "a2"),
        ids(log.stream().filter(Event::getArchived).collect(Collectors.toList())));
    assertEquals(List.of("u3", "a3"), ids(chat.events(true).collect(Collectors.toList())));

    List<SearchHit> hits = chat.search("disk").collect(Collectors.toList());
    assertEquals(List.of("u1"), hits.stream().map(h -> h.getEvent().getId()).toList());
    assertEquals("compact-1", hits.get(0).getSessionId());
    // Active events are searched only when asked.
    assertEquals(0, chat.search("yes").count());
    assertEquals(
        1,
        chat.search(SearchEventsRequest.newBuilder().setQuery("yes").setIncludeActive(true).build())
            .count());
  }

  @Test
  void compactWithoutTriggerOrForceDoesNothing() {
    SessionHandle chat = threeTurns("compact-2");
    CompactionResult result = chat.compact();
    assertFalse(result.getCompacted());
    assertEquals(6, chat.context().getEventsCount());
  }

  @Test
  void sessionsListAndSearchAcrossThemFilterByLabel() {
    threeTurns("list-1");
    List<String> sre =
        client.listSessions(Map.of("team", "sre")).map(Session::getSessionId).toList();
    assertTrue(sre.contains("list-1"), sre.toString());
    assertFalse(sre.contains("append-1"), sre.toString());
    Session header = client.session("list-1").get();
    assertEquals(6, header.getActiveEventCount());
    assertEquals(3, header.getTurnCount());
  }

  @Test
  void streamAcknowledgesEachRequestAndSurvivesAFailedOne() {
    client.createSession("stream-1");
    try (EventStream stream = client.session("stream-1").stream()) {
      String first = stream.send(List.of(u("u1", "hello"), a("a1", "hi")));
      // No role: this request fails, the stream goes on.
      stream.send(List.of(Event.newBuilder().setId("bad").setText("no role").build()));
      String third = stream.send(List.of(Events.user("more")));
      List<StreamEventsResponse> answers = stream.drain();

      assertEquals(List.of("0", "1", "2"), answers.stream().map(StreamEventsResponse::getRequestId).toList());
      assertEquals("0", first);
      assertEquals("2", third);
      assertEquals(List.of("u1", "a1"), ids(answers.get(0).getAppend().getEventsList()));
      assertTrue(answers.get(1).hasError());
      SidecarException failed = SidecarException.fromStatus(answers.get(1).getError());
      assertEquals(Status.Code.INVALID_ARGUMENT, failed.getCode());
      assertTrue(answers.get(2).hasAppend());
      assertNull(stream.next());
    }
    assertEquals(3, client.session("stream-1").context().getEventsCount());
  }

  @Test
  void streamRequestsMayCreateTheSession() {
    try (EventStream stream = client.session("stream-2").stream()) {
      stream.send(
          StreamEventsRequest.newBuilder()
              .setCreateIfMissing(true)
              .addEvents(Events.user("first words"))
              .build());
      StreamEventsResponse ack = stream.next(Duration.ofSeconds(10));
      assertEquals("stream-2", ack.getSessionId());
      assertTrue(ack.hasAppend(), ack.toString());
    }
    assertEquals(1, client.session("stream-2").get().getTotalEventCount());
  }

  @Test
  void streamLandsFarMoreThanTheTransportBuffersWhileAnotherThreadReads() throws Exception {
    client.createSession("stream-bounded");
    String text = "y".repeat(64 * 1024);
    int sends = 24; // 1.5 MiB, many times EventStream.SEND_BUFFER_BYTES: sends wait on flow control
    try (EventStream stream = client.session("stream-bounded").stream(Duration.ofSeconds(60))) {
      CompletableFuture<List<String>> sent =
          CompletableFuture.supplyAsync(
              () -> {
                List<String> ids = new ArrayList<>();
                for (int n = 0; n < sends; n++) {
                  ids.add(stream.send(List.of(u("b" + n, n + " " + text))));
                }
                stream.complete();
                return ids;
              });
      List<String> acked = new ArrayList<>();
      for (StreamEventsResponse answer : stream) {
        assertFalse(answer.hasError(), answer.toString());
        if (answer.hasAppend()) { // the default policy's background compactions come too
          acked.add(answer.getRequestId());
        }
      }
      assertEquals(sent.get(60, TimeUnit.SECONDS), acked);
    }
    assertEquals(sends, client.session("stream-bounded").get().getTotalEventCount());
  }

  /** A variant of the README's example (which tests/docs runs as printed), on this class's server. */
  @Test
  void readmeExampleRuns() {
    CompactionPolicy policy =
        CompactionPolicy.newBuilder()
            .setTrigger(Trigger.newBuilder().setTurnCount(20))
            .setStrategy(Strategy.newBuilder().setTurnWindow(TurnWindow.newBuilder().setMaxTurns(10)))
            .build();
    try (SidecarClient client = SidecarClient.builder(server.target()).bearerToken("s3cret").build()) {
      client.createSession("chat-java", policy, Map.of("app", "demo"));
      SessionHandle chat = client.session("chat-java");
      try (EventStream stream = chat.stream()) {
        stream.send(List.of(Events.user("Where is my order?")));
        stream.send(List.of(Events.assistant("It ships today.")));
        List<StreamEventsResponse> acks = stream.drain(); // append | error | compaction
        assertEquals(2, acks.stream().filter(StreamEventsResponse::hasAppend).count());
      }
      List<Event> context = chat.context().getEventsList(); // what to send to the model
      List<SearchHit> hits = chat.search("order").toList(); // archived events only
      assertEquals(2, context.size());
      assertEquals(0, hits.size());
    }
  }

  @Test
  void labelUpdatesLandWithTheAppendOrNotAtAll() {
    SessionHandle chat = client.session("labels-1");
    chat.append(
        List.of(u("u1", "open ticket 42")),
        AppendOptions.creatingIfMissing()
            .withLabelUpdates(
                LabelUpdate.newBuilder().putSet("ticket", "42").putSet("state", "open").build(),
                LabelUpdate.newBuilder().setSessionId("labels-index").putSet("latest", "42").build()));
    Map<String, String> opened = Map.of("ticket", "42", "state", "open");
    assertEquals(opened, chat.get().getLabelsMap());
    Session index = client.getSession("labels-index");
    assertEquals(Map.of("latest", "42"), index.getLabelsMap());

    SidecarException stale =
        assertThrows(
            SidecarException.class,
            () ->
                chat.append(
                    List.of(u("u2", "close ticket 42")),
                    AppendOptions.DEFAULT.withLabelUpdates(
                        LabelUpdate.newBuilder().addRemove("state").build(),
                        LabelUpdate.newBuilder()
                            .setSessionId("labels-index")
                            .putSet("latest", "43")
                            .setExpectedVersion(index.getVersion() + 5)
                            .build())));
    assertEquals(Status.Code.FAILED_PRECONDITION, stale.getCode());
    assertEquals(List.of("u1"), ids(chat.events().collect(Collectors.toList())));
    assertEquals(opened, chat.get().getLabelsMap());
    assertEquals(Map.of("latest", "42"), client.getSession("labels-index").getLabelsMap());
  }

  @Test
  void watchSeesACompactionThatLandsAfterItStarts() {
    SessionHandle chat = threeTurns("watch-1");
    try (Watch watch = chat.watch()) {
      CompactionResult done = chat.compact(CompactOptions.forced());
      WatchSessionResponse update = watch.next(Duration.ofSeconds(10));
      assertTrue(update.hasCompaction(), update.toString());
      assertEquals(done.getCompactionId(), update.getCompaction().getCompactionId());
      assertEquals(List.of("u3", "a3"), ids(update.getCompaction().getActiveEventsList()));
    }
  }

  /** clear_tool_results in a pipeline: placeholders in the context, originals in the log. */
  @Test
  void pipelineClearsOldToolResultsInPlace() {
    Strategy clear =
        Strategy.newBuilder()
            .setClearToolResults(ClearToolResults.newBuilder().setKeepToolUses(1))
            .build();
    Strategy budget =
        Strategy.newBuilder().setTokenBudget(TokenBudget.newBuilder().setMaxTokens(10_000)).build();
    CompactionPolicy policy =
        CompactionPolicy.newBuilder()
            .setStrategy(
                Strategy.newBuilder()
                    .setPipeline(Pipeline.newBuilder().addSteps(clear).addSteps(budget)))
            .build();
    client.createSession("java-clear-1", policy, null);
    String page =
        "pod checkout-7f9 OOMKilled, memory limit 512Mi exceeded while building invoices. "
            .repeat(4);
    List<Event> events = new ArrayList<>();
    events.add(Event.newBuilder().setId("u1").setRole(Role.ROLE_USER).setText("why?").build());
    for (String n : List.of("1", "2", "3")) {
      events.add(
          Event.newBuilder()
              .setId("a" + n)
              .setRole(Role.ROLE_ASSISTANT)
              .addToolCalls(ToolCall.newBuilder().setId("c" + n).setName("kubectl"))
              .build());
      events.add(
          Event.newBuilder()
              .setId("t" + n)
              .setRole(Role.ROLE_TOOL)
              .addToolResults(
                  ToolResult.newBuilder().setCallId("c" + n).setName("kubectl").setContent(page))
              .build());
    }
    SessionHandle chat = client.session("java-clear-1");
    chat.append(events);

    CompactionResult result = chat.compact(CompactOptions.forced());
    assertEquals("pipeline", result.getStrategy());
    assertEquals(List.of("t1", "t2"), result.getClearedEventIdsList());

    GetContextResponse context = chat.context();
    List<String> cleared =
        context.getEventsList().stream().filter(Event::getCleared).map(Event::getId).toList();
    assertEquals(List.of("t1", "t2"), cleared);
    assertFalse(context.getEvents(2).getToolResults(0).getContent().contains("building invoices"));

    Event original = chat.events().filter(e -> e.getId().equals("t1")).findFirst().orElseThrow();
    assertTrue(original.getCleared());
    assertEquals(page, original.getToolResults(0).getContent());
  }
}
