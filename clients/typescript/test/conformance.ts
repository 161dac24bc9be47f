/**
 * The TypeScript conformance runner: replays tests/conformance/scenarios.json through SidecarClient.
 *
 * Requests are parsed with protobuf-es `fromJson` and made through the
 * wrapper's methods (create, get, append, context, compact, restore, events,
 * compactions, search, stream); responses are printed with `toJson` and matched by the rules of
 * tests/conformance/README.md, the same as the Python runner's.
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";

import { create, fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";

import { SidecarClient, SidecarError, detailRegistry, policyFromJson, type StreamMessage } from "../src/index.js";
import {
  AppendEventsRequestSchema,
  AppendEventsResponseSchema,
  CompactRequestSchema,
  CompactResponseSchema,
  CreateSessionRequestSchema,
  DeleteSessionRequestSchema,
  DeleteSessionResponseSchema,
  GetContextRequestSchema,
  GetContextResponseSchema,
  GetSessionRequestSchema,
  ListCompactionsRequestSchema,
  ListCompactionsResponseSchema,
  ListEventsRequestSchema,
  ListEventsResponseSchema,
  ListSessionsRequestSchema,
  ListSessionsResponseSchema,
  RestoreCompactionRequestSchema,
  RestoreCompactionResponseSchema,
  SearchEventsRequestSchema,
  SearchEventsResponseSchema,
  StreamEventsRequestSchema,
  StreamEventsResponseSchema,
  UpdateSessionRequestSchema,
} from "../src/gen/compaction/v1/compaction_service_pb.js";
import { SessionSchema } from "../src/gen/compaction/v1/session_pb.js";
import { REPO_ROOT } from "./server.js";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface Step {
  readonly call: string;
  readonly request?: JsonValue;
  readonly requests?: JsonValue[];
  readonly expect?: Expect;
  /** Names for values of the response (dotted paths), sent and expected later as `${name}`. */
  readonly capture?: Record<string, string>;
  /** A CreateSession's policy, read by `policyFromJson` as a user hands it a document. */
  readonly policy_document?: JsonValue;
}

export interface Expect {
  readonly code?: string;
  readonly message_contains?: string;
  readonly field_violations?: Json[];
  readonly response?: Json;
  readonly responses?: Json;
  readonly event_ids?: Json[];
  readonly archived_ids?: Json[];
  readonly hit_event_ids?: Json[];
  readonly rendered?: Json;
  /** Dotted paths of the response whose value must be present and match none of the listed ones. */
  readonly differs?: Record<string, Json>;
}

export interface Scenario {
  readonly name: string;
  readonly description: string;
  readonly steps: readonly Step[];
}

export interface ScenarioFile {
  readonly format: number;
  readonly server_args: readonly string[];
  readonly scenarios: readonly Scenario[];
}

export function scenarioPath(): string {
  return process.env["CONFORMANCE_SCENARIOS"] || join(REPO_ROOT, "tests", "conformance", "scenarios.json");
}

export function loadScenarios(path: string = scenarioPath()): ScenarioFile {
  const doc = JSON.parse(readFileSync(path, "utf8")) as ScenarioFile;
  if (doc.format !== 1) {
    throw new Error(`${path}: unsupported format ${String(doc.format)}`);
  }
  return doc;
}

// -- matching ---------------------------------------------------------------

function isNumeric(value: Json | undefined): boolean {
  if (typeof value === "number") return true;
  return typeof value === "string" && value.trim() !== "" && !Number.isNaN(Number(value));
}

function isDefault(value: Json): boolean {
  if (Array.isArray(value)) return value.length === 0;
  if (value !== null && typeof value === "object") return Object.keys(value).length === 0;
  if (isNumeric(value)) return Number(value) === 0;
  return value === false || value === "";
}

const show = (value: Json | undefined): string => (value === undefined ? "(absent)" : JSON.stringify(value));

/**
 * Where `actual` differs from `expected` under the subset rules; empty when it matches.
 *
 * Objects match on the expected keys only, arrays element-wise with equal
 * length, "*" matches anything present, numbers and numeric strings by value,
 * and a key absent from the actual JSON matches an expected default.
 */
export function match(expected: Json, actual: Json | undefined, path = "$"): string[] {
  if (expected === "*") return [];
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return [`${path}: expected ${show(expected)}, got ${show(actual)}`];
    }
    return expected.flatMap((want, i) => match(want, actual[i], `${path}[${i}]`));
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) {
      return [`${path}: expected an object, got ${show(actual)}`];
    }
    const problems: string[] = [];
    for (const [key, want] of Object.entries(expected)) {
      if (!(key in actual)) {
        if (!isDefault(want)) problems.push(`${path}.${key}: missing, expected ${show(want)}`);
        continue;
      }
      problems.push(...match(want, actual[key], `${path}.${key}`));
    }
    return problems;
  }
  if (isNumeric(expected) && isNumeric(actual)) {
    if (Number(expected) === Number(actual)) return [];
  } else if (expected === actual) {
    return [];
  }
  return [`${path}: expected ${show(expected)}, got ${show(actual)}`];
}

/** What a step produced: the status code name, its message, the response as proto3 JSON. */
export interface Outcome {
  readonly code: string;
  readonly message: string;
  readonly fieldViolations: string[];
  readonly response: Json | undefined;
}

function ids(events: Json | undefined): Json[] {
  if (!Array.isArray(events)) return [];
  return events.map((e) => (e !== null && typeof e === "object" && !Array.isArray(e) ? (e["id"] ?? "") : ""));
}

function field(value: Json | undefined, key: string): Json | undefined {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value[key] : undefined;
}

/** Every way `outcome` misses `expect`; empty when the step passes. */
export function check(expect: Expect, outcome: Outcome): string[] {
  const wantCode = expect.code ?? "OK";
  if (outcome.code !== wantCode) {
    return [`code: expected ${wantCode}, got ${outcome.code} (${outcome.message})`];
  }
  const problems: string[] = [];
  if (expect.message_contains !== undefined && !outcome.message.includes(expect.message_contains)) {
    problems.push(`message: expected to contain ${JSON.stringify(expect.message_contains)}, got ${JSON.stringify(outcome.message)}`);
  }
  if (expect.field_violations !== undefined) {
    problems.push(...match(expect.field_violations, outcome.fieldViolations, "field_violations"));
  }
  if (outcome.code !== "OK") return problems;
  const response = outcome.response;
  if (expect.response !== undefined) problems.push(...match(expect.response, response, "response"));
  if (expect.responses !== undefined) problems.push(...match(expect.responses, response, "responses"));
  const events = field(response, "events");
  if (expect.event_ids !== undefined) problems.push(...match(expect.event_ids, ids(events), "event_ids"));
  if (expect.archived_ids !== undefined) {
    const archived = Array.isArray(events) ? events.filter((e) => field(e, "archived") === true) : [];
    problems.push(...match(expect.archived_ids, ids(archived), "archived_ids"));
  }
  if (expect.hit_event_ids !== undefined) {
    const hits = field(response, "hits");
    const hitEvents = Array.isArray(hits) ? hits.map((h) => field(h, "event") ?? {}) : [];
    problems.push(...match(expect.hit_event_ids, ids(hitEvents), "hit_event_ids"));
  }
  if (expect.rendered !== undefined) problems.push(...rendered(expect.rendered, field(response, "renderedJson")));
  if (expect.differs !== undefined) problems.push(...differs(expect.differs, response));
  return problems;
}

/**
 * `differs`: the value at each dotted path is present and matches none of its listed values — how
 * a scenario pins that an id moved (a cache prefix id after a compaction) without knowing either.
 */
function differs(expected: Record<string, Json>, response: Json | undefined): string[] {
  const problems: string[] = [];
  for (const [path, values] of Object.entries(expected)) {
    const actual = at(response, path);
    if (!Array.isArray(values)) {
      problems.push(`differs ${path}: expected a list of values, got ${show(values)}`);
    } else if (actual === undefined) {
      problems.push(`differs ${path}: absent from ${show(response)}`);
    } else {
      for (const value of values) {
        if (match(value, actual).length === 0) {
          problems.push(`differs ${path}: expected other than ${show(value)}, got ${show(actual)}`);
        }
      }
    }
  }
  return problems;
}

/** `rendered` matched, under the same rules, against the parsed `renderedJson`. */
function rendered(expected: Json, renderedJson: Json | undefined): string[] {
  if (typeof renderedJson !== "string" || renderedJson === "") return ["rendered: the response has no renderedJson"];
  let parsed: Json;
  try {
    parsed = JSON.parse(renderedJson) as Json;
  } catch (reason) {
    return [`rendered: renderedJson is not JSON (${String(reason)}): ${renderedJson}`];
  }
  return match(expected, parsed, "rendered");
}

// -- values captured from earlier steps ----------------------------------------

/** `value` with every `${name}` in its strings replaced by what an earlier step captured. */
export function substitute<T>(value: T, captured: ReadonlyMap<string, string>): T {
  const replaced = JSON.stringify(value, (_key, v: unknown) =>
    typeof v !== "string"
      ? v
      : v.replace(/\$\{(\w+)\}/g, (_whole, name: string) => {
          const found = captured.get(name);
          if (found === undefined) throw new Error(`\${${name}} was not captured by an earlier step`);
          return found;
        }),
  );
  return (replaced === undefined ? value : JSON.parse(replaced)) as T;
}

/** The value at a dotted `path` of a printed response (numbers index arrays), or undefined. */
function at(response: Json | undefined, path: string): Json | undefined {
  let value = response;
  for (const key of path.split(".")) {
    value = Array.isArray(value) && /^\d+$/.test(key) ? value[Number(key)] : field(value, key);
  }
  return value;
}

/**
 * The string values at `paths` (dotted keys; numbers index arrays) of a response, and what is
 * missing: a value the server assigns (a compaction id, a page token) named for later steps.
 */
export function capture(paths: Record<string, string>, response: Json | undefined): [Map<string, string>, string[]] {
  const values = new Map<string, string>();
  const problems: string[] = [];
  for (const [name, path] of Object.entries(paths)) {
    const value = at(response, path);
    if (typeof value === "string" && value !== "") values.set(name, value);
    else problems.push(`capture ${name}: no string at ${path} of ${show(response)}`);
  }
  return [values, problems];
}

// -- running ------------------------------------------------------------------

function printed<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Json {
  return toJson(schema, message, { registry: detailRegistry }) as Json;
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

function streamResponse(message: StreamMessage): MessageShape<typeof StreamEventsResponseSchema> {
  switch (message.kind) {
    case "ack":
      return create(StreamEventsResponseSchema, {
        requestId: message.requestId,
        sessionId: message.sessionId,
        result: { case: "append", value: message.result },
      });
    case "error":
      return create(StreamEventsResponseSchema, {
        requestId: message.requestId,
        sessionId: message.sessionId,
        result: { case: "error", value: message.status },
      });
    case "compaction":
      return create(StreamEventsResponseSchema, {
        sessionId: message.sessionId,
        result: { case: "compaction", value: message.result },
      });
  }
}

/** One step through the wrapper; the response printed as proto3 JSON. */
async function call(client: SidecarClient, step: Step): Promise<Json> {
  const json = step.request ?? {};
  switch (step.call) {
    case "CreateSession": {
      const r = fromJson(CreateSessionRequestSchema, json);
      const policy = step.policy_document === undefined ? r.policy : policyFromJson(step.policy_document);
      return printed(SessionSchema, await client.createSession(r.sessionId, { policy, labels: r.labels, model: r.model }));
    }
    case "GetSession": {
      const r = fromJson(GetSessionRequestSchema, json);
      return printed(SessionSchema, await client.getSession(r.sessionId));
    }
    case "AppendEvents": {
      const r = fromJson(AppendEventsRequestSchema, json);
      const response = await client
        .session(r.sessionId)
        .append(r.events, {
          expectedVersion: r.expectedVersion,
          createIfMissing: r.createIfMissing,
          labelUpdates: r.labelUpdates,
          usage: r.usage,
        });
      return printed(AppendEventsResponseSchema, response);
    }
    case "GetContext": {
      const r = fromJson(GetContextRequestSchema, json);
      return printed(GetContextResponseSchema, await client.session(r.sessionId).context({ format: r.format }));
    }
    case "Compact": {
      const r = fromJson(CompactRequestSchema, json);
      const result = await client
        .session(r.sessionId)
        .compact({ policy: r.policy, force: r.force, expectedVersion: r.expectedVersion });
      return printed(CompactResponseSchema, create(CompactResponseSchema, { result }));
    }
    case "ListEvents": {
      // The wrapper pages through the whole log; the scenarios' logs fit one page.
      const r = fromJson(ListEventsRequestSchema, json);
      const events = await collect(client.session(r.sessionId).events({ activeOnly: r.activeOnly, pageSize: r.pageSize }));
      return printed(ListEventsResponseSchema, create(ListEventsResponseSchema, { events }));
    }
    case "SearchEvents": {
      const r = fromJson(SearchEventsRequestSchema, json);
      const hits = await collect(
        client.search(r.query, {
          sessionId: r.sessionId || undefined,
          roles: r.roles,
          includeActive: r.includeActive,
          since: r.since && timestampDate(r.since),
          until: r.until && timestampDate(r.until),
          pageSize: r.pageSize,
        }),
      );
      return printed(SearchEventsResponseSchema, create(SearchEventsResponseSchema, { hits }));
    }
    case "StreamEvents": {
      const requests = (step.requests ?? []).map((j) => fromJson(StreamEventsRequestSchema, j));
      const stream = client.session(requests[0]?.sessionId ?? "").stream();
      for (const r of requests) {
        await stream.send(r.events, {
          requestId: r.requestId,
          sessionId: r.sessionId,
          expectedVersion: r.expectedVersion,
          createIfMissing: r.createIfMissing,
          usage: r.usage,
        });
      }
      stream.close();
      const messages = await collect(stream);
      return messages.map((m) => printed(StreamEventsResponseSchema, streamResponse(m)));
    }
    case "RestoreCompaction": {
      const r = fromJson(RestoreCompactionRequestSchema, json);
      const result = await client.session(r.sessionId).restore(r.compactionId, {
        expectedVersion: r.expectedVersion,
        pauseAutoCompaction: r.pauseAutoCompaction,
      });
      return printed(RestoreCompactionResponseSchema, create(RestoreCompactionResponseSchema, { result }));
    }
    case "ListCompactions": {
      const r = fromJson(ListCompactionsRequestSchema, json);
      if (r.pageSize !== 0 || r.pageToken !== "") {
        // One page, as the request asks: the scenario pins its token.
        const page = await client.unary((o) => client.raw.listCompactions(r, o), true, undefined);
        return printed(ListCompactionsResponseSchema, page);
      }
      const compactions = await collect(client.session(r.sessionId).compactions());
      return printed(ListCompactionsResponseSchema, create(ListCompactionsResponseSchema, { compactions }));
    }
    // No wrapper shortcut needed by the scenarios: the raw stub, through the client's call path.
    case "UpdateSession": {
      const r = fromJson(UpdateSessionRequestSchema, json);
      return printed(SessionSchema, await client.unary((o) => client.raw.updateSession(r, o), false, undefined));
    }
    case "DeleteSession": {
      const r = fromJson(DeleteSessionRequestSchema, json);
      const response = await client.unary((o) => client.raw.deleteSession(r, o), false, undefined);
      return printed(DeleteSessionResponseSchema, response);
    }
    case "ListSessions": {
      const r = fromJson(ListSessionsRequestSchema, json);
      const response = await client.unary((o) => client.raw.listSessions(r, o), true, undefined);
      return printed(ListSessionsResponseSchema, response);
    }
    default:
      throw new Error(`unknown call ${step.call}`);
  }
}

export async function runStep(client: SidecarClient, step: Step): Promise<Outcome> {
  try {
    return { code: "OK", message: "", fieldViolations: [], response: await call(client, step) };
  } catch (reason) {
    if (!(reason instanceof SidecarError)) throw reason;
    return {
      code: reason.codeName,
      message: reason.rawMessage,
      fieldViolations: reason.fieldViolations.map((v) => v.field),
      response: undefined,
    };
  }
}

/** Every mismatch of the scenario; it stops at the first failing step (later ones build on it). */
export async function runScenario(client: SidecarClient, scenario: Scenario): Promise<string[]> {
  const captured = new Map<string, string>();
  for (const [index, written] of scenario.steps.entries()) {
    const step = substitute(written, captured);
    const outcome = await runStep(client, step);
    const problems = check(step.expect ?? {}, outcome);
    if (problems.length === 0 && step.capture !== undefined) {
      const [values, missing] = capture(step.capture, outcome.response);
      for (const [name, value] of values) captured.set(name, value);
      problems.push(...missing);
    }
    if (problems.length > 0) {
      return [
        `${scenario.name} step ${index} (${step.call}):`,
        ...problems.map((p) => `  ${p}`),
        `  expected: ${JSON.stringify(step.expect ?? {})}`,
        `  actual:   code=${outcome.code} message=${JSON.stringify(outcome.message)} response=${JSON.stringify(outcome.response)}`,
      ];
    }
  }
  return [];
}
