/**
 * Event ids chosen by the client, so that appends are safe to retry.
 */

import { randomUUID } from "node:crypto";

import type { MessageInitShape } from "@bufbuild/protobuf";

import type { EventSchema } from "./gen/compaction/v1/event_pb.js";

/** An event as a plain object: `{ role: Role.USER, text: "hi" }` (id optional). */
export type EventInit = MessageInitShape<typeof EventSchema>;

/** A fresh event id: 32 hex digits, like the Python client's uuid4().hex. */
export function newEventId(): string {
  return randomUUID().replaceAll("-", "");
}

/**
 * The events, each with an id: a fresh one where the caller gave none.
 *
 * Done once, before the first attempt, so that a retried append re-sends the
 * same ids and the server stores each event once.
 */
export function withIds(events: Iterable<EventInit>): EventInit[] {
  return [...events].map((event) => (event.id ? event : { ...event, id: newEventId() }));
}
