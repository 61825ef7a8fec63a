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

// WF-8: a child keeps what it inherited while its ancestors are parked: a
// child whose parent's definition is registered after the child moves on
// (a restart that registers only the child), or whose parent is parked
// for good under a new version of its definition, still runs its later
// steps on the inherited queue with the inherited priority and attempts,
// through a chain of parked ancestors too. The child used to read them
// from its ancestors' registered definitions each time, so a parked
// ancestor gave nothing and the step ran on the child's own defaults. It
// records them in its workflow_started now.
func TestWF8_ChildOfParkedParentKeepsInheritedOptions(t *testing.T) {
	for _, how := range []string{"not registered", "new version"} {
		t.Run(how, func(t *testing.T) {
			b := setup(t, nil)
			kid := func(e *api.Engine) {
				wfRegister(t, e, api.NewWorkflow("kid").WaitForSignal("go").Then("work", wfReturn(nil)))
			}
			parents := func(e *api.Engine, v2 bool) {
				mid := api.NewWorkflow("mid").SubWorkflow("sub", "kid")
				par := api.NewWorkflow("parent").SubWorkflow("sub", "kid").OnQueue("etl").WithPriority(api.High).MaxAttempts(7)
				top := api.NewWorkflow("top").SubWorkflow("sub", "mid").OnQueue("etl").WithPriority(api.High).MaxAttempts(7)
				if v2 {
					mid, par, top = mid.Then("v2", wfReturn(nil)), par.Then("v2", wfReturn(nil)), top.Then("v2", wfReturn(nil))
				}
				wfRegister(t, e, mid)
				wfRegister(t, e, par)
				wfRegister(t, e, top)
			}
			kid(b.eng)
			parents(b.eng, false)
			b.start()
			p := wfDispatch(b, "parent", api.State{})
			top := wfDispatch(b, "top", api.State{})
			b.idle()
			children := []string{wfChild(b, p, 0), wfChild(b, wfChild(b, top, 0), 0)}
			b.reopen(func(e *api.Engine) {
				kid(e)
				if how == "new version" {
					parents(e, true)
				}
			})
			b.start()
			for _, id := range children {
				if err := b.eng.Signal(b.ctx, id, "go", nil); err != nil {
					t.Fatal(err)
				}
			}
			b.idle()
			var got []string
			for _, id := range children {
				wfWant(b, id, api.WorkflowCompleted)
				for _, e := range wfSteps(b.records(), id) {
					got = append(got, fmt.Sprintf("%s:%s/%d/%d", e.Handler, e.Queue, e.Priority, e.Retry.MaxAttempts))
				}
			}
			want := fmt.Sprintf("kid/work:etl/%d/7 kid/work:etl/%d/7", api.High, api.High)
			if strings.Join(got, " ") != want {
				t.Fatalf("WF-8: step jobs of children whose parents are parked:\n got %s\nwant %s", strings.Join(got, " "), want)
			}
			b.checkReplay()
		})
	}
}
