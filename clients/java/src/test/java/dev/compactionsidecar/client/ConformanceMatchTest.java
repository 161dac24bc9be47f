package dev.compactionsidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Value;
import com.google.protobuf.util.JsonFormat;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The conformance format's matching rules, so a runner bug cannot pass every scenario. */
class ConformanceMatchTest {
  private static Value json(String text) throws InvalidProtocolBufferException {
    Value.Builder v = Value.newBuilder();
    JsonFormat.parser().merge(text, v);
    return v.build();
  }

  private static String match(String expected, String actual) throws Exception {
    return ConformanceTest.match(json(expected), json(actual), "$");
  }

  @Test
  void objectsMatchOnExpectedKeysOnly() throws Exception {
    assertNull(match("{\"a\": 1}", "{\"a\": 1, \"b\": 2}"));
    assertNotNull(match("{\"a\": 1}", "{\"a\": 2}"));
  }

  @Test
  void numbersAndNumericStringsCompareByValue() throws Exception {
    assertNull(match("{\"version\": \"2\"}", "{\"version\": 2}"));
    assertNull(match("{\"version\": 2}", "{\"version\": \"2\"}"));
    assertNotNull(match("{\"version\": \"2\"}", "{\"version\": \"3\"}"));
  }

  @Test
  void arraysNeedEqualLengthAndMatchElementWise() throws Exception {
    assertNull(match("[\"e1\", \"*\"]", "[\"e1\", \"x\"]"));
    assertNotNull(match("[\"e1\"]", "[\"e1\", \"e2\"]"));
    assertNotNull(match("[\"e2\", \"e1\"]", "[\"e1\", \"e2\"]"));
  }

  @Test
  void absentKeysMatchDefaultsOnly() throws Exception {
    assertNull(match("{\"compacted\": false, \"n\": \"0\", \"s\": \"\", \"l\": [], \"o\": {}}", "{}"));
    assertNotNull(match("{\"compacted\": true}", "{}"));
    assertNull(match("{\"id\": \"*\"}", "{}"));
  }

  @Test
  void renderedIsMatchedAgainstTheParsedRendering() throws Exception {
    Value rendered = Value.newBuilder().setStringValue("{\"messages\":[{\"role\":\"user\"}]}").build();
    assertNull(ConformanceTest.rendered(json("{\"messages\": [{\"role\": \"user\"}]}"), rendered));
    assertNotNull(ConformanceTest.rendered(json("{\"messages\": [{\"role\": \"system\"}]}"), rendered));
    assertNotNull(ConformanceTest.rendered(json("{}"), null));
  }

  private static String differs(String expected) throws Exception {
    Value response = json("{\"cachePrefixId\": \"p2\", \"stablePrefixEvents\": 2}");
    return ConformanceTest.differs(json(expected).getStructValue(), response);
  }

  @Test
  void differsFailsWhenTheValueMatchesOneListed() throws Exception {
    assertNull(differs("{\"cachePrefixId\": [\"p0\", \"p1\"]}"));
    assertEquals(
        "differs cachePrefixId: expected other than \"p2\", got \"p2\"",
        differs("{\"cachePrefixId\": [\"p1\", \"p2\"]}"));
    assertEquals(
        "differs stablePrefixEvents: expected other than \"2\", got 2.0",
        differs("{\"stablePrefixEvents\": [\"2\"]}"));
    assertNotNull(differs("{\"missing\": [\"p1\"]}"));
    assertNotNull(differs("{\"cachePrefixId\": \"p1\"}"), "the values must be a list");
  }

  @Test
  void capturedValuesAreSubstitutedIntoLaterSteps() throws Exception {
    Value response = json("{\"result\": {\"compactionId\": \"c9\"}, \"compactions\": [{\"compactionId\": \"c8\"}]}");
    Map<String, String> captured = new HashMap<>();
    Value paths = json("{\"newer\": \"result.compactionId\", \"older\": \"compactions.0.compactionId\"}");
    assertEquals(List.of(), ConformanceCaptures.capture(paths.getStructValue(), response, captured));
    assertEquals(Map.of("newer", "c9", "older", "c8"), captured);
    Value step = json("{\"request\": {\"compactionId\": \"${older}\"}, \"expect\": {\"message_contains\": \"${newer} is\"}}");
    assertEquals(
        json("{\"request\": {\"compactionId\": \"c8\"}, \"expect\": {\"message_contains\": \"c9 is\"}}"),
        ConformanceCaptures.substitute(step, captured));
  }

  @Test
  void aCaptureThatFindsNothingFailsTheStep() throws Exception {
    Value paths = json("{\"token\": \"nextPageToken\"}");
    assertEquals(
        List.of("capture token: no string at nextPageToken"),
        ConformanceCaptures.capture(paths.getStructValue(), json("{\"compactions\": []}"), new HashMap<>()));
    assertThrows(
        IllegalArgumentException.class,
        () -> ConformanceCaptures.substitute(json("{\"compactionId\": \"${never}\"}"), Map.of()));
  }
}
