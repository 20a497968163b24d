package client

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	shardlimitv1 "github.com/shardlimit/shardlimit/proto/shardlimit/v1"
)

// A denial that no wait lifts reads "never", in String, %v and both slog
// handlers, never as RetryNever's 2562047h47m16s; its RetryAfter is
// RetryNever whatever "never" the router sent.
func TestNeverReadsNever(t *testing.T) {
	years150 := 150 * 365 * 24 * time.Hour
	for _, c := range []struct {
		name  string
		pb    *shardlimitv1.Decision
		never bool
		want  string
	}{
		{"the limiter's never", &shardlimitv1.Decision{Rule: "checkout", Limit: 10, Window: durationpb.New(time.Minute), RetryAfter: durationpb.New(math.MaxInt64)},
			true, "allowed=false rule=checkout limit=10 window=1m0s retry_after=never"},
		{"past 100 years is never", &shardlimitv1.Decision{Rule: "r", Limit: 1, RetryAfter: durationpb.New(years150)},
			true, "allowed=false rule=r limit=1 retry_after=never"},
		{"a wait", &shardlimitv1.Decision{Rule: "checkout", Limit: 10, Window: durationpb.New(time.Minute), RetryAfter: durationpb.New(6 * time.Second), ResetAfter: durationpb.New(time.Minute)},
			false, "allowed=false rule=checkout limit=10 window=1m0s reset_after=1m0s retry_after=6s"},
		{"allowed", &shardlimitv1.Decision{Allowed: true, Rule: "checkout", Limit: 10, Remaining: 9, NextAfter: durationpb.New(6 * time.Second)},
			false, "allowed=true rule=checkout limit=10 remaining=9 next_after=6s"},
		{"one rule of several never", &shardlimitv1.Decision{Rule: "burst", Limit: 1, RetryAfter: durationpb.New(math.MaxInt64), Quotas: []*shardlimitv1.Quota{
			{Rule: "burst", Limit: 1, RetryAfter: durationpb.New(math.MaxInt64)},
			{Rule: "daily", Limit: 100, Allowed: true, Remaining: 99},
		}}, true, "allowed=false rule=burst limit=1 retry_after=never quotas=[burst=[allowed=false rule=burst limit=1 retry_after=never] daily=[allowed=true rule=daily limit=100 remaining=99]]"},
	} {
		d := fromProto(c.pb)
		if d.NeverAllowed != c.never || (d.RetryAfter == RetryNever) != c.never {
			t.Errorf("%s: NeverAllowed %v RetryAfter %v, want never %v", c.name, d.NeverAllowed, d.RetryAfter, c.never)
		}
		if got := fmt.Sprint(d); got != c.want {
			t.Errorf("%s: %%v\n got %s\nwant %s", c.name, got, c.want)
		}
		var text, js bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("checked", "decision", d)
		slog.New(slog.NewJSONHandler(&js, nil)).Info("checked", "decision", d)
		if strings.Contains(text.String()+js.String(), "2562047h") || strings.Contains(js.String(), "9223372036854775807") {
			t.Errorf("%s: RetryNever in a log:\n%s%s", c.name, text.String(), js.String())
		}
		if c.never && (!strings.Contains(text.String(), "decision.retry_after=never") || !strings.Contains(js.String(), `"retry_after":"never"`)) {
			t.Errorf("%s: no retry_after=never in the logs:\n%s%s", c.name, text.String(), js.String())
		}
	}
	if q := fromProto(&shardlimitv1.Decision{Allowed: true, RetryAfter: durationpb.New(math.MaxInt64)}); q.NeverAllowed {
		t.Error("an allowed decision is NeverAllowed")
	}
}
