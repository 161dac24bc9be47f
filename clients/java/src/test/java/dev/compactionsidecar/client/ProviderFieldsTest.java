package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import dev.compactionsidecar.v1.AppendEventsRequest;
import dev.compactionsidecar.v1.AppendEventsResponse;
import dev.compactionsidecar.v1.ContextFormat;
import dev.compactionsidecar.v1.CreateSessionRequest;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.GetContextRequest;
import dev.compactionsidecar.v1.GetContextResponse;
import dev.compactionsidecar.v1.ModelUsage;
import dev.compactionsidecar.v1.Reasoning;
import dev.compactionsidecar.v1.Role;
import dev.compactionsidecar.v1.Session;
import dev.compactionsidecar.v1.StreamEventsRequest;
import dev.compactionsidecar.v1.StreamEventsResponse;
import dev.compactionsidecar.v1.ToolCall;
import dev.compactionsidecar.v1.ToolResult;
import dev.compactionsidecar.v1.UpdateSessionRequest;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 20's fields through the wrapper: reasoning and signatures kept byte for byte, the
 * session's model, usage reports on appends and streams, and contexts rendered for a provider.
 */
class ProviderFieldsTest extends AgainstServer {
  private static final Reasoning THOUGHT =
      Events.reasoning("order 42 is in the lookup tool", bytes(0xfb, 0xff, 0xbf, 1, 2, 3));
  private static final Reasoning REDACTED = Events.redactedReasoning(bytes(0, 1, 0xfe, 0xff));
  private static final Reasoning SUMMARY =
      Reasoning.newBuilder()
          .setText("looked it up")
          .setSignature(bytes(0xfb, 0xef, 9))
          .setId("rs_1")
          .build();
  private static final ByteString CALL_SIGNATURE = bytes(0xfa, 0xfb, 0xfc, 7);

  @BeforeAll
  static void start() throws Exception {
    // 8 KiB: a window of a few KB comes from GetContext without its content.
    startServer("--max-message-bytes", "8192");
  }

  private static ByteString bytes(int... values) {
    byte[] out = new byte[values.length];
    for (int i = 0; i < values.length; i++) {
      out[i] = (byte) values[i];
    }
    return ByteString.copyFrom(out);
  }

  /** A user question, the assistant's reasoning and signed call, the tool's answer. */
  private static List<Event> toolLoop(String prefix) {
    return List.of(
        u(prefix + "u", "Where is order 42?"),
        Event.newBuilder()
            .setId(prefix + "a")
            .setRole(Role.ROLE_ASSISTANT)
            .setText("Let me look.")
            .addReasoning(THOUGHT)
            .addReasoning(REDACTED)
            .addReasoning(SUMMARY)
            .addToolCalls(
                ToolCall.newBuilder()
                    .setId("c1")
                    .setName("lookup_order")
                    .setArgumentsJson("{\"order\":42}")
                    .setSignature(CALL_SIGNATURE))
            .build(),
        Event.newBuilder()
            .setId(prefix + "t")
            .setRole(Role.ROLE_TOOL)
            .addToolResults(
                ToolResult.newBuilder().setCallId("c1").setName("lookup_order").setContent("shipped"))
            .build());
  }

  /** Fails unless {@code events} carry toolLoop's reasoning and call signatures byte for byte. */
  private static void assertSigned(List<Event> events) {
    List<Event> want = toolLoop("");
    assertEquals(want.size(), events.size());
    for (int i = 0; i < want.size(); i++) {
      assertEquals(want.get(i).getReasoningList(), events.get(i).getReasoningList());
      assertEquals(want.get(i).getToolCallsList(), events.get(i).getToolCallsList());
    }
  }

  @Test
  void reasoningAndCallSignaturesComeBackByteForByte() {
    SessionHandle chat = client.session("java-reasoning");
    AppendEventsResponse ack = chat.append(toolLoop("r"), AppendOptions.creatingIfMissing());
    assertSigned(ack.getEventsList());
    assertSigned(chat.context().getEventsList());
    assertSigned(chat.events().toList());
    List<StreamEventsResponse> answers;
    try (EventStream stream = client.session("java-reasoning-stream").stream()) {
      stream.send(
          StreamEventsRequest.newBuilder()
              .setRequestId("r1")
              .setCreateIfMissing(true)
              .addAllEvents(toolLoop("s"))
              .build());
      stream.complete();
      answers = stream.drain();
    }
    assertEquals(1, answers.size());
    assertSigned(answers.get(0).getAppend().getEventsList());
  }

  @Test
  void aWindowReadInPartsComesAsEventsOnlyWithItsReasoning() {
    SessionHandle chat = client.session("java-big-rendered");
    List<Event> big = new java.util.ArrayList<>();
    for (String id : List.of("q0", "q1", "q2", "q3")) {
      big.add(u(id, id + "x".repeat(1500)));
    }
    chat.append(big, AppendOptions.creatingIfMissing());
    chat.append(toolLoop("r"));
    GetContextResponse answer =
        client
            .blockingStub()
            .getContext(
                GetContextRequest.newBuilder()
                    .setSessionId("java-big-rendered")
                    .setFormat(ContextFormat.CONTEXT_FORMAT_GEMINI)
                    .build());
    GetContextResponse window = chat.context(ContextFormat.CONTEXT_FORMAT_GEMINI);

    assertTrue(answer.getContentOmitted(), "the window fits one answer: nothing read in parts");
    assertEquals(List.of("q0", "q1", "q2", "q3", "ru", "ra", "rt"), ids(window.getEventsList()));
    assertSigned(window.getEventsList().subList(4, 7));
    assertFalse(window.getContentOmitted());
    assertEquals("", window.getRenderedJson());
    assertEquals(answer.getEstimatedPromptTokens(), window.getEstimatedPromptTokens());
  }

  @Test
  void aSessionsModelHasItsProfileIsCalibratedByUsageAndItsContextRenders() throws Exception {
    Session created = client.createSession("java-model", null, null, "gemini-2.5-flash");
    SessionHandle chat = client.session("java-model");
    AppendEventsResponse appended = chat.append(u("m1", "Where is order 42?"));
    assertTrue(appended.getEvents(0).getTokenCountEstimated());
    chat.compact(CompactOptions.forced()); // plans on exact counts: the window read next is exact
    GetContextResponse sent = chat.context();
    assertFalse(sent.getTokenCountEstimated());
    AppendEventsResponse counted =
        chat.append(
            List.of(u("m2", "and 43?")),
            AppendOptions.DEFAULT.withUsage(sent.getVersion(), 2L * sent.getTokenCount()));
    Session calibrated = chat.get();
    GetContextResponse rendered = chat.context(ContextFormat.CONTEXT_FORMAT_OPENAI_CHAT);
    AppendEventsResponse ignored =
        chat.append(List.of(u("m3", "thanks")), AppendOptions.DEFAULT.withUsage(999, 10));
    Session renamed = client.updateModel("java-model", "claude-sonnet-4-5", 0);
    SidecarException unknown =
        assertThrows(
            SidecarException.class,
            () -> client.createSession("java-model-2", null, null, "no-such-model"));

    assertEquals("gemini", created.getModelProfile().getProvider());
    assertEquals(1048576, created.getModelProfile().getInputWindowTokens());
    assertEquals(65536, created.getModelProfile().getMaxOutputTokens());
    assertEquals("", counted.getUsageIgnoredReason());
    assertEquals(2.0, calibrated.getCalibration().getFactor());
    assertEquals(1, calibrated.getCalibration().getSamples());
    assertEquals(2 * rendered.getTokenCount(), rendered.getEstimatedPromptTokens());
    Value messages = json(rendered.getRenderedJson()).getStructValue().getFieldsOrThrow("messages");
    assertEquals(2, messages.getListValue().getValuesCount());
    assertTrue(ignored.getUsageIgnoredReason().contains("999"), ignored.getUsageIgnoredReason());
    assertEquals("anthropic", renamed.getModelProfile().getProvider());
    assertEquals(Status.Code.INVALID_ARGUMENT, unknown.getCode());
    assertEquals(java.util.Optional.of("model"), unknown.field());
  }

  private static Value json(String text) throws Exception {
    Value.Builder value = Value.newBuilder();
    JsonFormat.parser().merge(text, value);
    return value.build();
  }

  /** Records every message the client sends, whatever the server then answers. */
  static final class Sent implements ClientInterceptor {
    final List<Message> messages = new CopyOnWriteArrayList<>();

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void sendMessage(Q message) {
          messages.add((Message) message);
          super.sendMessage(message);
        }
      };
    }

    <T extends Message> T last(Class<T> type) {
      for (int i = messages.size() - 1; i >= 0; i--) {
        if (type.isInstance(messages.get(i))) {
          return type.cast(messages.get(i));
        }
      }
      throw new AssertionError("no " + type.getSimpleName() + " sent");
    }
  }

  /** Runs a call whose answer does not matter here (the server may refuse it). */
  private static void send(Runnable call) {
    try {
      call.run();
    } catch (SidecarException ignored) {
      // only the request is checked
    }
  }

  @Test
  void requestsCarryTheModelTheUsageAndTheFormat() {
    Sent sent = new Sent();
    try (SidecarClient recorded = SidecarClient.builder(server.target()).intercept(sent).build()) {
      send(() -> recorded.createSession("java-model", null, null, "gemini-2.5-flash"));
      assertEquals("gemini-2.5-flash", sent.last(CreateSessionRequest.class).getModel());

      send(() -> recorded.updateModel("java-model", "gpt-5", 2));
      UpdateSessionRequest update = sent.last(UpdateSessionRequest.class);
      assertEquals(List.of("model"), update.getUpdateMask().getPathsList());
      assertEquals("gpt-5", update.getSession().getModel());
      assertEquals(2, update.getExpectedVersion());

      SessionHandle chat = recorded.session("java-usage");
      send(() -> chat.append(List.of(u("x1", "hi")), AppendOptions.creatingIfMissing().withUsage(1, 1234)));
      ModelUsage usage = sent.last(AppendEventsRequest.class).getUsage();
      assertEquals(1, usage.getContextVersion());
      assertEquals(1234, usage.getPromptTokens());
      send(() -> chat.append(List.of(u("x2", "again"))));
      assertFalse(sent.last(AppendEventsRequest.class).hasUsage());

      try (EventStream stream = chat.stream()) {
        stream.send(List.of(u("x3", "more")), usage);
        stream.complete();
        stream.drain();
      }
      assertEquals(usage, sent.last(StreamEventsRequest.class).getUsage());

      send(() -> chat.context(ContextFormat.CONTEXT_FORMAT_ANTHROPIC));
      assertEquals(
          ContextFormat.CONTEXT_FORMAT_ANTHROPIC, sent.last(GetContextRequest.class).getFormat());
      send(chat::context);
      assertEquals(
          ContextFormat.CONTEXT_FORMAT_UNSPECIFIED, sent.last(GetContextRequest.class).getFormat());
    }
  }
}
