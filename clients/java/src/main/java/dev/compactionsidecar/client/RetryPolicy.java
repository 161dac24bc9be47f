package dev.compactionsidecar.client;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How often and how patiently to repeat a call that failed with UNAVAILABLE.
 *
 * <p>Only calls that are safe to repeat are retried: the reads and appends (whose events carry ids
 * chosen before the first attempt, so the server stores each once). The n-th backoff (from 0) is
 * {@code initialBackoff * multiplier^n}, capped at {@code maxBackoff} and jittered down by up to
 * half, so clients cut off together do not come back together. All attempts and backoffs of one
 * call share that call's deadline.
 *
 * @param maxRetries repeats after the first attempt (0: never retry)
 */
public record RetryPolicy(
    int maxRetries, Duration initialBackoff, Duration maxBackoff, double multiplier) {

  /** 3 retries, 100 ms doubling up to 2 s: the Python client's defaults. */
  public static final RetryPolicy DEFAULT =
      new RetryPolicy(3, Duration.ofMillis(100), Duration.ofSeconds(2), 2.0);

  /** Never retry. */
  public static final RetryPolicy NONE = new RetryPolicy(0, Duration.ZERO, Duration.ZERO, 1.0);

  public RetryPolicy {
    if (maxRetries < 0 || multiplier < 1.0) {
      throw new IllegalArgumentException("RetryPolicy: maxRetries >= 0 and multiplier >= 1");
    }
  }

  /** The wait after failed attempt number {@code attempt} (0-based). */
  public Duration backoff(int attempt) {
    double ceiling =
        Math.min(maxBackoff.toNanos(), initialBackoff.toNanos() * Math.pow(multiplier, attempt));
    return Duration.ofNanos((long) (ceiling / 2 + ThreadLocalRandom.current().nextDouble() * ceiling / 2));
  }
}
