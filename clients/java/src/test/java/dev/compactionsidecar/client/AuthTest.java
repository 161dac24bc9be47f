package dev.compactionsidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The bearer token travels on every call, streams included. */
class AuthTest {
  private static SidecarProcess server;
  private static Path tokens;

  @BeforeAll
  static void start() throws Exception {
    tokens = Files.createTempFile("sidecar-tokens-", ".txt");
    Files.writeString(tokens, "# test tokens\ns3cret\n");
    server = SidecarProcess.start("--auth-token-file", tokens.toString());
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.close();
    }
    Files.deleteIfExists(tokens);
  }

  @Test
  void callsWithoutTheTokenAreUnauthenticated() {
    try (SidecarClient client = SidecarClient.builder(server.target()).build()) {
      SidecarException e =
          assertThrows(SidecarException.class, () -> client.createSession("auth-none"));
      assertEquals(Status.Code.UNAUTHENTICATED, e.getCode());
    }
    try (SidecarClient client =
        SidecarClient.builder(server.target()).bearerToken("wrong").build()) {
      assertThrows(SidecarException.class, () -> client.getSession("auth-none"));
    }
  }

  @Test
  void callsWithTheTokenGoThroughStreamsIncluded() {
    try (SidecarClient client =
        SidecarClient.builder(server.target()).bearerToken("s3cret").build()) {
      client.createSession("auth-ok");
      try (EventStream stream = client.session("auth-ok").stream()) {
        stream.send(java.util.List.of(Events.user("hi")));
        assertEquals(1, stream.drain().size());
      }
      assertEquals(1, client.session("auth-ok").context().getEventsCount());
    }
  }
}
