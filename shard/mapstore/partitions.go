package mapstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// ErrPartitions means a component was given a partition count other than
// the one its cluster's shard map record holds.
var ErrPartitions = errors.New("partitions: not the count stored in the shard map record")

// maxPartitions bounds a stored count, as shardmap.Config.Validate does.
const maxPartitions = 1 << 16

// Partitions returns the cluster's partition count: the one its shard map
// record (layout.ShardMap()) holds. Every router, shard and rebalance
// instance calls it before it serves, so they all use that count.
//
// On an etcd without a record it creates one, in a transaction that writes
// only if there is still none: version 0, pinning nothing (the ring alone
// decides, as with no map; the first map published is version 1), for want
// partitions, or
// shardmap.DefaultPartitions when want is 0, written by by on this host
// (a pod's name). When another
// component created it first, that record's count is the cluster's.
//
// want 0 takes the stored count. Any other want must equal it: otherwise
// Partitions returns an error wrapping ErrPartitions that names the field,
// both counts and how to proceed, and writes nothing. A stored count is
// never overwritten here; the rebalance job keeps it in every version it
// publishes.
//
// While etcd cannot be read, or the record cannot be created (a role
// without the record's key waits for a component that may), it logs once
// that it waits, then retries until ctx ends.
func Partitions(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, want int, by string, log *slog.Logger) (int, error) {
	if want < 0 || want > maxPartitions {
		return 0, fmt.Errorf("partitions: %d not in 1..%d (0: the count stored in etcd)", want, maxPartitions)
	}
	var b etcd.Backoff
	waiting := false
	for {
		n, err := partitionsOnce(ctx, cli, layout, want, by)
		if err == nil || errors.Is(err, ErrPartitions) || errors.Is(err, ErrUnreadable) {
			if err == nil && waiting {
				log.Info("read the partition count from etcd's shard map record", "partitions", n, "key", layout.ShardMap())
			}
			return n, err
		}
		if !waiting {
			log.Warn("waiting for etcd: the partition count is read from (or written once into) the shard map record there; not serving until then",
				"key", layout.ShardMap(), "err", err)
			waiting = true
		}
		if !b.Wait(ctx) {
			return 0, fmt.Errorf("reading the partition count from etcd's shard map record %s: %w (last: %v)", layout.ShardMap(), ctx.Err(), err)
		}
	}
}

// partitionsOnce is one attempt of Partitions: read the record, or create
// it and read it again if another component created it meanwhile.
func partitionsOnce(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, want int, by string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		m, _, err := Load(ctx, cli, layout)
		if err != nil {
			return 0, err
		}
		if m != nil {
			return stored(layout, m, want)
		}
		n := want
		if n == 0 {
			n = shardmap.DefaultPartitions
		}
		host, _ := os.Hostname()
		first := &shardmap.Map{Partitions: n, Owners: make([]string, n), WrittenBy: by + " on " + host,
			Reason: fmt.Sprintf("partition count %d, fixed by the cluster's first component", n)}
		switch err := create(ctx, cli, layout, first); {
		case err == nil:
			return n, nil
		case !errors.Is(err, ErrConflict):
			return 0, err
		}
		// Another component created it first: read its count.
	}
}

// stored checks the record m's count against want.
func stored(layout etcd.Layout, m *shardmap.Map, want int) (int, error) {
	if m.Partitions < 1 || m.Partitions > maxPartitions {
		return 0, fmt.Errorf("%w: %s (version %d) holds partitions %d, not in 1..%d", ErrUnreadable, layout.ShardMap(), m.Version, m.Partitions, maxPartitions)
	}
	if want != 0 && want != m.Partitions {
		return 0, fmt.Errorf("%w: --partitions is %d, but the shard map record %s holds %d (version %d, written by %s at %s); "+
			"a cluster's partition count is fixed when it first starts: set --partitions to %d or leave it unset, "+
			"or start a new cluster (an empty etcd or another --prefix) for %d",
			ErrPartitions, want, layout.ShardMap(), m.Partitions, m.Version, m.WrittenBy, m.WrittenAt.Format(time.RFC3339), m.Partitions, want)
	}
	return m.Partitions, nil
}

// create writes m as the first record, version 0, only if there is none:
// the record itself, without a history version (it pins nothing, and is
// not a publication), so that a router or a shard needs no more than the
// record's one key (etcd.Layout.Writes).
func create(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, m *shardmap.Map) error {
	m.Version, m.WrittenAt = 0, time.Now().UTC()
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(layout.ShardMap()), "=", 0)).
		Then(clientv3.OpPut(layout.ShardMap(), string(b))).Commit()
	if err != nil {
		return fmt.Errorf("create the shard map record: %w", err)
	}
	if !resp.Succeeded {
		return ErrConflict
	}
	return nil
}
