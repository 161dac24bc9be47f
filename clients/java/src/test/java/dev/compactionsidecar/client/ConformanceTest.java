package dev.compactionsidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.ListValue;
import com.google.protobuf.Message;
import com.google.protobuf.Struct;
import com.google.protobuf.TypeRegistry;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.PreconditionFailure;
import com.google.rpc.QuotaFailure;
import dev.compactionsidecar.v1.AppendEventsRequest;
import dev.compactionsidecar.v1.CompactRequest;
import dev.compactionsidecar.v1.CompactResponse;
import dev.compactionsidecar.v1.CompactionPolicy;
import dev.compactionsidecar.v1.CreateSessionRequest;
import dev.compactionsidecar.v1.DeleteSessionRequest;
import dev.compactionsidecar.v1.DeleteSessionResponse;
import dev.compactionsidecar.v1.GetContextRequest;
import dev.compactionsidecar.v1.GetSessionRequest;
import dev.compactionsidecar.v1.ListCompactionsRequest;
import dev.compactionsidecar.v1.ListCompactionsResponse;
import dev.compactionsidecar.v1.ListEventsRequest;
import dev.compactionsidecar.v1.ListEventsResponse;
import dev.compactionsidecar.v1.ListSessionsRequest;
import dev.compactionsidecar.v1.RestoreCompactionRequest;
import dev.compactionsidecar.v1.RestoreCompactionResponse;
import dev.compactionsidecar.v1.SearchEventsRequest;
import dev.compactionsidecar.v1.SearchEventsResponse;
import dev.compactionsidecar.v1.StreamEventsRequest;
import dev.compactionsidecar.v1.StreamEventsResponse;
import dev.compactionsidecar.v1.UpdateSessionRequest;
import dev.compactionsidecar.v1.WatchSessionRequest;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared conformance suite ({@code tests/conformance/scenarios.json}, format 1, described in
 * {@code tests/conformance/README.md}) replayed through this client: one dynamic test per
 * scenario, one server for all of them.
 *
 * <p>Requests are parsed with {@link JsonFormat#parser()}, made through the wrapper where it has a
 * method (create, get, update, delete, append, context, compact, restore, events, compactions,
 * search, stream), else through the generated stub; responses are printed with {@link JsonFormat#printer()} and matched
 * by the format's rules.
 */
class ConformanceTest extends AgainstServer {
  private static final TypeRegistry DETAILS =
      TypeRegistry.newBuilder()
          .add(BadRequest.getDescriptor())
          .add(ErrorInfo.getDescriptor())
          .add(QuotaFailure.getDescriptor())
          .add(PreconditionFailure.getDescriptor())
          .build();
  private static final JsonFormat.Printer PRINTER = JsonFormat.printer().usingTypeRegistry(DETAILS);
  private static final JsonFormat.Parser PARSER = JsonFormat.parser();

  private static Struct suite;

  @BeforeAll
  static void start() throws Exception {
    Path file =
        Path.of(System.getProperty("conformance.scenarios", "../../tests/conformance/scenarios.json"));
    Struct.Builder parsed = Struct.newBuilder();
    PARSER.merge(Files.readString(file), parsed);
    suite = parsed.build();
    assertEquals(1, (int) field(suite, "format").getNumberValue(), "scenario format");
    List<String> serverArgs = new ArrayList<>();
    for (Value arg : list(field(suite, "server_args"))) {
      serverArgs.add(arg.getStringValue());
    }
    startServer(serverArgs);
  }

  @TestFactory
  Stream<DynamicTest> scenarios() {
    List<Value> scenarios = list(field(suite, "scenarios"));
    assertFalse(scenarios.isEmpty(), "no scenario in the file");
    return scenarios.stream()
        .map(Value::getStructValue)
        .map(s -> dynamicTest(field(s, "name").getStringValue(), () -> run(s)));
  }

  /** The outcome of one step: status code name, message, BadRequest fields, response JSON. */
  private record Outcome(String code, String message, List<String> fieldViolations, Value response) {}

  private static void run(Struct scenario) throws Exception {
    List<Value> steps = list(field(scenario, "steps"));
    Map<String, String> captured = new HashMap<>();
    for (int i = 0; i < steps.size(); i++) {
      Struct step = ConformanceCaptures.substitute(steps.get(i), captured).getStructValue();
      Outcome outcome = call(step);
      Struct expect =
          step.containsFields("expect") ? field(step, "expect").getStructValue() : Struct.getDefaultInstance();
      String mismatch = check(expect, outcome);
      if (mismatch == null && step.containsFields("capture")) {
        List<String> missing =
            ConformanceCaptures.capture(
                field(step, "capture").getStructValue(), outcome.response(), captured);
        mismatch = missing.isEmpty() ? null : String.join("; ", missing);
      }
      if (mismatch != null) {
        throw new AssertionError(
            String.format(
                "scenario %s, step %d (%s): %s%n  expected: %s%n  actual: code=%s message=%s response=%s",
                field(scenario, "name").getStringValue(),
                i,
                field(step, "call").getStringValue(),
                mismatch,
                PRINTER.omittingInsignificantWhitespace().print(expect),
                outcome.code(),
                outcome.message(),
                outcome.response() == null ? "-" : PRINTER.omittingInsignificantWhitespace().print(outcome.response())));
      }
    }
  }

  // -- making the call ------------------------------------------------------

  private static Outcome call(Struct step) throws IOException {
    String name = field(step, "call").getStringValue();
    try {
      Message response =
          name.equals("StreamEvents")
              ? null
              : unary(name, field(step, "request"), step.getFieldsMap().get("policy_document"));
      Value json = response != null ? toValue(response) : stream(list(field(step, "requests")));
      return new Outcome("OK", "", List.of(), json);
    } catch (SidecarException e) {
      List<String> fields =
          e.fieldViolations().stream().map(BadRequest.FieldViolation::getField).toList();
      return new Outcome(e.getCode().name(), e.getStatusMessage(), fields, null);
    }
  }

  /**
   * One unary call; {@code policyDocument} (a CreateSession's {@code policy_document}, or null) is
   * read by {@link JsonFormat#parser()}, the reader a Java user hands a policy document to.
   */
  private static Message unary(String name, Value request, Value policyDocument) throws IOException {
    switch (name) {
      case "CreateSession":
        CreateSessionRequest.Builder create = parse(request, CreateSessionRequest.newBuilder());
        if (policyDocument != null) {
          create.setPolicy(parse(policyDocument, CompactionPolicy.newBuilder()));
        }
        return client.createSession(create.build());
      case "GetSession":
        return client.getSession(parse(request, GetSessionRequest.newBuilder()).build().getSessionId());
      case "ListSessions":
        ListSessionsRequest list = parse(request, ListSessionsRequest.newBuilder()).build();
        return raw(() -> client.blockingStub().listSessions(list));
      case "UpdateSession":
        return client.updateSession(parse(request, UpdateSessionRequest.newBuilder()).build());
      case "DeleteSession":
        client.deleteSession(parse(request, DeleteSessionRequest.newBuilder()).build().getSessionId());
        return DeleteSessionResponse.getDefaultInstance();
      case "AppendEvents":
        AppendEventsRequest append = parse(request, AppendEventsRequest.newBuilder()).build();
        return client
            .session(append.getSessionId())
            .append(
                append.getEventsList(),
                new AppendOptions(
                    append.getExpectedVersion(),
                    append.getCreateIfMissing(),
                    append.getLabelUpdatesList(),
                    append.hasUsage() ? append.getUsage() : null));
      case "GetContext":
        GetContextRequest context = parse(request, GetContextRequest.newBuilder()).build();
        return client.session(context.getSessionId()).context(context.getFormat());
      case "Compact":
        CompactRequest compact = parse(request, CompactRequest.newBuilder()).build();
        CompactOptions options =
            new CompactOptions(
                compact.hasPolicy() ? compact.getPolicy() : null,
                compact.getForce(),
                compact.getExpectedVersion());
        return CompactResponse.newBuilder()
            .setResult(client.session(compact.getSessionId()).compact(options))
            .build();
      case "ListEvents":
        ListEventsRequest events = parse(request, ListEventsRequest.newBuilder()).build();
        if (events.getPageSize() != 0 || !events.getPageToken().isEmpty()) {
          return raw(() -> client.blockingStub().listEvents(events));
        }
        return ListEventsResponse.newBuilder()
            .addAllEvents(client.session(events.getSessionId()).events(events.getActiveOnly()).toList())
            .build();
      case "SearchEvents":
        SearchEventsRequest search = parse(request, SearchEventsRequest.newBuilder()).build();
        if (search.getPageSize() != 0 || !search.getPageToken().isEmpty()) {
          return raw(() -> client.blockingStub().searchEvents(search));
        }
        return SearchEventsResponse.newBuilder().addAllHits(client.search(search).toList()).build();
      case "RestoreCompaction":
        RestoreCompactionRequest restore = parse(request, RestoreCompactionRequest.newBuilder()).build();
        RestoreOptions restoreOptions =
            new RestoreOptions(restore.getExpectedVersion(), restore.getPauseAutoCompaction());
        return RestoreCompactionResponse.newBuilder()
            .setResult(
                client
                    .session(restore.getSessionId())
                    .restore(restore.getCompactionId(), restoreOptions))
            .build();
      case "ListCompactions":
        ListCompactionsRequest history = parse(request, ListCompactionsRequest.newBuilder()).build();
        if (history.getPageSize() != 0 || !history.getPageToken().isEmpty()) {
          return raw(() -> client.blockingStub().listCompactions(history)); // one page, as asked
        }
        return ListCompactionsResponse.newBuilder()
            .addAllCompactions(client.session(history.getSessionId()).compactions().toList())
            .build();
      case "WatchSession":
        WatchSessionRequest watch = parse(request, WatchSessionRequest.newBuilder()).build();
        throw new IllegalArgumentException("WatchSession is not a unary step: " + watch);
      default:
        throw new IllegalArgumentException("unknown call " + name);
    }
  }

  /** One StreamEvents call: send every request, half-close, read every answer. */
  private static Value stream(List<Value> requests) throws IOException {
    List<StreamEventsRequest> parsed = new ArrayList<>();
    for (Value request : requests) {
      parsed.add(parse(request, StreamEventsRequest.newBuilder()).build());
    }
    ListValue.Builder answers = ListValue.newBuilder();
    try (EventStream stream = client.session(parsed.get(0).getSessionId()).stream()) {
      parsed.forEach(stream::send);
      for (StreamEventsResponse response : stream.drain()) {
        answers.addValues(toValue(response));
      }
    }
    return Value.newBuilder().setListValue(answers).build();
  }

  private static <T extends Message> T raw(Supplier<T> call) {
    try {
      return call.get();
    } catch (StatusRuntimeException e) {
      throw SidecarException.from(e);
    }
  }

  /** The proto3 JSON {@code json} merged into {@code into} by the standard parser. */
  private static <B extends Message.Builder> B parse(Value json, B into)
      throws InvalidProtocolBufferException {
    PARSER.merge(PRINTER.print(json), into);
    return into;
  }

  private static Value toValue(Message message) throws InvalidProtocolBufferException {
    Value.Builder value = Value.newBuilder();
    PARSER.merge(PRINTER.print(message), value);
    return value.build();
  }

  // -- checking the outcome -------------------------------------------------

  /** The first mismatch between {@code expect} and the outcome, or null. */
  private static String check(Struct expect, Outcome outcome) {
    String code = expect.containsFields("code") ? field(expect, "code").getStringValue() : "OK";
    if (!code.equals(outcome.code())) {
      return "code " + outcome.code() + ", expected " + code;
    }
    if (expect.containsFields("message_contains")) {
      String part = field(expect, "message_contains").getStringValue();
      if (!outcome.message().contains(part)) {
        return "message does not contain \"" + part + "\"";
      }
    }
    if (expect.containsFields("field_violations")) {
      String m = match(field(expect, "field_violations"), strings(outcome.fieldViolations()), "field_violations");
      if (m != null) {
        return m;
      }
    }
    if (outcome.response() == null) {
      return null;
    }
    Value response = outcome.response();
    if (expect.containsFields("response")) {
      String m = match(field(expect, "response"), response, "response");
      if (m != null) {
        return m;
      }
    }
    if (expect.containsFields("responses")) {
      String m = match(field(expect, "responses"), response, "responses");
      if (m != null) {
        return m;
      }
    }
    List<Value> events = list(get(response, "events"));
    if (expect.containsFields("event_ids")) {
      List<String> ids = events.stream().map(e -> text(get(e, "id"))).toList();
      String m = match(field(expect, "event_ids"), strings(ids), "event_ids");
      if (m != null) {
        return m;
      }
    }
    if (expect.containsFields("archived_ids")) {
      List<String> ids =
          events.stream()
              .filter(e -> get(e, "archived") != null && get(e, "archived").getBoolValue())
              .map(e -> text(get(e, "id")))
              .toList();
      String m = match(field(expect, "archived_ids"), strings(ids), "archived_ids");
      if (m != null) {
        return m;
      }
    }
    if (expect.containsFields("hit_event_ids")) {
      List<String> ids =
          list(get(response, "hits")).stream().map(h -> text(get(get(h, "event"), "id"))).toList();
      String m = match(field(expect, "hit_event_ids"), strings(ids), "hit_event_ids");
      if (m != null) {
        return m;
      }
    }
    if (expect.containsFields("rendered")) {
      String m = rendered(field(expect, "rendered"), get(response, "renderedJson"));
      if (m != null) {
        return m;
      }
    }
    if (expect.containsFields("differs")) {
      return differs(field(expect, "differs").getStructValue(), response);
    }
    return null;
  }

  /**
   * {@code differs}: the value at each dotted path is present and matches none of its listed
   * values, how a scenario pins that an id moved (a cache prefix id after a compaction) without
   * knowing either value. The first mismatch, or null.
   */
  static String differs(Struct expected, Value response) {
    for (var entry : expected.getFieldsMap().entrySet()) {
      String path = entry.getKey();
      if (!entry.getValue().hasListValue()) {
        return "differs " + path + ": expected a list of values, got " + brief(entry.getValue());
      }
      Value actual = ConformanceCaptures.at(response, path);
      if (actual == null) {
        return "differs " + path + ": absent from " + brief(response);
      }
      for (Value value : entry.getValue().getListValue().getValuesList()) {
        if (match(value, actual, path) == null) {
          return "differs " + path + ": expected other than " + brief(value) + ", got " + brief(actual);
        }
      }
    }
    return null;
  }

  /** {@code rendered} matched, under the same rules, against the parsed {@code renderedJson}. */
  static String rendered(Value expected, Value renderedJson) {
    String text = renderedJson == null ? "" : renderedJson.getStringValue();
    if (text.isEmpty()) {
      return "rendered: the response has no renderedJson";
    }
    Value.Builder parsed = Value.newBuilder();
    try {
      PARSER.merge(text, parsed);
    } catch (InvalidProtocolBufferException e) {
      return "rendered: renderedJson is not JSON (" + e.getMessage() + "): " + text;
    }
    return match(expected, parsed.build(), "rendered");
  }

  /**
   * The format's subset match: objects on the expected keys, arrays element-wise with equal
   * length, "*" matches anything, numbers and numeric strings by value, an absent key matches a
   * default. Returns the first mismatch (with its path), or null.
   */
  static String match(Value expected, Value actual, String path) {
    if (expected.hasStringValue() && expected.getStringValue().equals("*")) {
      return null;
    }
    if (actual == null) {
      return isDefault(expected) ? null : path + ": missing, expected " + brief(expected);
    }
    switch (expected.getKindCase()) {
      case STRUCT_VALUE:
        if (!actual.hasStructValue()) {
          return path + ": expected an object, got " + brief(actual);
        }
        for (var entry : expected.getStructValue().getFieldsMap().entrySet()) {
          String m =
              match(entry.getValue(), get(actual, entry.getKey()), path + "." + entry.getKey());
          if (m != null) {
            return m;
          }
        }
        return null;
      case LIST_VALUE:
        if (!actual.hasListValue()) {
          return path + ": expected an array, got " + brief(actual);
        }
        List<Value> want = expected.getListValue().getValuesList();
        List<Value> got = actual.getListValue().getValuesList();
        if (want.size() != got.size()) {
          return path + ": " + got.size() + " items, expected " + want.size() + ": " + brief(actual);
        }
        for (int i = 0; i < want.size(); i++) {
          String m = match(want.get(i), got.get(i), path + "[" + i + "]");
          if (m != null) {
            return m;
          }
        }
        return null;
      default:
        BigDecimal a = number(expected);
        BigDecimal b = number(actual);
        boolean same = a != null && b != null ? a.compareTo(b) == 0 : expected.equals(actual);
        return same ? null : path + ": " + brief(actual) + ", expected " + brief(expected);
    }
  }

  private static boolean isDefault(Value v) {
    switch (v.getKindCase()) {
      case BOOL_VALUE:
        return !v.getBoolValue();
      case NUMBER_VALUE:
        return v.getNumberValue() == 0;
      case STRING_VALUE:
        BigDecimal n = number(v);
        return v.getStringValue().isEmpty() || (n != null && n.signum() == 0);
      case LIST_VALUE:
        return v.getListValue().getValuesCount() == 0;
      case STRUCT_VALUE:
        return v.getStructValue().getFieldsCount() == 0;
      default:
        return v.hasNullValue();
    }
  }

  private static BigDecimal number(Value v) {
    if (v.hasNumberValue()) {
      return new BigDecimal(Double.toString(v.getNumberValue()));
    }
    if (v.hasStringValue()) {
      try {
        return new BigDecimal(v.getStringValue());
      } catch (NumberFormatException notANumber) {
        return null;
      }
    }
    return null;
  }

  // -- JSON helpers ---------------------------------------------------------

  private static Value field(Struct s, String key) {
    Value v = s.getFieldsMap().get(key);
    if (v == null) {
      throw new IllegalArgumentException("scenario file: missing \"" + key + "\" in " + s);
    }
    return v;
  }

  /** The member {@code key} of an object value, or null when absent (or not an object). */
  private static Value get(Value v, String key) {
    return v != null && v.hasStructValue() ? v.getStructValue().getFieldsMap().get(key) : null;
  }

  private static List<Value> list(Value v) {
    return v != null && v.hasListValue() ? v.getListValue().getValuesList() : List.of();
  }

  private static String text(Value v) {
    return v == null ? "" : v.getStringValue();
  }

  private static Value strings(List<String> items) {
    ListValue.Builder out = ListValue.newBuilder();
    items.forEach(s -> out.addValues(Value.newBuilder().setStringValue(s)));
    return Value.newBuilder().setListValue(out).build();
  }

  private static String brief(Value v) {
    try {
      String json = PRINTER.omittingInsignificantWhitespace().print(v);
      return json.length() > 300 ? json.substring(0, 300) + "..." : json;
    } catch (InvalidProtocolBufferException e) {
      return v.toString();
    }
  }
}
