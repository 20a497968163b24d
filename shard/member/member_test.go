package member

import (
	"strings"
	"testing"
	"time"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	m := Member{ID: "shard-1", Addr: "10.0.0.1:8080", Zone: "a", Version: "v1", Started: time.Unix(1, 0).UTC(), Ready: time.Unix(2, 0).UTC(), State: Draining}
	b, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode("shard-1", b)
	if err != nil || got != m {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, m)
	}
}

func TestDecodeRejectsMalformedRecords(t *testing.T) {
	for _, tc := range []struct{ id, value, want string }{
		{"a", `{`, "unexpected end"},
		{"a", `{"addr":"x:1"}`, "member id: must not be empty"},
		{"a", `{"id":"a"}`, "member addr: must not be empty"},
		{"a", `{"id":"a b","addr":"x:1"}`, "must not contain"},
		{"a", `{"id":"b","addr":"x:1"}`, `record names id "b"`},
		{"a", `{"id":"a","addr":"x:1","started":"yesterday"}`, "cannot parse"},
		{"a", `{"id":"a","addr":"x:1","state":"gone"}`, `member state "gone": not one of joining, serving, draining`},
	} {
		if _, err := Decode(tc.id, []byte(tc.value)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q, %s) = %v, want an error containing %q", tc.id, tc.value, err, tc.want)
		}
	}
	if _, err := Encode(Member{ID: "a"}); err == nil {
		t.Error("Encode wrote a record without an address")
	}
}
