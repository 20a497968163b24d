package cluster

import (
	"errors"
	"testing"
)

func TestDialable(t *testing.T) {
	if got := Dialable("0.0.0.0:2379"); got != "127.0.0.1:2379" {
		t.Errorf("Dialable(0.0.0.0:2379) = %s", got)
	}
	if got := Dialable("10.0.0.5:2379"); got != "10.0.0.5:2379" {
		t.Errorf("Dialable(10.0.0.5:2379) = %s", got)
	}
}

// The not-ready error counts ready components by kind and names the
// first that is not, however many there are.
func TestNotReadyCountsByKind(t *testing.T) {
	procs := []*Proc{{Name: "shard-1", Sub: "shard"}, {Name: "shard-2", Sub: "shard"}, {Name: "shard-3", Sub: "shard"}, {Name: "router", Sub: "router"}}
	down := map[string]bool{"shard-2": true, "shard-3": true}
	ready := func(p *Proc) error {
		if down[p.Name] {
			return errors.New("joining")
		}
		return nil
	}
	err := notReady(procs, ready)
	if want := "1 of 3 shard ready, 1 of 1 router ready; first not ready: shard-2: joining"; err == nil || err.Error() != want {
		t.Errorf("notReady = %v, want %q", err, want)
	}
	down = nil
	if err := notReady(procs, ready); err != nil {
		t.Errorf("all ready: %v", err)
	}
}
