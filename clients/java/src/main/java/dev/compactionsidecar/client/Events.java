package dev.compactionsidecar.client;

import com.google.protobuf.ByteString;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.Reasoning;
import dev.compactionsidecar.v1.Role;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/** Small helpers for building events. */
public final class Events {
  private Events() {}

  /**
   * The events, each with an id: a fresh random one where the caller gave none.
   *
   * <p>Done once, before the first attempt, so that a retried append re-sends the same ids and the
   * server stores each event once. Call it yourself before re-sending a batch after an error.
   */
  public static List<Event> withIds(List<Event> events) {
    List<Event> out = new ArrayList<>(events.size());
    for (Event event : events) {
      out.add(event.getId().isEmpty() ? event.toBuilder().setId(newId()).build() : event);
    }
    return List.copyOf(out);
  }

  /** A user message (starts a turn). */
  public static Event user(String text) {
    return Event.newBuilder().setRole(Role.ROLE_USER).setText(text).build();
  }

  /** An assistant reply. */
  public static Event assistant(String text) {
    return Event.newBuilder().setRole(Role.ROLE_ASSISTANT).setText(text).build();
  }

  /** A system message (instructions). */
  public static Event system(String text) {
    return Event.newBuilder().setRole(Role.ROLE_SYSTEM).setText(text).build();
  }

  /**
   * A block of the model's reasoning as its provider returned it (Gemini's thought and {@code
   * thought_signature}, Anthropic's thinking and signature), for an assistant event's {@code
   * reasoning}; the server keeps the signature byte for byte, as providers require it back.
   */
  public static Reasoning reasoning(String text, ByteString signature) {
    return Reasoning.newBuilder().setText(text).setSignature(signature).build();
  }

  /** Reasoning returned encrypted only (Anthropic's {@code redacted_thinking}): its data. */
  public static Reasoning redactedReasoning(ByteString data) {
    return Reasoning.newBuilder().setSignature(data).setRedacted(true).build();
  }

  private static String newId() {
    return UUID.randomUUID().toString().replace("-", "");
  }
}
