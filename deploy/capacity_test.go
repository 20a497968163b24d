package deploy

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The capacity model (CAPACITY.md) sizes the routers for the seed's peak;
// the routers' HorizontalPodAutoscaler must be allowed to reach that
// count, and start from at least two (one router down leaves one).
func TestRouterAutoscalerReachesTheCapacityModel(t *testing.T) {
	doc, err := os.ReadFile("CAPACITY.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`routers at the seed's peak: (\d+)`).FindSubmatch(doc)
	if m == nil {
		t.Fatal(`CAPACITY.md does not say "routers at the seed's peak: N"`)
	}
	peak, _ := strconv.Atoi(string(m[1]))
	for _, dir := range kustomizations(t) {
		r := render(t, dir)
		for _, h := range r.hpas {
			if h.Spec.ScaleTargetRef.Name != "shardlimit-router" {
				continue
			}
			if h.Spec.MaxReplicas < int32(peak) {
				t.Errorf("%s: HorizontalPodAutoscaler %s: maxReplicas %d, under the %d routers CAPACITY.md sizes for the seed's peak", dir, h.Name, h.Spec.MaxReplicas, peak)
			}
			if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
				t.Errorf("%s: HorizontalPodAutoscaler %s: minReplicas under 2", dir, h.Name)
			}
		}
	}
}
