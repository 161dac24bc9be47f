package dev.compactionsidecar.client;

import java.util.List;
import org.junit.jupiter.api.AfterAll;

/**
 * A test class run against one real server and one client, started by the class's own
 * {@code @BeforeAll} with {@link #startServer} and stopped after its last test. Test classes
 * run one after another (no parallel execution is configured), so the fields are the running
 * class's.
 */
abstract class AgainstServer {
  static SidecarProcess server;
  static SidecarClient client;

  static void startServer(String... extraArgs) throws Exception {
    startServer(List.of(extraArgs));
  }

  static void startServer(List<String> extraArgs) throws Exception {
    server = SidecarProcess.start(extraArgs);
    client = SidecarClient.builder(server.target()).build();
  }

  @AfterAll
  static void stopServer() throws Exception {
    try {
      if (client != null) {
        client.close();
      }
    } finally {
      client = null;
      if (server != null) {
        server.close();
        server = null;
      }
    }
  }
}
