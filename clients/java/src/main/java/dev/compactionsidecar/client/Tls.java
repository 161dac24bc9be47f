package dev.compactionsidecar.client;

import io.grpc.ChannelCredentials;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;

/**
 * TLS settings, as PEM files.
 *
 * <p>{@code trustCertificates} null means the JVM's default trust store. {@code certificateChain}
 * and {@code privateKey} go together, for servers that require client certificates (mutual TLS).
 */
public record Tls(Path trustCertificates, Path certificateChain, Path privateKey) {

  public Tls {
    if ((certificateChain == null) != (privateKey == null)) {
      throw new IllegalArgumentException("Tls: certificateChain and privateKey go together");
    }
  }

  /** Server authentication against the JVM's trust store. */
  public static Tls systemRoots() {
    return new Tls(null, null, null);
  }

  /** Server authentication against the CA certificates in this PEM file. */
  public static Tls trusting(Path caCertificates) {
    return new Tls(caCertificates, null, null);
  }

  /** The same trust, presenting this client certificate (mutual TLS). */
  public Tls withClientCertificate(Path chain, Path key) {
    return new Tls(trustCertificates, chain, key);
  }

  ChannelCredentials credentials() {
    TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
    try {
      if (trustCertificates != null) {
        builder.trustManager(trustCertificates.toFile());
      }
      if (certificateChain != null) {
        builder.keyManager(certificateChain.toFile(), privateKey.toFile());
      }
    } catch (IOException e) {
      throw new UncheckedIOException("Tls: cannot read a PEM file", e);
    }
    return builder.build();
  }
}
