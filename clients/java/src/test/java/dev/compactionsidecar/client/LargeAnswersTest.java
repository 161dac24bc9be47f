package dev.compactionsidecar.client;

import static dev.compactionsidecar.client.Fixtures.a;
import static dev.compactionsidecar.client.Fixtures.ids;
import static dev.compactionsidecar.client.Fixtures.u;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.compactionsidecar.v1.GetContextResponse;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The server answers up to its --max-message-bytes (16 MiB by default); the client kept gRPC's 4
 * MiB inbound limit, so a window between the two could never be read again.
 */
class LargeAnswersTest {
  private static SidecarProcess server;

  @BeforeAll
  static void start() throws Exception {
    server = SidecarProcess.start("--default-policy", "none");
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.close();
    }
  }

  @Test
  void aWindowPastGrpcsDefault4MiBIsReadInOneAnswer() {
    try (SidecarClient client = SidecarClient.builder(server.target()).build()) {
      SessionHandle session = client.session("big");
      session.append(List.of(u("e0", "x".repeat(900_000))), AppendOptions.creatingIfMissing());
      for (String id : List.of("e1", "e2", "e3", "e4")) {
        session.append(List.of(a(id, "x".repeat(900_000))));
      }
      GetContextResponse window = session.context();
      assertEquals(List.of("e0", "e1", "e2", "e3", "e4"), ids(window.getEventsList()));
      assertFalse(window.getContentOmitted());
    }
  }
}
