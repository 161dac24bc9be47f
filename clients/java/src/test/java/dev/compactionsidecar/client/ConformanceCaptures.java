package dev.compactionsidecar.client;

import com.google.protobuf.ListValue;
import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Values a scenario step captures from its response ({@code "capture": {"name": "dotted.path"}})
 * and later steps send and expect as {@code ${name}}: ids the server assigns, such as a compaction
 * id or a page token (tests/conformance/README.md).
 */
final class ConformanceCaptures {
  private static final Pattern CAPTURED = Pattern.compile("\\$\\{(\\w+)\\}");

  private ConformanceCaptures() {}

  /** {@code value} with every {@code ${name}} in its strings replaced by its captured value. */
  static Value substitute(Value value, Map<String, String> captured) {
    switch (value.getKindCase()) {
      case STRING_VALUE:
        return Value.newBuilder().setStringValue(substitute(value.getStringValue(), captured)).build();
      case LIST_VALUE:
        ListValue.Builder list = ListValue.newBuilder();
        value.getListValue().getValuesList().forEach(v -> list.addValues(substitute(v, captured)));
        return Value.newBuilder().setListValue(list).build();
      case STRUCT_VALUE:
        Struct.Builder struct = Struct.newBuilder();
        value
            .getStructValue()
            .getFieldsMap()
            .forEach((key, v) -> struct.putFields(key, substitute(v, captured)));
        return Value.newBuilder().setStructValue(struct).build();
      default:
        return value;
    }
  }

  private static String substitute(String text, Map<String, String> captured) {
    Matcher found = CAPTURED.matcher(text);
    StringBuilder out = new StringBuilder();
    while (found.find()) {
      String value = captured.get(found.group(1));
      if (value == null) {
        throw new IllegalArgumentException(found.group() + " was not captured by an earlier step");
      }
      found.appendReplacement(out, Matcher.quoteReplacement(value));
    }
    return found.appendTail(out).toString();
  }

  /**
   * The string values at {@code paths} (dotted keys; numbers index arrays) of a response, put into
   * {@code into}; a problem for each one missing.
   */
  static List<String> capture(Struct paths, Value response, Map<String, String> into) {
    List<String> problems = new ArrayList<>();
    for (var entry : paths.getFieldsMap().entrySet()) {
      String path = entry.getValue().getStringValue();
      Value at = at(response, path);
      if (at != null && at.hasStringValue() && !at.getStringValue().isEmpty()) {
        into.put(entry.getKey(), at.getStringValue());
      } else {
        problems.add("capture " + entry.getKey() + ": no string at " + path);
      }
    }
    return problems;
  }

  /** The value at a dotted {@code path} of a response (numbers index arrays), or null. */
  static Value at(Value response, String path) {
    Value at = response;
    for (String key : path.split("\\.")) {
      at = step(at, key);
    }
    return at;
  }

  private static Value step(Value at, String key) {
    if (at == null) {
      return null;
    }
    if (at.hasStructValue()) {
      return at.getStructValue().getFieldsMap().get(key);
    }
    if (at.hasListValue() && key.matches("\\d+")) {
      int i = Integer.parseInt(key);
      List<Value> items = at.getListValue().getValuesList();
      return i < items.size() ? items.get(i) : null;
    }
    return null;
  }
}
