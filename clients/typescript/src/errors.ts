/**
 * What a failed call throws: the gRPC status code with the server's google.rpc details.
 *
 * The server names the offending field of bad input (google.rpc.BadRequest),
 * the session's current version on a version mismatch (google.rpc.ErrorInfo)
 * and the limit a request went over (google.rpc.QuotaFailure). A caller should
 * not have to parse a message to learn any of these, so SidecarError carries
 * them as properties, decoded once here for unary calls, streams and the
 * per-request errors of StreamEvents alike.
 */

import { anyIs, anyUnpack } from "@bufbuild/protobuf/wkt";
import { createRegistry, isMessage, type DescMessage, type Message, type Registry } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";

import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
  file_google_rpc_error_details,
} from "./gen/google/rpc/error_details_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";

/** The gRPC canonical name of each status code, by number (Code.InvalidArgument = 3 -> "INVALID_ARGUMENT"). */
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** A gRPC status code name, as the other clients and grpcurl print it. */
export type CodeName = (typeof CODE_NAMES)[number];

/** The name of a numeric status code; UNKNOWN for a number outside the table. */
export function codeName(code: number): CodeName {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

/** Every google.rpc detail type the client knows how to decode. */
export const detailRegistry: Registry = createRegistry(file_google_rpc_error_details);

/** The detail types SidecarError interprets. */
const DETAIL_SCHEMAS: readonly DescMessage[] = [
  BadRequestSchema,
  ErrorInfoSchema,
  QuotaFailureSchema,
  PreconditionFailureSchema,
];

/** One bad field of a request, by its dotted proto path (`events[0].role`). */
export interface FieldViolation {
  readonly field: string;
  readonly description: string;
}

/**
 * A call failed with `code`. `rawMessage` is the server's message;
 * `fieldViolations` come from google.rpc.BadRequest (INVALID_ARGUMENT),
 * `reason` and `currentVersion` from google.rpc.ErrorInfo (FAILED_PRECONDITION
 * on a version mismatch), `limits` from google.rpc.QuotaFailure
 * (RESOURCE_EXHAUSTED) and from google.rpc.PreconditionFailure subjects.
 * `details` holds every decoded detail message, known or not to this class.
 */
export class SidecarError extends Error {
  override readonly name = "SidecarError";
  readonly code: Code;
  readonly rawMessage: string;
  readonly details: readonly Message[];
  readonly fieldViolations: readonly FieldViolation[];
  readonly reason: string;
  readonly currentVersion: bigint | undefined;
  readonly limits: readonly string[];

  constructor(code: Code, rawMessage: string, details: readonly Message[] = [], options?: { cause?: unknown }) {
    super(`${codeName(code)}: ${rawMessage}`, options);
    this.code = code;
    this.rawMessage = rawMessage;
    this.details = details;
    const violations: FieldViolation[] = [];
    const limits: string[] = [];
    let reason = "";
    let currentVersion: bigint | undefined;
    for (const detail of details) {
      if (isMessage(detail, BadRequestSchema)) {
        violations.push(...detail.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
      } else if (isMessage(detail, ErrorInfoSchema)) {
        reason = detail.reason;
        const version = detail.metadata["current_version"];
        if (version !== undefined && /^-?\d+$/.test(version)) {
          currentVersion = BigInt(version);
        }
      } else if (isMessage(detail, QuotaFailureSchema)) {
        limits.push(...detail.violations.map((v) => v.subject));
      } else if (isMessage(detail, PreconditionFailureSchema)) {
        limits.push(...detail.violations.map((v) => v.subject));
      }
    }
    this.fieldViolations = violations;
    this.reason = reason;
    this.currentVersion = currentVersion;
    this.limits = limits;
  }

  /** The status code's canonical name, e.g. "INVALID_ARGUMENT". */
  get codeName(): CodeName {
    return codeName(this.code);
  }

  /** The first offending field, when the server named one. */
  get field(): string | undefined {
    return this.fieldViolations[0]?.field;
  }

  /** The error for anything a Connect call threw (a ConnectError, an abort, a bug). */
  static from(reason: unknown): SidecarError {
    if (reason instanceof SidecarError) {
      return reason;
    }
    const error = ConnectError.from(reason);
    const details: Message[] = [];
    for (const schema of DETAIL_SCHEMAS) {
      details.push(...error.findDetails(schema));
    }
    return new SidecarError(error.code, error.rawMessage, details, { cause: reason });
  }

  /** The error of a google.rpc.Status: a StreamEvents per-request error. */
  static fromStatus(status: Status): SidecarError {
    const details: Message[] = [];
    for (const any of status.details) {
      const known = DETAIL_SCHEMAS.some((schema) => anyIs(any, schema));
      if (!known) continue;
      const message = anyUnpack(any, detailRegistry);
      if (message !== undefined) details.push(message);
    }
    return new SidecarError(status.code as Code, status.message, details);
  }
}
