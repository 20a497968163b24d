package rebalance_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
	"github.com/shardlimit/shardlimit/rebalance/runstore"
	"github.com/shardlimit/shardlimit/router/clustertest"
	"github.com/shardlimit/shardlimit/shard/etcd"
	"github.com/shardlimit/shardlimit/shard/poll"
)

// A run followed through the Admin API's RebalanceRunStream (what `ctl
// rebalance apply --wait` shows) streams every phase in order, each
// started then ended, with the keys each pair copied, then the final
// record and the router routing by the new version; the record kept in
// etcd holds the same phases.
func TestRunStreamShowsEveryPhaseInOrder(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 3, Rules: testRules(t)})
	j := c.StartRebalance()
	skew(t, c)
	poll.Until(t, 10*time.Second, func() error {
		if !j.Leading() {
			return errors.New("no leader yet")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Admin(0).RebalanceRunStream(ctx, &shardlimitv1.RebalanceRunRequest{Run: &shardlimitv1.RunRequest{Trigger: "test"}, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds, phases []string
	var final *shardlimitv1.RunRecord
	ended := map[string]*shardlimitv1.RunPhase{}
	pairs := map[string]int{}
	for _, ev := range receive(t, s) {
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case runstore.EventPhaseStarted:
			phases = append(phases, ev.Phase.Name)
		case runstore.EventPhaseEnded:
			if phases[len(phases)-1] != ev.Phase.Name {
				t.Errorf("phase %s ended while %s went on", ev.Phase.Name, phases[len(phases)-1])
			}
			ended[ev.Phase.Name] = ev.Phase
		case runstore.EventPairCopied:
			pairs[ev.Phase.Name]++
			if ev.Pair.Keys == 0 && ev.Phase.Name == "copy" {
				t.Errorf("pair %s → %s copied no keys of its %d partitions", ev.Pair.From, ev.Pair.To, ev.Pair.Partitions)
			}
		case runstore.EventFinished:
			final = ev.Run
		case runstore.EventRouted:
			if ev.RoutingVersion < 1 {
				t.Errorf("routed by version %d", ev.RoutingVersion)
			}
		}
	}
	t.Logf("events: %s", strings.Join(kinds, ", "))
	want := []string{"plan", "copy", "copy again", "publish", "settle", "drop"}
	if !slices.Equal(phases, want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	if kinds[0] != runstore.EventAsked || kinds[1] != runstore.EventStarted || kinds[len(kinds)-2] != runstore.EventFinished || kinds[len(kinds)-1] != runstore.EventRouted {
		t.Fatalf("events %v: want asked, started, …, finished, routed", kinds)
	}
	if final == nil || final.Outcome != "moved" || final.MapVersion != 1 || len(final.Phases) != len(want) {
		t.Fatalf("final record %v", final)
	}
	for _, name := range want {
		ph := ended[name]
		if ph == nil || ph.Error != "" || ph.FinishedUnixNs < ph.StartedUnixNs {
			t.Errorf("phase %s ended as %v", name, ph)
		}
	}
	for _, name := range []string{"copy", "copy again"} {
		if pairs[name] == 0 || pairs[name] != len(ended[name].Pairs) {
			t.Errorf("phase %s: %d pair events, %d pairs in the phase", name, pairs[name], len(ended[name].Pairs))
		}
	}
	if ended["copy"].Keys == 0 || ended["copy"].Imported == 0 {
		t.Errorf("the first copy moved no keys: %v", ended["copy"])
	}
	if !strings.Contains(ended["publish"].Detail, "version 1") {
		t.Errorf("publish detail %q", ended["publish"].Detail)
	}

	// Watching the run once it ended replays the same events, asked and
	// routed aside.
	w, err := c.Admin(0).WatchRebalanceRun(ctx, &shardlimitv1.WatchRebalanceRunRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var watched []string
	for _, ev := range receive(t, w) {
		watched = append(watched, ev.Kind)
	}
	if !slices.Equal(watched, kinds[1:len(kinds)-1]) {
		t.Errorf("watching the ended run: %v, want %v", watched, kinds[1:len(kinds)-1])
	}
	if w, err := c.Admin(0).WatchRebalanceRun(ctx, &shardlimitv1.WatchRebalanceRunRequest{StartedUnixNs: 7}); err == nil {
		if _, err := w.Recv(); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "started_unix_ns") {
			t.Errorf("watching a run that is not recorded: %v, want NotFound naming started_unix_ns", err)
		}
	}

	// The record kept in etcd is the final one, phases included.
	runs, err := c.Admin(0).RebalanceRuns(ctx, &shardlimitv1.RebalanceRunsRequest{Limit: 1})
	if err != nil || len(runs.Runs) != 1 || len(runs.Runs[0].Phases) != len(want) || runs.Runs[0].Outcome != "moved" {
		t.Fatalf("runs: %v %v", runs, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if resp, err := cli.Get(ctx, etcd.Layout(c.Prefix).Run(final.StartedUnixNs)); err == nil && len(resp.Kvs) == 1 {
		t.Logf("the run's record was written %d times for %d events over %v", resp.Kvs[0].Version, len(kinds),
			time.Duration(final.FinishedUnixNs-final.StartedUnixNs).Round(time.Millisecond))
	}
}

// receive returns a run's events until the stream ends.
func receive(t *testing.T, s grpc.ServerStreamingClient[shardlimitv1.RebalanceRunEvent]) []*shardlimitv1.RebalanceRunEvent {
	t.Helper()
	var out []*shardlimitv1.RebalanceRunEvent
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
}

// A run that a leader left running (it died mid-run) is marked failed by
// the next leader, naming the phase it was in; the dead leader's progress
// writes no longer land.
func TestNextLeaderMarksAbandonedRun(t *testing.T) {
	c := clustertest.New(t, etcdEndpoint, clustertest.Options{Shards: 1})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	layout := etcd.Layout(c.Prefix)
	rec := &shardlimitv1.RunRecord{StartedUnixNs: time.Now().UnixNano(), Trigger: "test", Leader: "gone-1", Outcome: runstore.Running,
		Phases: []*shardlimitv1.RunPhase{{Name: "plan", StartedUnixNs: 1, FinishedUnixNs: 2}, {Name: "copy", StartedUnixNs: 2}}}
	rev, err := runstore.Update(ctx, cli, layout, rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runstore.Update(ctx, cli, layout, rec, 0); !errors.Is(err, runstore.ErrChanged) {
		t.Fatalf("a second first write: %v, want ErrChanged", err)
	}
	j := c.StartRebalance()
	var got shardlimitv1.RunRecord
	poll.Until(t, 10*time.Second, func() error {
		resp, err := cli.Get(ctx, layout.Run(rec.StartedUnixNs))
		if err != nil || len(resp.Kvs) != 1 {
			return errors.New("no record")
		}
		if err := protojson.Unmarshal(resp.Kvs[0].Value, &got); err != nil {
			return err
		}
		if got.Outcome == runstore.Running {
			return errors.New("still running")
		}
		return nil
	})
	if got.Outcome != "failed" || !strings.Contains(got.Error, "in phase copy") || !strings.Contains(got.Error, "gone-1") || !strings.Contains(got.Error, j.ID()) ||
		got.Phases[1].Error != "abandoned" || got.Phases[1].FinishedUnixNs == 0 || got.FinishedUnixNs == 0 {
		t.Fatalf("abandoned record: %v", &got)
	}
	if _, err := runstore.Update(ctx, cli, layout, rec, rev); !errors.Is(err, runstore.ErrChanged) {
		t.Fatalf("the dead leader's next write: %v, want ErrChanged", err)
	}
}
