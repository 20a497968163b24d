package mapstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/etcd/embedded"
	"github.com/shardlimit/shardlimit/shard/etcd/etcdtest"
	"github.com/shardlimit/shardlimit/shard/shardmap"
)

// hangGuard bounds the waits of these tests; only a hang reaches it.
const hangGuard = 30 * time.Second

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// raw returns the stored record's bytes and mod revision.
func raw(t *testing.T, cli *clientv3.Client, l etcd.Layout) (string, int64) {
	t.Helper()
	resp, err := cli.Get(context.Background(), l.ShardMap())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read the record: %v, %d keys", err, len(resp.Kvs))
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
}

// The first component to start on an empty prefix creates the record with
// its count (or the default); every later one takes that count; one given
// another count is refused, naming the field and both counts, and nothing
// stored changes.
func TestPartitionsFirstWriterWins(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		first int // the first component's count (0: none given)
		want  int // the cluster's
	}{
		{"given", 64, 64},
		{"default", 0, shardmap.DefaultPartitions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := etcd.Layout("/" + tc.name + "/")
			n, err := Partitions(ctx, cli, l, tc.first, "shard s1", quiet())
			if err != nil || n != tc.want {
				t.Fatalf("first: %d, %v; want %d", n, err, tc.want)
			}
			m, _, err := Load(ctx, cli, l)
			if err != nil || m.Version != 0 || m.Partitions != tc.want || len(m.Owners) != tc.want || m.Pinned() != 0 || !strings.HasPrefix(m.WrittenBy, "shard s1 on ") {
				t.Fatalf("the record: %+v, %v", m, err)
			}
			if err := m.Validate(tc.want); err != nil {
				t.Fatalf("the record does not validate: %v", err)
			}
			before, rev := raw(t, cli, l)
			for _, later := range []int{0, tc.want} {
				if n, err := Partitions(ctx, cli, l, later, "router r1", quiet()); err != nil || n != tc.want {
					t.Errorf("later, given %d: %d, %v; want %d", later, n, err, tc.want)
				}
			}
			other := tc.want * 2
			_, err = Partitions(ctx, cli, l, other, "rebalance rb1", quiet())
			if !errors.Is(err, ErrPartitions) {
				t.Fatalf("given %d against %d: %v, want ErrPartitions", other, tc.want, err)
			}
			for _, s := range []string{"partitions:", "--partitions is " + fmt.Sprint(other), fmt.Sprintf("holds %d", tc.want), "shard s1", l.ShardMap()} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the refusal does not say %q: %v", s, err)
				}
			}
			if after, arev := raw(t, cli, l); after != before || arev != rev {
				t.Errorf("the refusal changed the record: %s (revision %d), was %s (revision %d)", after, arev, before, rev)
			}
		})
	}
}

// Components starting at once with different counts on an empty prefix:
// exactly one creates the record, and every other either takes its count
// or is refused; none is told another count.
func TestPartitionsRace(t *testing.T) {
	cli := etcdtest.Start(t)
	l := etcd.Layout("/race/")
	wants := []int{0, 0, 16, 32, 0, 16}
	got := make([]int, len(wants))
	errs := make([]error, len(wants))
	var wg sync.WaitGroup
	for i, want := range wants {
		wg.Go(func() { got[i], errs[i] = Partitions(context.Background(), cli, l, want, fmt.Sprint("c", i), quiet()) })
	}
	wg.Wait()
	m, _, err := Load(context.Background(), cli, l)
	if err != nil || m == nil || m.Version != 0 {
		t.Fatalf("the record: %+v, %v", m, err)
	}
	for i, want := range wants {
		switch {
		case errs[i] == nil && got[i] != m.Partitions:
			t.Errorf("component %d (given %d) uses %d, the record holds %d", i, want, got[i], m.Partitions)
		case errs[i] != nil && (want == 0 || want == m.Partitions || !errors.Is(errs[i], ErrPartitions)):
			t.Errorf("component %d (given %d) refused with %v; the record holds %d", i, want, errs[i], m.Partitions)
		}
	}
}

// A map the rebalance job published keeps its count: components take it,
// and nothing is written.
func TestPartitionsOfAPublishedMap(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	l := etcd.Layout("/published/")
	m := &shardmap.Map{Partitions: 8, Owners: []string{"a", "", "", "b", "", "", "", ""}, WrittenBy: "rb"}
	if err := Publish(ctx, cli, l, m, nil, 0); err != nil {
		t.Fatal(err)
	}
	before, rev := raw(t, cli, l)
	if n, err := Partitions(ctx, cli, l, 0, "router", quiet()); err != nil || n != 8 {
		t.Fatalf("got %d, %v; want 8", n, err)
	}
	if after, arev := raw(t, cli, l); after != before || arev != rev {
		t.Errorf("reading the count wrote the record")
	}
}

// An unreadable record fails at once (an operator must look at it); it is
// not waited on or replaced.
func TestPartitionsUnreadable(t *testing.T) {
	cli := etcdtest.Start(t)
	ctx := context.Background()
	for name, value := range map[string]string{
		"json":  `{"version":`,
		"count": `{"version":1,"partitions":0,"owners":[]}`,
	} {
		l := etcd.Layout("/" + name + "/")
		if _, err := cli.Put(ctx, l.ShardMap(), value); err != nil {
			t.Fatal(err)
		}
		if _, err := Partitions(ctx, cli, l, 0, "router", quiet()); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: %v, want ErrUnreadable", name, err)
		}
		if before, _ := raw(t, cli, l); before != value {
			t.Errorf("%s: the record was replaced: %s", name, before)
		}
	}
	if _, err := Partitions(ctx, cli, etcd.Layout("/bounds/"), 1<<17, "router", quiet()); err == nil || !strings.Contains(err.Error(), "partitions:") {
		t.Errorf("a count out of bounds: %v", err)
	}
}

// lineWriter signals when a line holding want is written.
type lineWriter struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// While etcd is away, Partitions says once that it waits and keeps trying;
// once etcd is back it returns the count. A context that ends stops it
// with an error that names the record.
func TestPartitionsWaitsForEtcd(t *testing.T) {
	dir := t.TempDir()
	e, err := embedded.Start(dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := e.Endpoint()
	e.Close()
	cli, err := etcd.Dial([]string{addr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l := etcd.Layout("/away/")

	// Cancelled while etcd is away.
	ctx, cancel := context.WithCancel(context.Background())
	w := &lineWriter{want: "waiting for etcd", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Partitions(ctx, cli, l, 0, "shard s1", slog.New(slog.NewTextHandler(w, nil)))
		done <- err
	}()
	waitFor(t, w.seen, "the waiting line")
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), l.ShardMap()) {
			t.Errorf("cancelled: %v, want an error naming %s", err, l.ShardMap())
		}
	case <-time.After(hangGuard):
		t.Fatal("Partitions did not return once its context ended")
	}

	// etcd comes back: the wait ends with the count.
	w = &lineWriter{want: "waiting for etcd", seen: make(chan struct{})}
	got := make(chan int, 1)
	go func() {
		n, err := Partitions(context.Background(), cli, l, 32, "shard s1", slog.New(slog.NewTextHandler(w, nil)))
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	waitFor(t, w.seen, "the waiting line")
	if e, err = embedded.Start(dir, addr); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case n := <-got:
		if n != 32 {
			t.Errorf("got %d, want 32", n)
		}
	case <-time.After(hangGuard):
		t.Fatal("Partitions did not return once etcd was back")
	}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("no %s within %v", what, hangGuard)
	}
}
