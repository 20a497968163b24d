package member

import (
	"reflect"
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary stored records to Decode: it never panics,
// and what it accepts is valid, keyed by its own id, and survives a round
// trip through Encode unchanged.
func FuzzDecode(f *testing.F) {
	good, err := Encode(Member{ID: "s1", Addr: "127.0.0.1:7000", Zone: "a", Version: "v1", Started: time.Unix(1, 0).UTC(), Ready: time.Unix(2, 0).UTC()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("s1", good)
	f.Add("s2", good)
	f.Add("s1", []byte(`{"id":"s1","addr":""}`))
	f.Add("s1", []byte(`{"id":"s1","addr":"127.0.0.1:1","started":"9999-12-31T23:59:59Z"}`))
	f.Add("", []byte(`null`))
	f.Fuzz(func(t *testing.T, id string, b []byte) {
		m, err := Decode(id, b)
		if err != nil {
			return
		}
		if m.ID != id {
			t.Fatalf("Decode(%q) accepted a record named %q", id, m.ID)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid record: %v", err)
		}
		enc, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode of a decoded record: %v", err)
		}
		again, err := Decode(id, enc)
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip changed the record: %+v, then %+v (%v)", m, again, err)
		}
	})
}
