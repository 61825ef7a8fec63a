package scheduler

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/quire-dev/quire/replay"
)

// WF-4: the branch outputs of a Parallel step merge in journal order, the
// later one winning a collision and private keys left out. mergeBranches
// decodes each output once into one map; it must give the very bytes that
// merging them one by one (MergeState) gives, empty and missing outputs
// included, since those bytes go into step_completed.
func TestWF4_MergeBranchesEqualsMergingOneByOne(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		keys := []string{"a", "b", "c", "_p", "_q"}
		vals := rapid.OneOf(
			rapid.Just[any](nil), rapid.Map(rapid.Int64(), func(v int64) any { return v }),
			rapid.Map(rapid.StringN(0, 4, 8), func(v string) any { return v }),
			rapid.Map(rapid.SliceOfN(rapid.Int64Range(-3, 3), 0, 3), func(v []int64) any {
				out := make([]any, len(v))
				for i, x := range v {
					out[i] = x
				}
				return out
			}),
		)
		w := &replay.Workflow{}
		for i := range rapid.IntRange(2, 6).Draw(t, "branches") {
			var out []byte
			if !rapid.Bool().Draw(t, "empty") {
				m := rapid.MapOfN(rapid.SampledFrom(keys), vals, 0, len(keys)).Draw(t, "output")
				var err error
				if out, err = replay.EncodeState(m); err != nil {
					t.Fatal(err)
				}
			}
			w.Branches = append(w.Branches, replay.BranchOutput{Branch: int32(i), Output: out})
		}
		got, err := mergeBranches(w)
		if err != nil {
			t.Fatal(err)
		}
		want, err := mergeBranchesOneByOne(w)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("merged %x, one by one %x", got, want)
		}
	})
}
