package membership

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/member"
)

// Watch follows the members under layout and calls onChange with the full
// list, sorted by ID, first once listed and then after every change, until
// ctx ends. While etcd is unreachable it keeps the last list and retries;
// it never calls onChange with a list it did not read. A malformed record
// is logged and left out, by every reader alike (member.Decode).
func Watch(ctx context.Context, cli *clientv3.Client, layout etcd.Layout, log *slog.Logger, onChange func([]member.Member)) {
	l := &list{layout: layout, log: log, onChange: onChange}
	etcd.Follow(ctx, cli, etcd.Target{Name: "members", Key: layout.Members(), Prefix: true}, log, l)
}

// Read lists the members under layout once; malformed records are left
// out and returned as errors beside the list.
func Read(ctx context.Context, cli *clientv3.Client, layout etcd.Layout) ([]member.Member, []error, error) {
	resp, err := cli.Get(ctx, layout.Members(), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, err
	}
	l := &list{layout: layout, members: make(map[string]member.Member, len(resp.Kvs))}
	var bad []error
	for _, kv := range resp.Kvs {
		if err := l.add(kv); err != nil {
			bad = append(bad, err)
		}
	}
	return l.sorted(), bad, nil
}

// list is the member list Watch keeps.
type list struct {
	layout   etcd.Layout
	log      *slog.Logger
	onChange func([]member.Member)
	members  map[string]member.Member
}

func (l *list) Reset(kvs []*mvccpb.KeyValue, _ int64) {
	l.members = make(map[string]member.Member, len(kvs))
	for _, kv := range kvs {
		l.addOrLog(kv)
	}
	l.onChange(l.sorted())
}

func (l *list) Apply(events []*clientv3.Event, _ int64) {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE {
			delete(l.members, l.layout.MemberID(string(ev.Kv.Key)))
			continue
		}
		l.addOrLog(ev.Kv)
	}
	l.onChange(l.sorted())
}

// add decodes a record into the list; a malformed one is left out (and
// replaces nothing: the member is dropped).
func (l *list) add(kv *mvccpb.KeyValue) error {
	id := l.layout.MemberID(string(kv.Key))
	m, err := member.Decode(id, kv.Value)
	if err != nil {
		delete(l.members, id)
		return err
	}
	l.members[id] = m
	return nil
}

func (l *list) addOrLog(kv *mvccpb.KeyValue) {
	if err := l.add(kv); err != nil {
		l.log.Warn("ignoring malformed member record", "key", string(kv.Key), "err", err)
	}
}

func (l *list) sorted() []member.Member {
	out := make([]member.Member, 0, len(l.members))
	for _, m := range l.members {
		out = append(out, m)
	}
	slices.SortFunc(out, byID)
	return out
}

func byID(a, b member.Member) int { return strings.Compare(a.ID, b.ID) }
