// Package compaction is the Go client of the compaction sidecar: a thin,
// idiomatic layer over the generated gRPC stubs in package compactionv1.
//
// It hands back the generated messages (compactionv1.Event, Session,
// CompactionResult, ...) and adds what every caller would otherwise write
// by hand:
//
//   - Dial / New with a bearer token, TLS and a default per-call deadline;
//   - a Session handle for one session's log: Append, Stream, Context,
//     Compact, Restore, Watch, Events, Compactions, Search;
//   - retries of the calls that are safe to repeat (reads and appends) on
//     codes.Unavailable, with jittered exponential backoff, inside the
//     call's deadline;
//   - errors (*Error) that keep the gRPC status and decode the server's
//     google.rpc details: the offending field (BadRequest), the session's
//     current version (ErrorInfo) and the limit hit (QuotaFailure).
//
// Deadlines and cancellation come from the context.Context of each call.
// A context without a deadline gets the client's default timeout (30s
// unless WithTimeout says otherwise) for unary calls, retries included;
// streams and watches live as long as their context.
package compaction
