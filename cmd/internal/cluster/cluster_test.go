package cluster

import "testing"

func TestDialable(t *testing.T) {
	if got := Dialable("0.0.0.0:2379"); got != "127.0.0.1:2379" {
		t.Errorf("Dialable(0.0.0.0:2379) = %s", got)
	}
	if got := Dialable("10.0.0.5:2379"); got != "10.0.0.5:2379" {
		t.Errorf("Dialable(10.0.0.5:2379) = %s", got)
	}
}
