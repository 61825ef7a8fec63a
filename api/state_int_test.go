package api_test

import (
	"context"
	"math"
	"testing"

	"github.com/quire-dev/quire/api"
)

// State.Int reads back every integer a step was given, whatever type
// msgpack decoded it as (int8 for 3, uint8 for 200, uint32 for 70000,
// ...), after the state went through the journal.
func TestStateIntReadsIntegersOfEveryDecodedType(t *testing.T) {
	b := setup(t, nil)
	want := map[string]int64{"small": 3, "neg": -3, "mid": 200, "big": 70000, "bigneg": -70000,
		"huge": 1 << 40, "max": math.MaxInt64, "min": math.MinInt64}
	in := api.State{"text": "x", "ratio": 0.5, "toobig": uint64(math.MaxUint64)}
	for k, v := range want {
		in[k] = v
	}
	got := map[string]int64{}
	var rejected []string
	wfRegister(t, b.eng, api.NewWorkflow("nums").Then("read", func(ctx context.Context, d *api.Delivery, st api.State) (api.State, error) {
		for k := range st {
			if n, ok := st.Int(k); ok {
				got[k] = n
			} else {
				rejected = append(rejected, k)
			}
		}
		return nil, nil
	}))
	wfDispatch(b, "nums", in)
	b.start()
	b.idle()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("Int(%q) = %d, %v; want %d", k, g, ok, v)
		}
	}
	if len(rejected) != 3 {
		t.Errorf("rejected %v, want text, ratio and toobig", rejected)
	}
	if n, ok := (api.State{}).Int("absent"); ok || n != 0 {
		t.Errorf("Int of an absent key = %d, %v", n, ok)
	}
}
