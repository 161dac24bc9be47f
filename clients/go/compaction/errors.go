package compaction

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is what a failed call returns: the gRPC status code and message,
// with the google.rpc details the server attached decoded into fields, so
// that no caller has to parse a message.
//
// It implements GRPCStatus, so status.FromError and status.Code work on it
// (and on errors wrapping it), and Is, so errors.Is(err, ErrNotFound)
// matches on the code; a DeadlineExceeded or Canceled error also matches
// context.DeadlineExceeded or context.Canceled.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Message is the status message.
	Message string
	// FieldViolations names the offending fields of bad input, by dotted
	// path such as "events[0].role" (google.rpc.BadRequest, InvalidArgument).
	FieldViolations []FieldViolation
	// Reason is google.rpc.ErrorInfo's reason, e.g. "VERSION_MISMATCH".
	Reason string
	// CurrentVersion is the session's version after a version mismatch
	// (FailedPrecondition with ErrorInfo); 0 when the server sent none.
	CurrentVersion int64
	// Limits names the limits a request went over (google.rpc.QuotaFailure,
	// ResourceExhausted).
	Limits []string
	// Preconditions describes failed preconditions other than the version,
	// e.g. a summarizing policy on a server without a summarizer
	// (google.rpc.PreconditionFailure).
	Preconditions []*errdetails.PreconditionFailure_Violation

	status *status.Status
}

// FieldViolation is one bad field of a request.
type FieldViolation struct {
	Field       string
	Description string
}

// Sentinels for errors.Is: they match any *Error with the same code.
var (
	ErrInvalidArgument    = &Error{Code: codes.InvalidArgument, Message: "invalid argument"}
	ErrNotFound           = &Error{Code: codes.NotFound, Message: "not found"}
	ErrAlreadyExists      = &Error{Code: codes.AlreadyExists, Message: "already exists"}
	ErrFailedPrecondition = &Error{Code: codes.FailedPrecondition, Message: "failed precondition"}
	ErrResourceExhausted  = &Error{Code: codes.ResourceExhausted, Message: "resource exhausted"}
	ErrUnauthenticated    = &Error{Code: codes.Unauthenticated, Message: "unauthenticated"}
	ErrUnavailable        = &Error{Code: codes.Unavailable, Message: "unavailable"}
	ErrDeadlineExceeded   = &Error{Code: codes.DeadlineExceeded, Message: "deadline exceeded"}
)

func (e *Error) Error() string {
	return "compaction: " + e.Code.String() + ": " + e.Message
}

// Field is the first offending field, or "" when the server named none.
func (e *Error) Field() string {
	if len(e.FieldViolations) == 0 {
		return ""
	}
	return e.FieldViolations[0].Field
}

// GRPCStatus is the status as received, details included.
func (e *Error) GRPCStatus() *status.Status {
	if e.status == nil {
		return status.New(e.Code, e.Message)
	}
	return e.status
}

// Is matches a sentinel of the same code, and the context errors for
// DeadlineExceeded and Canceled.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	}
	var t *Error
	if errors.As(target, &t) && t.status == nil {
		return t.Code == e.Code
	}
	return false
}

// toError turns a failed call's error into *Error; nil stays nil. An error
// that carries no gRPC status (a context error before the call started)
// becomes Canceled or DeadlineExceeded through status.FromContextError.
func toError(err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	return fromStatus(st)
}

// StatusError decodes a google.rpc.Status, such as the per-request error of
// a StreamEvents response.
func StatusError(s *spb.Status) *Error {
	return fromStatus(status.FromProto(s))
}

func fromStatus(st *status.Status) *Error {
	e := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{v.GetField(), v.GetDescription()})
			}
		case *errdetails.ErrorInfo:
			e.Reason = d.GetReason()
			if v, err := strconv.ParseInt(d.GetMetadata()["current_version"], 10, 64); err == nil {
				e.CurrentVersion = v
			}
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				e.Limits = append(e.Limits, v.GetSubject())
			}
		case *errdetails.PreconditionFailure:
			e.Preconditions = append(e.Preconditions, d.GetViolations()...)
		}
	}
	return e
}
