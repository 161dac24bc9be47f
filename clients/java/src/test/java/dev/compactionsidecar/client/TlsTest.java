package dev.compactionsidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The builder's TLS option against a server with a self-signed certificate (made by the openssl
 * CLI, which the test requires rather than skipping without).
 */
class TlsTest {
  private static Path certs;
  private static SidecarProcess server;

  @BeforeAll
  static void start() throws Exception {
    certs = Files.createTempDirectory("sidecar-tls-");
    Process openssl =
        new ProcessBuilder(
                List.of(
                    "openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", certs.resolve("key.pem").toString(),
                    "-out", certs.resolve("cert.pem").toString()))
            .redirectErrorStream(true)
            .start();
    String output = new String(openssl.getInputStream().readAllBytes());
    assertEquals(0, openssl.waitFor(), "openssl failed: " + output);
    server =
        SidecarProcess.start(
            "--tls-cert", certs.resolve("cert.pem").toString(),
            "--tls-key", certs.resolve("key.pem").toString());
  }

  @AfterAll
  static void stop() throws Exception {
    if (server != null) {
      server.close();
    }
    for (String name : List.of("key.pem", "cert.pem")) {
      Files.deleteIfExists(certs.resolve(name));
    }
    Files.deleteIfExists(certs);
  }

  @Test
  void clientTrustingTheServersCertificateConnects() {
    try (SidecarClient client =
        SidecarClient.builder(server.target()).tls(Tls.trusting(certs.resolve("cert.pem"))).build()) {
      client.createSession("tls-1");
      client.session("tls-1").append(Events.user("over TLS"));
      assertEquals(1, client.session("tls-1").context().getEventsCount());
    }
  }

  @Test
  void plaintextClientCannotTalkToATlsServer() {
    try (SidecarClient client =
        SidecarClient.builder(server.target())
            .retryPolicy(RetryPolicy.NONE)
            .defaultDeadline(Duration.ofSeconds(5))
            .build()) {
      SidecarException e = assertThrows(SidecarException.class, () -> client.getSession("tls-1"));
      assertEquals(Status.Code.UNAVAILABLE, e.getCode());
    }
  }
}
