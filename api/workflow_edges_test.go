package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quire-dev/quire/api"
)

// WF-8: a child inherits its parent's queue, priority and max attempts
// for every step it runs, not only while the parent is in the engine's
// state. Children are not cancelled with their parent (WF-17), so a child
// goes on after its parent is cancelled: its later step jobs stay on the
// inherited queue, with the inherited priority and attempts, also after a
// restart (the parent is then read back from the terminal index), and up
// a chain of cancelled ancestors.
func TestWF8_WF17_ChildOfCancelledParentKeepsInheritedOptions(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			b := setup(t, nil)
			register := func(e *api.Engine) {
				wfRegister(t, e, api.NewWorkflow("kid").WaitForSignal("go").Then("work", wfReturn(api.State{"k": 1})))
				wfRegister(t, e, api.NewWorkflow("mid").SubWorkflow("sub", "kid"))
				wfRegister(t, e, api.NewWorkflow("top").SubWorkflow("sub", "mid").
					OnQueue("etl").WithPriority(api.High).MaxAttempts(7))
				wfRegister(t, e, api.NewWorkflow("parent").SubWorkflow("sub", "kid").
					OnQueue("etl").WithPriority(api.High).MaxAttempts(7))
			}
			register(b.eng)
			b.start()
			p := wfDispatch(b, "parent", api.State{})
			top := wfDispatch(b, "top", api.State{})
			b.idle()
			kid := wfChild(b, p, 0)
			mid := wfChild(b, top, 0)
			grandkid := wfChild(b, mid, 0)
			for _, id := range []string{p, mid, top} {
				if err := b.eng.CancelWorkflow(b.ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if restart {
				b.reopen(register)
				b.start()
			}
			for _, id := range []string{kid, grandkid} {
				if err := b.eng.Signal(b.ctx, id, "go", nil); err != nil {
					t.Fatal(err)
				}
			}
			b.idle()
			recs := b.records()
			var got []string
			for _, id := range []string{kid, grandkid} {
				wfWant(b, id, api.WorkflowCompleted)
				for _, e := range wfSteps(recs, id) {
					got = append(got, fmt.Sprintf("%s:%s/%d/%d", e.Handler, e.Queue, e.Priority, e.Retry.MaxAttempts))
				}
			}
			want := fmt.Sprintf("kid/work:etl/%d/7 kid/work:etl/%d/7", api.High, api.High)
			if strings.Join(got, " ") != want {
				t.Fatalf("WF-8: step jobs of children whose parents were cancelled:\n got %s\nwant %s", strings.Join(got, " "), want)
			}
			wfWant(b, p, api.WorkflowCancelled)
			b.checkReplay()
		})
	}
}
