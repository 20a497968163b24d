package shard

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/shard/key"
)

// maxTopKeys bounds StatsRequest.top_keys.
const maxTopKeys = 1000

// Stats implements the shard API: load per partition over the last minute,
// the hottest keys and the store's counts.
func (s *Server) Stats(_ context.Context, req *shardlimitv1.StatsRequest) (*shardlimitv1.StatsResponse, error) {
	if req.TopKeys > maxTopKeys {
		return nil, status.Errorf(codes.InvalidArgument, "top_keys: %d exceeds the maximum of %d", req.TopKeys, maxTopKeys)
	}
	now := time.Now().UnixNano()
	st := s.store.Stats()
	resp := &shardlimitv1.StatsResponse{
		Id:            s.opts.ID,
		PartitionLoad: s.partitionLoad.Snapshot(now),
		Keys:          uint64(st.Keys + st.LogKeys),
		MaxKeys:       uint64(st.MaxKeys),
		Evictions:     st.Evictions,
		Expirations:   st.Expirations,
		MemoryBytes:   uint64(st.EstimatedBytes),
		Decisions:     s.decisions.Load(),
	}
	for _, n := range resp.PartitionLoad {
		resp.Load += n
	}
	resp.Load += s.partitionLoad.Other(now)
	for _, h := range s.hot.Top(int(req.TopKeys)) {
		resp.HotKeys = append(resp.HotKeys, &shardlimitv1.HotKey{
			Service: h.Service, Rule: h.Rule, User: h.User, Count: h.Count, Error: h.Error,
			Sampled: h.Sampled, SamplingError: h.SamplingError,
		})
	}
	return resp, nil
}

// maxEpisodes bounds LimitedRequest.limit.
const maxEpisodes = 10_000

// Limited implements the shard API: the episodes in which users of a
// service were limited, newest first.
func (s *Server) Limited(_ context.Context, req *shardlimitv1.LimitedRequest) (*shardlimitv1.LimitedResponse, error) {
	switch {
	case req.Service == "":
		return nil, status.Error(codes.InvalidArgument, "service: required")
	case len(req.Service) > key.MaxServiceLength:
		return nil, status.Errorf(codes.InvalidArgument, "service: length %d exceeds the maximum of %d bytes", len(req.Service), key.MaxServiceLength)
	case req.Limit > maxEpisodes:
		return nil, status.Errorf(codes.InvalidArgument, "limit: %d exceeds the maximum of %d", req.Limit, maxEpisodes)
	case req.UntilUnixNs != 0 && req.UntilUnixNs < req.SinceUnixNs:
		return nil, status.Error(codes.InvalidArgument, "until_unix_ns: before since_unix_ns")
	}
	limit := int(req.Limit)
	if limit == 0 {
		limit = 100
	}
	until := req.UntilUnixNs
	if until == 0 {
		until = 1<<63 - 1
	}
	resp := &shardlimitv1.LimitedResponse{}
	for _, e := range s.episodes.List(req.Service, req.SinceUnixNs, until, limit) {
		resp.Episodes = append(resp.Episodes, &shardlimitv1.Episode{
			Service: e.Service, Endpoint: e.Endpoint, User: e.User, Rule: e.Rule,
			BeganUnixNs: e.Began, EndedUnixNs: e.Ended, Denied: int64(e.Denied),
		})
	}
	return resp, nil
}

// Reset implements the shard API: it forgets one counter key.
func (s *Server) Reset(_ context.Context, req *shardlimitv1.ResetRequest) (*shardlimitv1.ResetResponse, error) {
	for _, f := range []struct{ name, v string }{{"service", req.Service}, {"rule", req.Rule}, {"user", req.User}} {
		if f.v == "" {
			return nil, status.Errorf(codes.InvalidArgument, "%s: required", f.name)
		}
	}
	existed := s.store.Reset(req.Service, req.Rule, req.User, time.Now().UnixNano())
	return &shardlimitv1.ResetResponse{Existed: existed}, nil
}
