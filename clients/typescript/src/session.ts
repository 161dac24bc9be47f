/**
 * `SessionHandle`: one session's log — append, stream, context, compact, restore, watch, events,
 * compactions, search.
 */

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, type CallOptions as ConnectCallOptions } from "@connectrpc/connect";

import {
  ContextFormat,
  GetContextResponseSchema,
  type AppendEventsResponse,
  type GetContextResponse,
  type LabelUpdateSchema,
  type SearchHit,
  type StreamEventsRequestSchema,
} from "./gen/compaction/v1/compaction_service_pb.js";
import type { Event } from "./gen/compaction/v1/event_pb.js";
import type { Compaction as CompactionRecord, CompactionResult, Session } from "./gen/compaction/v1/session_pb.js";
import { SidecarError } from "./errors.js";
import { withIds, type EventInit } from "./ids.js";
import type { CallOptions, PolicyInit, RawClient, SearchOptions } from "./options.js";
import { EventStream, Watch } from "./streams.js";
import { usageMessage, type ModelUsageInit } from "./usage.js";

/**
 * A change to one session's labels, stored with an append: `sessionId` empty
 * (or absent) is the session appended to, another id a session of the same
 * tenant (created, no policy, when absent); `expectedVersion` fails the whole
 * append with FAILED_PRECONDITION unless that session is at that version.
 */
export type LabelUpdateInit = MessageInitShape<typeof LabelUpdateSchema>;

/** Options of `append`. */
export interface AppendOptions extends CallOptions {
  /** Fail with FAILED_PRECONDITION unless the session is at this version. */
  readonly expectedVersion?: bigint | number;
  /** Create the session (with the server's default policy) if it is absent. */
  readonly createIfMissing?: boolean;
  /** Label changes stored in the same transaction as the events: with them or not at all. */
  readonly labelUpdates?: readonly LabelUpdateInit[];
  /**
   * The provider's usage report of a model call made with an earlier context: calibrates the
   * session's token estimates. One the server cannot take is not an error: the response's
   * `usageIgnoredReason` says why.
   */
  readonly usage?: ModelUsageInit;
}

/** Options of `context`. */
export interface ContextOptions extends CallOptions {
  /**
   * Also render the window as this provider's request fragment (`renderedJson`, e.g.
   * `{"contents": [...]}` for Gemini). Unset: events only.
   */
  readonly format?: ContextFormat;
}

/** Options of `compact`. */
export interface CompactOptions extends CallOptions {
  /** Overrides the session's policy for this pass. */
  readonly policy?: PolicyInit;
  /** Skip the trigger: run the strategy now. */
  readonly force?: boolean;
  /** Fail with FAILED_PRECONDITION unless the session is at this version. */
  readonly expectedVersion?: bigint | number;
}

/** Options of `restore`. */
export interface RestoreOptions extends CallOptions {
  /** Fail with FAILED_PRECONDITION unless the session is at this version. */
  readonly expectedVersion?: bigint | number;
  /**
   * Keep the session's trigger from compacting the restored window again until its policy is next
   * set (`updateSession` with a policy); the session shows `autoCompactionPaused`. A forced
   * `compact` still runs.
   */
  readonly pauseAutoCompaction?: boolean;
}

/** Options of `compactions`. */
export interface CompactionsOptions extends CallOptions {
  /** Compactions per page fetched (default: the server's, 100). */
  readonly pageSize?: number;
}

/** Options of `events`. */
export interface EventsOptions extends CallOptions {
  /** Only the active window (archived events left out). */
  readonly activeOnly?: boolean;
  /** Events per page fetched (default: the server's, 100). */
  readonly pageSize?: number;
}

/** Reads of a window sent without content before `context` settles for the last one. */
const WHOLE_WINDOW_TRIES = 3;

/**
 * Whether `a` lists the same window as `b` (content aside). Ids alone are not enough: a clearing
 * changes events in place, keeping their ids, and sets their flag and token count. A count that
 * is an estimate on either side (`tokenCountEstimated`) is not compared: its exact count may have
 * landed in between, which changes no version and nothing the model is sent.
 */
function sameWindow(a: readonly Event[], b: readonly Event[]): boolean {
  return (
    a.length === b.length &&
    a.every((event, i) => {
      const other = b[i];
      return (
        other !== undefined &&
        event.id === other.id &&
        event.cleared === other.cleared &&
        (event.tokenCount === other.tokenCount ||
          event.tokenCountEstimated ||
          other.tokenCountEstimated)
      );
    })
  );
}

/**
 * What a handle calls through: its `SidecarClient` (handed in by `client.session(id)`), seen
 * only as the calls a handle makes, so this module does not import the client's.
 */
export interface SessionClient {
  /** The generated client. */
  readonly raw: RawClient;
  /** The default deadline of a call, in milliseconds (undefined: none). */
  readonly timeoutMs: number | undefined;
  /** One unary call, retried on UNAVAILABLE when `retry` (the caller vouches it is safe). */
  unary<T>(
    call: (options: ConnectCallOptions) => Promise<T>,
    retry: boolean,
    options: CallOptions | undefined,
  ): Promise<T>;
  /** Options for a stream: the deadline is the whole stream's, the signal ends it. */
  streamOptions(options: CallOptions | undefined): ConnectCallOptions;
  /** Every item of every page: `fetch(pageToken)` returns a page and the next token. */
  paged<T>(fetch: (pageToken: string) => Promise<[readonly T[], string]>): AsyncIterable<T>;
  /** A session's header. */
  getSession(sessionId: string, options?: CallOptions): Promise<Session>;
  /** Full-text search; see `SidecarClient.search`. */
  search(query: string, options?: SearchOptions): AsyncIterable<SearchHit>;
}

export class SessionHandle {
  constructor(
    private readonly client: SessionClient,
    readonly sessionId: string,
  ) {}

  /** The session's header. */
  get(options?: CallOptions): Promise<Session> {
    return this.client.getSession(this.sessionId, options);
  }

  /**
   * Store a batch in one transaction; compacts if the session's trigger fires.
   *
   * Events without an id get one here, before the first attempt, so a retry
   * after a lost answer (UNAVAILABLE) stores nothing twice. The response holds
   * the events as stored, the new version, and any inline compaction.
   */
  append(events: Iterable<EventInit>, options: AppendOptions = {}): Promise<AppendEventsResponse> {
    const request = {
      sessionId: this.sessionId,
      events: withIds(events),
      expectedVersion: BigInt(options.expectedVersion ?? 0),
      createIfMissing: options.createIfMissing ?? false,
      labelUpdates: [...(options.labelUpdates ?? [])],
      usage: usageMessage(options.usage),
    };
    return this.client.unary((o) => this.client.raw.appendEvents(request, o), true, options);
  }

  /**
   * Open the fast path: `send()` appends (waiting for room in a bounded queue),
   * iterate for acks, per-request errors and background compactions. `close()`
   * and drain to wait for every ack; `cancel()` (or the signal) ends it at once.
   * `timeoutMs` bounds the whole stream.
   */
  stream(options?: CallOptions): EventStream {
    return new EventStream(
      (requests: AsyncIterable<MessageInitShape<typeof StreamEventsRequestSchema>>, o) =>
        this.client.raw.streamEvents(requests, o),
      this.sessionId,
      this.client.streamOptions(options),
    );
  }

  /**
   * The compacted context to send to the model: the active window, in log order.
   *
   * A window too large for one answer comes from the server without its
   * events' content (`contentOmitted`); it is then read in byte-bounded
   * pages (ListEvents, active only) and put together, so the answer always
   * holds every event's content. When the window changed between the two
   * reads it is read again, a few times at most.
   *
   * With `format`, `renderedJson` holds the window as that provider's request
   * fragment, ready to merge into the request body. A window read in parts
   * comes as events only: `renderedJson` is then "" (the server renders only
   * what it sends in one answer), `estimatedPromptTokens` is kept. `timeoutMs` bounds all the
   * calls a window read in parts takes together.
   */
  async context(options: ContextOptions = {}): Promise<GetContextResponse> {
    const request = { sessionId: this.sessionId, format: options.format ?? ContextFormat.UNSPECIFIED };
    // One deadline for every call a window read in parts takes (answers, pages, re-reads).
    const budget = options.timeoutMs ?? this.client.timeoutMs;
    const deadline = budget === undefined ? undefined : Date.now() + budget;
    const left = (): CallOptions => ({
      timeoutMs: deadline === undefined ? undefined : Math.max(1, deadline - Date.now()),
      signal: options.signal,
    });
    for (let attempt = 1; ; attempt++) {
      const answer = await this.client.unary((o) => this.client.raw.getContext(request, o), true, left());
      if (!answer.contentOmitted) return answer;
      const listed: Event[] = [];
      const pages = this.client.paged(async (pageToken) => {
        const page = await this.client.unary(
          (o) => this.client.raw.listEvents({ sessionId: this.sessionId, activeOnly: true, pageToken }, o),
          true,
          left(),
        );
        return [page.events, page.nextPageToken];
      });
      for await (const event of pages) {
        listed.push(event);
      }
      let same = sameWindow(listed, answer.events);
      if (answer.eventsOmitted) {
        // Too many events to list even without content: nothing to compare the pages with, so a
        // second answer tells whether a write came in between.
        const again = await this.client.unary((o) => this.client.raw.getContext(request, o), true, left());
        same = again.version === answer.version && again.cachePrefixId === answer.cachePrefixId;
      }
      if (attempt >= WHOLE_WINDOW_TRIES || same) {
        return create(GetContextResponseSchema, { ...answer, events: listed, contentOmitted: false, eventsOmitted: false });
      }
    }
  }

  /**
   * Run a compaction pass now and wait for it; `policy` overrides the session's.
   * Without `force` the trigger decides. Not retried: a lost answer may hide a pass that landed.
   */
  async compact(options: CompactOptions = {}): Promise<CompactionResult> {
    const request = {
      sessionId: this.sessionId,
      policy: options.policy,
      force: options.force ?? false,
      expectedVersion: BigInt(options.expectedVersion ?? 0),
    };
    const response = await this.client.unary((o) => this.client.raw.compact(request, o), false, options);
    if (response.result === undefined) {
      throw new SidecarError(Code.Internal, "Compact answered without a result");
    }
    return response.result;
  }

  /**
   * Undo the session's newest compaction still standing (`compactionId` "" or absent: that one).
   *
   * What it archived is active again in place, what it cleared uncleared, the summary turn it
   * inserted archived; nothing is deleted. The result has strategy "restore", its own
   * `compactionId`, the window after it (`activeEvents`) and `restoredEventIds`. Naming an older
   * compaction fails with FAILED_PRECONDITION naming the one to restore first (also in `limits`),
   * an unknown one with NOT_FOUND. Not retried: a lost answer may hide a restore that landed.
   */
  async restore(compactionId = "", options: RestoreOptions = {}): Promise<CompactionResult> {
    const request = {
      sessionId: this.sessionId,
      compactionId,
      expectedVersion: BigInt(options.expectedVersion ?? 0),
      pauseAutoCompaction: options.pauseAutoCompaction ?? false,
    };
    const response = await this.client.unary((o) => this.client.raw.restoreCompaction(request, o), false, options);
    if (response.result === undefined) {
      throw new SidecarError(Code.Internal, "RestoreCompaction answered without a result");
    }
    return response.result;
  }

  /**
   * The session's compaction history, newest first, page after page: each with its cause, what it
   * archived, cleared and inserted (a summary turn stands for its `archivedEventIds`), and
   * `restoredBy` / `restores` once a restore undid it.
   */
  compactions(options: CompactionsOptions = {}): AsyncIterable<CompactionRecord> {
    const request = { sessionId: this.sessionId, pageSize: options.pageSize ?? 0 };
    return this.client.paged(async (pageToken) => {
      const page = await this.client.unary(
        (o) => this.client.raw.listCompactions({ ...request, pageToken }, o),
        true,
        options,
      );
      const records: CompactionRecord[] = [];
      for (const record of page.compactions) {
        const omitted = record.archivedEventIdsOmitted || record.clearedEventIdsOmitted || record.insertedEventIdsOmitted;
        records.push(omitted ? await this.withAllIds(record, options) : record);
      }
      return [records, page.nextPageToken];
    });
  }

  /**
   * `record` with its id lists whole again, when the server left them out (too many ids for one
   * page): read page by page with ListCompactions `idsOf`.
   */
  private async withAllIds(record: CompactionRecord, options: CallOptions): Promise<CompactionRecord> {
    const whole: CompactionRecord = {
      ...record,
      archivedEventIds: [],
      clearedEventIds: [],
      insertedEventIds: [],
      archivedEventIdsOmitted: false,
      clearedEventIdsOmitted: false,
      insertedEventIdsOmitted: false,
    };
    let pageToken = "";
    do {
      const page = await this.client.unary(
        (o) => this.client.raw.listCompactions({ sessionId: this.sessionId, idsOf: record.compactionId, pageToken }, o),
        true,
        options,
      );
      for (const part of page.compactions) {
        whole.archivedEventIds.push(...part.archivedEventIds);
        whole.clearedEventIds.push(...part.clearedEventIds);
        whole.insertedEventIds.push(...part.insertedEventIds);
      }
      pageToken = page.nextPageToken;
    } while (pageToken);
    return whole;
  }

  /**
   * Every compaction result of the session as it lands, and `missed` notices
   * when the watcher fell behind. Results that landed before the call are not
   * replayed; not retried (a silent reconnect would hide lost results).
   * End it with the signal, `cancel()`, or by leaving the `for await` loop (which cancels the call).
   */
  watch(options?: CallOptions): Watch {
    return new Watch(
      (o) => this.client.raw.watchSession({ sessionId: this.sessionId }, o),
      this.client.streamOptions(options),
    );
  }

  /** The whole log in log order, archived events included unless `activeOnly`, page after page. */
  events(options: EventsOptions = {}): AsyncIterable<Event> {
    const request = {
      sessionId: this.sessionId,
      activeOnly: options.activeOnly ?? false,
      pageSize: options.pageSize ?? 0,
    };
    return this.client.paged(async (pageToken) => {
      const page = await this.client.unary(
        (o) => this.client.raw.listEvents({ ...request, pageToken }, o),
        true,
        options,
      );
      return [page.events, page.nextPageToken];
    });
  }

  /** Full-text search of this session's archive; see `SidecarClient.search`. */
  search(query: string, options: Omit<SearchOptions, "sessionId"> = {}): AsyncIterable<SearchHit> {
    return this.client.search(query, { ...options, sessionId: this.sessionId });
  }
}
