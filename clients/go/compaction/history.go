package compaction

import (
	"context"
	"iter"

	pb "github.com/compaction-sidecar/compaction-sidecar/clients/go/compactionv1"
)

// RestoreOptions qualify a restore; nil means none.
type RestoreOptions struct {
	// ExpectedVersion, when non-zero, fails the restore with
	// ErrFailedPrecondition unless the session is at this version.
	ExpectedVersion int64
	// PauseAutoCompaction keeps the session's trigger from compacting the
	// restored window again until its policy is next set (UpdateSession
	// with the path "policy"); the session shows GetAutoCompactionPaused().
	// A forced Compact still runs.
	PauseAutoCompaction bool
}

// Restore undoes the session's newest compaction still standing
// (compactionID "": that one): what it archived is active again in place,
// what it cleared uncleared, the summary turn it inserted archived; nothing
// is deleted. The result has Strategy "restore", its own CompactionId, the
// window after it (ActiveEvents) and RestoredEventIds.
//
// Naming an older compaction fails with ErrFailedPrecondition naming the
// one to restore first (in the message, and as the subject of
// Preconditions); an unknown one with ErrNotFound. Not retried: a lost
// answer may hide a restore that landed.
func (s *Session) Restore(ctx context.Context, compactionID string, opts *RestoreOptions) (*pb.CompactionResult, error) {
	req := &pb.RestoreCompactionRequest{SessionId: s.ID, CompactionId: compactionID}
	if opts != nil {
		req.ExpectedVersion = opts.ExpectedVersion
		req.PauseAutoCompaction = opts.PauseAutoCompaction
	}
	c := s.client
	resp, err := unary(ctx, c, false, func(ctx context.Context) (*pb.RestoreCompactionResponse, error) {
		return c.stub.RestoreCompaction(ctx, req)
	})
	return resp.GetResult(), err
}

// CompactionsOptions qualify a listing of the history; nil means none.
type CompactionsOptions struct {
	// PageSize is how many compactions each page fetched holds (0: the
	// server's default, 100).
	PageSize int32
}

// Compactions yields the session's compaction history, newest first, page
// after page: each with its Cause, what it archived (a summary turn stands
// for its ArchivedEventIds), cleared and inserted, and RestoredBy /
// Restores once a restore undid it.
func (s *Session) Compactions(ctx context.Context, opts *CompactionsOptions) iter.Seq2[*pb.Compaction, error] {
	c := s.client
	return paged(func(token string) ([]*pb.Compaction, string, error) {
		req := &pb.ListCompactionsRequest{SessionId: s.ID, PageToken: token}
		if opts != nil {
			req.PageSize = opts.PageSize
		}
		page, err := unary(ctx, c, true, func(ctx context.Context) (*pb.ListCompactionsResponse, error) {
			return c.stub.ListCompactions(ctx, req)
		})
		if err != nil {
			return nil, "", err
		}
		for _, record := range page.GetCompactions() {
			if record.GetArchivedEventIdsOmitted() || record.GetClearedEventIdsOmitted() || record.GetInsertedEventIdsOmitted() {
				if err := s.fillIds(ctx, record); err != nil {
					return nil, "", err
				}
			}
		}
		return page.GetCompactions(), page.GetNextPageToken(), nil
	})
}

// fillIds puts record's id lists back whole when the server left them out (too
// many ids for one page), reading them page by page with ListCompactions ids_of.
func (s *Session) fillIds(ctx context.Context, record *pb.Compaction) error {
	c := s.client
	req := &pb.ListCompactionsRequest{SessionId: s.ID, IdsOf: record.GetCompactionId()}
	record.ArchivedEventIds, record.ClearedEventIds, record.InsertedEventIds = nil, nil, nil
	for {
		page, err := unary(ctx, c, true, func(ctx context.Context) (*pb.ListCompactionsResponse, error) {
			return c.stub.ListCompactions(ctx, req)
		})
		if err != nil {
			return err
		}
		for _, part := range page.GetCompactions() {
			record.ArchivedEventIds = append(record.ArchivedEventIds, part.GetArchivedEventIds()...)
			record.ClearedEventIds = append(record.ClearedEventIds, part.GetClearedEventIds()...)
			record.InsertedEventIds = append(record.InsertedEventIds, part.GetInsertedEventIds()...)
		}
		if page.GetNextPageToken() == "" {
			break
		}
		req.PageToken = page.GetNextPageToken()
	}
	record.ArchivedEventIdsOmitted, record.ClearedEventIdsOmitted, record.InsertedEventIdsOmitted = false, false, false
	return nil
}
