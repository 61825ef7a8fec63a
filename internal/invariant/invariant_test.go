package invariant_test

import (
	"errors"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/quire-dev/quire/internal/invariant"
)

func TestCheckTruePasses(t *testing.T) {
	t.Parallel()
	invariant.Check(true, "never reported")
}

func TestCheckFalsePanicsWithMessage(t *testing.T) {
	t.Parallel()
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok {
			t.Fatalf("panic value %v (%T), want an error", r, r)
		}
		var v invariant.Violation
		if !errors.As(err, &v) || string(v) != "seq not consecutive" {
			t.Fatalf("panic value %#v, want Violation(\"seq not consecutive\")", r)
		}
		if !strings.Contains(err.Error(), "invariant violated: seq not consecutive") {
			t.Fatalf("message %q does not name the invariant", err.Error())
		}
	}()
	invariant.Check(false, "seq not consecutive")
}

// TestEnabledFollowsBuildTag checks Enabled against the tags the test binary
// was built with; run it with and without -tags invariants.
func TestEnabledFollowsBuildTag(t *testing.T) {
	t.Parallel()
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build info")
	}
	tagged := false
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tagged = slices.Contains(strings.Split(s.Value, ","), "invariants")
		}
	}
	if invariant.Enabled != tagged {
		t.Fatalf("Enabled = %v, but the invariants tag is set: %v", invariant.Enabled, tagged)
	}
}
