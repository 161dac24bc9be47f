package dev.compactionsidecar.client;

import dev.compactionsidecar.v1.CompactionPolicy;
import dev.compactionsidecar.v1.Event;
import dev.compactionsidecar.v1.Role;
import dev.compactionsidecar.v1.SlidingWindow;
import dev.compactionsidecar.v1.Strategy;
import java.util.List;
import java.util.stream.Collectors;

/** Tiny builders so tests read like the spec: {@code u("u1", "hi")}, ids in order. */
final class Fixtures {
  private Fixtures() {}

  static Event u(String id, String text) {
    return Event.newBuilder().setId(id).setRole(Role.ROLE_USER).setText(text).build();
  }

  static Event a(String id, String text) {
    return Event.newBuilder().setId(id).setRole(Role.ROLE_ASSISTANT).setText(text).build();
  }

  /** No trigger (compacts only when asked), sliding window of {@code maxEvents}. */
  static CompactionPolicy slidingWindow(int maxEvents) {
    return CompactionPolicy.newBuilder()
        .setStrategy(
            Strategy.newBuilder()
                .setSlidingWindow(SlidingWindow.newBuilder().setMaxEvents(maxEvents)))
        .build();
  }

  static List<String> ids(List<Event> events) {
    return events.stream().map(Event::getId).collect(Collectors.toList());
  }
}
