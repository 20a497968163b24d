package main

import (
	"bytes"
	"strings"
	"testing"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// The events of a run that is cut short in its second copy: text prints a
// line per phase and pair, and where() says the phase, what it had copied
// and what was done before; YAML prints one document per event.
func TestRunPrinter(t *testing.T) {
	const s = int64(1e9)
	events := []*shardlimitv1.RebalanceRunEvent{
		{Kind: "asked", Leader: "10.0.0.1:8083", UnixNs: s},
		{Kind: "started", Run: &shardlimitv1.RunRecord{Leader: "rebalance-1", Trigger: "ctl", StartedUnixNs: s}, UnixNs: s},
		{Kind: "phase_started", Phase: &shardlimitv1.RunPhase{Name: "plan", StartedUnixNs: s}, UnixNs: s},
		{Kind: "phase_ended", Phase: &shardlimitv1.RunPhase{Name: "plan", StartedUnixNs: s, FinishedUnixNs: s + 12e6, Detail: "2 partitions move"}},
		{Kind: "phase_started", Phase: &shardlimitv1.RunPhase{Name: "copy", StartedUnixNs: 2 * s}},
		{Kind: "pair_copied", Phase: &shardlimitv1.RunPhase{Name: "copy"}, Pair: &shardlimitv1.PairCopy{From: "shard-1", To: "shard-2", Partitions: 2, Keys: 40, Imported: 39}},
		{Kind: "phase_ended", Phase: &shardlimitv1.RunPhase{Name: "copy", StartedUnixNs: 2 * s, FinishedUnixNs: 3 * s, Keys: 40, Imported: 39,
			Pairs: []*shardlimitv1.PairCopy{{From: "shard-1", To: "shard-2"}}}},
		{Kind: "phase_started", Phase: &shardlimitv1.RunPhase{Name: "copy again", StartedUnixNs: 4 * s}},
		{Kind: "pair_copied", Phase: &shardlimitv1.RunPhase{Name: "copy again"}, Pair: &shardlimitv1.PairCopy{From: "shard-1", To: "shard-3", Partitions: 1, Keys: 7, Error: "unavailable"}},
	}
	var text bytes.Buffer
	p := &runPrinter{w: &text, format: "text"}
	for _, ev := range events {
		if err := p.print(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		"asked the rebalance leader 10.0.0.1:8083 to run\n",
		"run started by rebalance-1 (trigger ctl)\n",
		"plan started\n",
		"plan ended (12ms): 2 partitions move\n",
		"copy: shard-1 → shard-2, 2 partitions, 40 keys (39 imported)\n",
		"copy ended (1s): 40 keys (39 imported) over 1 old → new owner pair\n",
		"copy again: shard-1 → shard-3, 1 partition, 7 keys (0 imported), failed: unavailable\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	where := p.where()
	for _, want := range []string{"was in phase copy again", "7 keys so far, from the 1 old → new owner pair copied", "done before: plan ended", "copy ended (1s): 40 keys", "ctl rebalance watch --run 1000000000"} {
		if !strings.Contains(where, want) {
			t.Errorf("where: no %q in %q", want, where)
		}
	}

	var yml bytes.Buffer
	p = &runPrinter{w: &yml, format: "yaml"}
	for _, ev := range events[:3] {
		if err := p.print(ev); err != nil {
			t.Fatal(err)
		}
	}
	if docs := strings.Split(yml.String(), "---\n"); len(docs) != 3 || !strings.Contains(docs[2], "kind: phase_started") {
		t.Errorf("yaml: %d documents:\n%s", len(docs), yml.String())
	}
}
