package dev.compactionsidecar.client;

import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.Spliterator;
import java.util.Spliterators;
import java.util.function.Function;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;

/** Every item of every page, fetched lazily as the stream is consumed. */
final class Pages {
  private Pages() {}

  /** A page: its items and the token of the next one ("" on the last page). */
  record Page<T>(List<T> items, String nextToken) {}

  static <T> Stream<T> stream(Function<String, Page<T>> fetch) {
    Iterator<T> items =
        new Iterator<>() {
          private Iterator<T> current = List.<T>of().iterator();
          private String token = "";
          private boolean last = false;

          @Override
          public boolean hasNext() {
            while (!current.hasNext() && !last) {
              Page<T> page = fetch.apply(token);
              current = page.items().iterator();
              token = page.nextToken();
              last = token.isEmpty();
            }
            return current.hasNext();
          }

          @Override
          public T next() {
            if (!hasNext()) {
              throw new NoSuchElementException();
            }
            return current.next();
          }
        };
    return StreamSupport.stream(
        Spliterators.spliteratorUnknownSize(items, Spliterator.ORDERED | Spliterator.NONNULL),
        false);
  }
}
