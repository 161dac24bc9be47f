package dev.compactionsidecar.client;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A real {@code compaction-sidecar serve} on ports the kernel picks (read back from its "listening"
 * line, so no free-port race), SQLite in a temporary folder, for one
 * test class.
 *
 * <p>The binary is the system property {@code sidecar.bin} (Maven passes {@code SIDECAR_BIN}
 * through), else the environment's {@code SIDECAR_BIN}, else the repository's {@code
 * .venv/bin/compaction-sidecar} (made by {@code make setup}). A missing binary fails the test: a
 * client suite that skipped without a server would prove nothing.
 */
final class SidecarProcess implements AutoCloseable {
  private static final Duration STARTUP = Duration.ofSeconds(60);

  private final Process process;
  private final Path dir;
  private final Path log;
  private final int port;

  private static final Pattern LISTENING =
      Pattern.compile("compaction-sidecar listening on \\S+ \\(port (\\d+)\\)");

  private SidecarProcess(Process process, Path dir, Path log, int port) {
    this.process = process;
    this.dir = dir;
    this.log = log;
    this.port = port;
  }

  /** Start a server with {@code extraArgs} after the listen/store flags; returns once it listens. */
  static SidecarProcess start(String... extraArgs) throws IOException, InterruptedException {
    return start(List.of(extraArgs));
  }

  static SidecarProcess start(List<String> extraArgs) throws IOException, InterruptedException {
    Path binary = binary();
    Path dir = Files.createTempDirectory("sidecar-java-");
    Path log = dir.resolve("server.log");
    List<String> command = new ArrayList<>();
    command.add(binary.toString());
    command.add("serve");
    command.addAll(List.of("--listen", "127.0.0.1:0"));
    command.addAll(List.of("--health-listen", "127.0.0.1:0"));
    command.addAll(List.of("--store", "sqlite:///" + dir.resolve("sidecar.db").toAbsolutePath()));
    command.addAll(extraArgs);
    Process process =
        new ProcessBuilder(command)
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .start();
    return new SidecarProcess(process, dir, log, awaitListening(process, log));
  }

  static Path binary() {
    String configured = System.getProperty("sidecar.bin", "");
    if (configured.isBlank() || configured.startsWith("${")) {
      configured = System.getenv().getOrDefault("SIDECAR_BIN", "");
    }
    Path path =
        configured.isBlank()
            ? Path.of("../../.venv/bin/compaction-sidecar").toAbsolutePath().normalize()
            : Path.of(configured);
    if (!Files.isExecutable(path)) {
      throw new IllegalStateException(
          "compaction-sidecar not found at "
              + path
              + ": set SIDECAR_BIN (or -Dsidecar.bin) to the server binary, or run `make setup`");
    }
    return path;
  }

  /** The port from the server's "listening" line, once it prints it. */
  private static int awaitListening(Process process, Path log)
      throws IOException, InterruptedException {
    Instant until = Instant.now().plus(STARTUP);
    while (Instant.now().isBefore(until)) {
      String output = Files.exists(log) ? Files.readString(log) : "";
      Matcher listening = LISTENING.matcher(output);
      if (listening.find()) {
        return Integer.parseInt(listening.group(1));
      }
      if (!process.isAlive()) {
        throw new IllegalStateException("compaction-sidecar exited early:\n" + output);
      }
      Thread.sleep(50);
    }
    process.destroyForcibly().waitFor();
    throw new IllegalStateException(
        "compaction-sidecar did not listen within " + STARTUP + ":\n" + Files.readString(log));
  }

  /** {@code 127.0.0.1:PORT}. */
  String target() {
    return "127.0.0.1:" + port;
  }

  /** The folder holding the database and the log; files for the server (token files) go here. */
  Path dir() {
    return dir;
  }

  String log() throws IOException {
    return Files.exists(log) ? Files.readString(log) : "";
  }

  @Override
  public void close() throws IOException, InterruptedException {
    process.destroy();
    if (!process.waitFor(10, java.util.concurrent.TimeUnit.SECONDS)) {
      process.destroyForcibly().waitFor();
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
