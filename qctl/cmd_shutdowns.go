package qctl

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/quire-dev/quire/journal"
	"github.com/quire-dev/quire/journal/record"
)

type shutdownsCmd struct{}

func (c *shutdownsCmd) Help() string {
	return `Lists every run of the engine (run_started) with its shutdown: trigger, completion,
whether it was forced, elapsed time against the budget, the phases with their graceful
and forced outcomes and durations, the report's actions, counters and resource evidence
(SD-27..SD-30). A run without a report ended without one (a crash or kill), or is still
running. The report only counts what did not finish; below it, shutdowns names the
attempts settled during the shutdown whose handlers had not returned (abandoned, DL-26),
points at those it left without a settlement (unresolved: redelivered at the next start,
DL-44), and lists the engine's debug records of the shutdown: one per handler that had
not returned when the drain ended, abandoned before the shutdown or during it (code
SHUTDOWN_HANDLER_NOT_RETURNED, subject its job, SD-37), and the close calls that failed
or were abandoned (SD-28).

shutdowns exits 1 when a shutdown it lists did not succeed: its report's completion is
failed or incomplete (SD-30: only graceful_completed and forced_completed are success),
or it began (shutdown_initiated) and no report followed (SD-26: a missing report is
never success; the process ended during the shutdown, SD-36). A checkpoint taken during
a shutdown shows it that way too. A run that never began a shutdown is listed as such
(SD-33) but is not counted: the newest may still be running, and the next run recovers
what a crash left open (DL-44).

Examples:
  qctl -d data shutdowns
  qctl -d data shutdowns --json | tail -n 1`
}

// runView is one run and its shutdown, from the engine stream.
type runView struct {
	RunID     string
	Version   string
	StartSeq  uint64
	StartedAt int64
	Recovered int64

	Initiated *record.ShutdownInitiated
	InitSeq   uint64
	InitAt    int64
	ForcedBy  string
	ForceAt   int64
	Phases    []*phaseView
	Report    *record.ShutdownReport
	ReportSeq uint64
	ReportAt  int64

	// What the shutdown left behind, from its initiation to its report
	// (or the run's end): the attempts whose execution had not returned
	// when they were settled (DL-26), and the engine's debug records
	// (SD-28: failures and abandoned close calls go there, not in the
	// report). An Incomplete report counts them; these name them.
	Abandoned   []abandonedView
	Diagnostics []diagnosticView
}

// abandonedView is the settlement of an attempt whose execution was
// abandoned during a shutdown.
type abandonedView struct {
	Seq     uint64
	At      int64
	Kind    record.Kind
	Job     string
	Token   uint64
	Reason  string
	Scope   string
	Joined  bool
	Cleanup string
	Stream  string
}

// diagnosticView is a debug record of the engine stream.
type diagnosticView struct {
	Seq                    uint64
	At                     int64
	Subject, Code, Message string
}

type phaseView struct {
	Phase            int8
	Name             string
	StartAt, EndAt   int64
	Graceful, Forced string
	Completion       string // phase 6 only (SD-11)
}

// dependencyNames are the entries of ShutdownReport.Dependencies, in
// order (SD-27).
var dependencyNames = []string{"owned-resources", "signal-monitor", "telemetry"}

func dependencyText(bits uint8) string {
	if bits&1 == 0 {
		return "not owned"
	}
	var parts []string
	for i, name := range []string{"owned", "started", "terminal", "succeeded"} {
		if bits&(1<<i) != 0 {
			parts = append(parts, name)
		} else {
			parts = append(parts, "not "+name)
		}
	}
	return strings.Join(parts, " ")
}

func dependencyJSON(bits uint8) object {
	return object{{"owned", bits&1 != 0}, {"started", bits&2 != 0}, {"terminal", bits&4 != 0}, {"succeeded", bits&8 != 0}}
}

func runsOf(x *runCtx, dir string) ([]*runView, string, error) {
	j, err := x.openJournal(dir)
	if err != nil {
		return nil, "", err
	}
	defer j.Close()
	var runs []*runView
	cur := func(r record.Record) *runView {
		if len(runs) == 0 {
			// Shutdown records before any run_started (an older journal).
			runs = append(runs, &runView{RunID: "(before the first run_started)", StartSeq: r.Seq, StartedAt: r.At})
		}
		return runs[len(runs)-1]
	}
	it := j.ScanStream(record.EngineStream, 0)
	defer it.Close()
	for it.Next() {
		r := it.Record()
		switch b := r.Body.(type) {
		case *record.RunStarted:
			runs = append(runs, &runView{RunID: b.RunID, Version: b.Version, StartSeq: r.Seq, StartedAt: b.At, Recovered: b.Recovered})
		case *record.ShutdownInitiated:
			v := cur(r)
			v.Initiated, v.InitSeq, v.InitAt = b, r.Seq, r.At
		case *record.ShutdownForceRequested:
			v := cur(r)
			v.ForcedBy, v.ForceAt = b.Trigger, r.At
		case *record.ShutdownPhaseStarted:
			v := cur(r)
			v.Phases = append(v.Phases, &phaseView{Phase: b.Phase, Name: b.Name, StartAt: r.At})
		case *record.ShutdownPhaseFinished:
			v := cur(r)
			var p *phaseView
			for i := len(v.Phases) - 1; i >= 0; i-- {
				if v.Phases[i].Phase == b.Phase && v.Phases[i].EndAt == 0 {
					p = v.Phases[i]
					break
				}
			}
			if p == nil {
				p = &phaseView{Phase: b.Phase, Name: b.Name}
				v.Phases = append(v.Phases, p)
			}
			p.EndAt, p.Graceful, p.Forced, p.Completion = r.At, b.Graceful, b.Forced, b.Completion
		case *record.ShutdownReport:
			v := cur(r)
			v.Report, v.ReportSeq, v.ReportAt = b, r.Seq, r.At
		case *record.Debug:
			if v := cur(r); v.Initiated != nil && v.Report == nil {
				v.Diagnostics = append(v.Diagnostics, diagnosticView{Seq: r.Seq, At: r.At, Subject: b.Subject, Code: b.Code, Message: b.Message})
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, "", readError(j, err)
	}
	for i, v := range runs {
		if v.Initiated == nil {
			continue
		}
		// To the next run: a settlement whose append was in flight may
		// land after the report.
		end := uint64(math.MaxUint64)
		if i+1 < len(runs) {
			end = runs[i+1].StartSeq
		}
		if err := v.findAbandoned(j, end); err != nil {
			return nil, "", readError(j, err)
		}
	}
	return runs, j.Dir(), nil
}

// findAbandoned collects the settlements from v's initiation to end whose
// execution was abandoned. Records of a stream set aside as damaged are
// skipped: the other commands report that damage.
func (v *runView) findAbandoned(j *journal.Journal, end uint64) error {
	it := j.ScanQuarantining(v.InitSeq, end)
	defer it.Close()
	for it.Next() {
		if it.Damaged() != nil {
			continue
		}
		r := it.Record()
		o := record.OutcomeOf(r.Body)
		if o == nil || o.Execution != executionAbandoned {
			continue
		}
		v.Abandoned = append(v.Abandoned, abandonedView{Seq: r.Seq, At: r.At, Kind: r.Kind(), Job: o.JobID,
			Token: o.Token, Reason: o.Reason, Scope: o.Scope, Joined: o.Joined, Cleanup: o.Cleanup, Stream: r.Stream})
	}
	return it.Err()
}

// executionAbandoned is Outcome.Execution of an attempt whose execution
// had not returned by its cutoff (DL-26), as the engine writes it.
const executionAbandoned = "abandoned"

// verdict says in one line how a run ended.
func (v *runView) verdict(newest bool) string {
	switch {
	case v.Report != nil:
		forced := "not forced"
		if v.Report.Forced {
			forced = "forced"
		}
		return fmt.Sprintf("%s, %s", v.Report.Completion, forced)
	case v.Initiated != nil:
		return "incomplete: shutdown began but published no report (the process ended during it)"
	case newest:
		return "no shutdown yet: still running, or the process ended without one"
	}
	return "no shutdown: the process ended without one (crash or kill)"
}

// The completions of a report that are success (SD-30), as SD-27
// serialises them. qctl reads the journal only, not package shutdown.
const (
	completionGraceful = "graceful_completed"
	completionForced   = "forced_completed"
)

// failure says how v's shutdown did not succeed, or "" if it did or
// none began. A report succeeds only as graceful_completed or
// forced_completed (SD-30); a shutdown that began and published no
// report never succeeds (SD-26).
func (v *runView) failure() string {
	switch {
	case v.Report != nil:
		if c := v.Report.Completion; c != completionGraceful && c != completionForced {
			return fmt.Sprintf("%s (report seq %d)", c, v.ReportSeq)
		}
		return ""
	case v.Initiated != nil:
		return fmt.Sprintf("began at seq %d, no report", v.InitSeq)
	}
	return ""
}

// shutdownFinding is the finding of a listing whose runs include a
// shutdown that did not succeed, or nil.
func shutdownFinding(dir string, runs []*runView) error {
	var failed []*runView
	for _, v := range runs {
		if v.failure() != "" {
			failed = append(failed, v)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	parts := firstFew(len(failed), func(i int) string { return failed[i].RunID + ": " + failed[i].failure() })
	return findingErr("%s: %d shutdown%s did not succeed (%s); only a report that says graceful_completed or forced_completed is success (SD-30)",
		dir, len(failed), plural(len(failed)), strings.Join(parts, ", "))
}

func (c *shutdownsCmd) Run(x *runCtx) error {
	runs, dir, err := runsOf(x, x.dir)
	if err != nil {
		return err
	}
	if err := c.print(x, runs); err != nil {
		return err
	}
	return shutdownFinding(dir, runs)
}

func (c *shutdownsCmd) print(x *runCtx, runs []*runView) error {
	out := x.env.Stdout
	if x.json {
		for i, v := range runs {
			if err := emit(out, v.json(i == len(runs)-1)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(runs) == 0 {
		_, err := fmt.Fprintln(out, "no runs: the journal holds no run_started")
		return err
	}
	for i, v := range runs {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := v.print(x, i == len(runs)-1); err != nil {
			return err
		}
	}
	return nil
}

func (v *runView) print(x *runCtx, newest bool) error {
	out := x.env.Stdout
	pairs := []string{
		"run", fmt.Sprintf("%s (seq %d)", v.RunID, v.StartSeq),
		"started", fmtTime(v.StartedAt),
	}
	if v.Version != "" {
		pairs = append(pairs, "version", v.Version, "recovered", fmt.Sprintf("%d attempts left open by the run before (DL-44)", v.Recovered))
	}
	pairs = append(pairs, "shutdown", v.verdict(newest))
	if s := v.Initiated; s != nil {
		pairs = append(pairs, "trigger", fmt.Sprintf("%s at %s; budget %s (G %s, Hr %s)", s.Trigger, fmtTime(s.StartAt),
			fmtDur(time.Duration(s.TotalNanos)), fmtRel(s.GracefulAt, s.StartAt), fmtRel(s.HardAt, s.StartAt)))
	}
	if v.ForceAt != 0 {
		pairs = append(pairs, "force", fmt.Sprintf("requested by %s at %s", v.ForcedBy, fmtTime(v.ForceAt)))
	}
	if r := v.Report; r != nil {
		pct := ""
		if r.BudgetNanos > 0 {
			pct = fmt.Sprintf(" (%d%%)", r.ElapsedNanos*100/r.BudgetNanos)
		}
		pairs = append(pairs,
			"elapsed", fmt.Sprintf("%s of %s budget%s", fmtDur(time.Duration(r.ElapsedNanos)), fmtDur(time.Duration(r.BudgetNanos)), pct),
			"report", fmt.Sprintf("seq %d at %s", v.ReportSeq, fmtTime(v.ReportAt)),
			"evidence", fmt.Sprintf("coordinator accounted %s, complete %s; runtime joined %s; drain reconciled %s; close reconciled %s",
				yesNo(r.CoordinatorAccounted), yesNo(r.CoordinatorComplete), yesNo(r.RuntimeJoined), yesNo(r.DrainReconciled), yesNo(r.CloseReconciled)),
			"counters", fmt.Sprintf("drained %d, released unstarted %d, released %d, unresolved %d, quarantined %d",
				r.Drained, r.ReleasedUnstarted, r.Released, r.Unresolved, r.Quarantined),
		)
		for i, name := range dependencyNames {
			k := ""
			if i == 0 {
				k = "resources"
			}
			bits := uint8(0)
			if i < len(r.Dependencies) {
				bits = r.Dependencies[i]
			}
			pairs = append(pairs, k, name+": "+dependencyText(bits))
		}
		pairs = append(pairs, "failure code", orDash(r.FailureCode))
	}
	if err := kv(out, pairs...); err != nil {
		return err
	}
	if len(v.Phases) > 0 {
		fmt.Fprintln(out)
		base := v.InitAt
		if v.Initiated != nil {
			base = v.Initiated.StartAt
		}
		t := newTable(out, "PHASE", "NAME", "STARTED", "TOOK", "GRACEFUL", "FORCED")
		for _, p := range v.Phases {
			took := "unfinished"
			if p.EndAt != 0 && p.StartAt != 0 {
				took = fmtDur(time.Duration(p.EndAt - p.StartAt))
			}
			started := ""
			if p.StartAt != 0 {
				started = fmtRel(p.StartAt, base)
			}
			t.row(fmt.Sprint(p.Phase), p.Name, started, took, p.Graceful, p.Forced)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if r := v.Report; r != nil && len(r.ActionComponents) > 0 {
		fmt.Fprintln(out)
		t := newTable(out, "ACTION", "PHASE", "COMPONENT", "GRACEFUL", "FORCED")
		for i, comp := range r.ActionComponents {
			t.row(fmt.Sprint(i+1), fmt.Sprint(at(r.ActionPhases, i)), comp, at(r.ActionGraceful, i), at(r.ActionForced, i))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	base := v.InitAt
	if v.Initiated != nil {
		base = v.Initiated.StartAt
	}
	if len(v.Abandoned) > 0 {
		fmt.Fprintf(out, "\nabandoned attempts: their handler had not returned when they were settled (DL-26)\n")
		t := newTable(out, "SEQ", "AT", "JOB", "TOKEN", "SETTLED AS", "REASON", "SCOPE", "RETURNED", "CLEANUP")
		for _, a := range v.Abandoned {
			t.row(fmt.Sprint(a.Seq), fmtRel(a.At, base), a.Job, fmt.Sprint(a.Token), a.Kind.String(), orDash(a.Reason),
				orDash(a.Scope), yesNo(a.Joined), orDash(a.Cleanup))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if r := v.Report; r != nil && r.Unresolved > 0 {
		fmt.Fprintf(out, "\n%d attempt%s left without a settlement (unresolved): the next start delivers %s again (DL-44);\n"+
			"until then, qctl jobs --status processing names %s\n", r.Unresolved, plural(int(r.Unresolved)),
			pick(r.Unresolved == 1, "it", "them"), pick(r.Unresolved == 1, "its job", "their jobs"))
	}
	if len(v.Diagnostics) > 0 {
		fmt.Fprintf(out, "\ndiagnostics (debug records)\n")
		t := newTable(out, "SEQ", "AT", "SUBJECT", "CODE", "MESSAGE")
		for _, d := range v.Diagnostics {
			t.row(fmt.Sprint(d.Seq), fmtRel(d.At, base), d.Subject, d.Code, truncate(d.Message, diagnosticMessageMax))
		}
		return t.flush()
	}
	return nil
}

// diagnosticMessageMax bounds a debug record's message in the text
// listing: shutdown.DiagnosticBytesMax, the bound the engine clips a
// diagnostic's message to, so that every message it writes is shown
// whole. A straggler's (SD-37) runs past 100 bytes: its handler's name
// (a step handler's takes up to 206 bytes), attempt, token, whether it
// was abandoned, and when it started. The message is the table's last
// column: its length moves no other column.
const diagnosticMessageMax = 1024

func at[T any](s []T, i int) T {
	var zero T
	if i < len(s) {
		return s[i]
	}
	return zero
}

func (v *runView) json(newest bool) object {
	o := object{
		{"type", "run"}, {"run_id", v.RunID}, {"version", v.Version}, {"start_seq", v.StartSeq},
		{"started_at", jsonTime(v.StartedAt)}, {"recovered", v.Recovered}, {"verdict", v.verdict(newest)},
	}
	if s := v.Initiated; s != nil {
		o = append(o, member{"shutdown", object{
			{"trigger", s.Trigger}, {"start", jsonTime(s.StartAt)}, {"total_ns", s.TotalNanos},
			{"g", jsonTime(s.GracefulAt)}, {"hr", jsonTime(s.HardAt)},
		}})
	}
	if v.ForceAt != 0 {
		o = append(o, member{"force", object{{"trigger", v.ForcedBy}, {"at", jsonTime(v.ForceAt)}}})
	}
	phases := make([]object, 0, len(v.Phases))
	for _, p := range v.Phases {
		po := object{{"phase", p.Phase}, {"name", p.Name}, {"started_at", jsonTime(p.StartAt)}, {"finished_at", jsonTime(p.EndAt)},
			{"graceful", p.Graceful}, {"forced", p.Forced}}
		if p.Completion != "" {
			po = append(po, member{"completion", p.Completion})
		}
		phases = append(phases, po)
	}
	o = append(o, member{"phases", phases})
	if v.Initiated != nil {
		abandoned := make([]object, 0, len(v.Abandoned))
		for _, a := range v.Abandoned {
			abandoned = append(abandoned, object{{"seq", a.Seq}, {"at", jsonTime(a.At)}, {"stream", a.Stream}, {"job_id", a.Job},
				{"token", a.Token}, {"kind", a.Kind.String()}, {"reason", a.Reason}, {"scope", a.Scope},
				{"joined", a.Joined}, {"cleanup", a.Cleanup}})
		}
		diags := make([]object, 0, len(v.Diagnostics))
		for _, d := range v.Diagnostics {
			diags = append(diags, object{{"seq", d.Seq}, {"at", jsonTime(d.At)}, {"subject", d.Subject}, {"code", d.Code}, {"message", d.Message}})
		}
		o = append(o, member{"abandoned", abandoned}, member{"diagnostics", diags})
	}
	if r := v.Report; r != nil {
		deps := object{}
		for i, name := range dependencyNames {
			deps = append(deps, member{name, dependencyJSON(at(r.Dependencies, i))})
		}
		actions := make([]object, 0, len(r.ActionComponents))
		for i, comp := range r.ActionComponents {
			actions = append(actions, object{{"phase", at(r.ActionPhases, i)}, {"component", comp},
				{"graceful", at(r.ActionGraceful, i)}, {"forced", at(r.ActionForced, i)}})
		}
		o = append(o, member{"report", object{
			{"seq", v.ReportSeq}, {"completion", r.Completion}, {"forced", r.Forced}, {"trigger", r.Trigger},
			{"initiated_at", jsonTime(r.InitiatedAt)}, {"budget_ns", r.BudgetNanos}, {"elapsed_ns", r.ElapsedNanos},
			{"coordinator_accounted", r.CoordinatorAccounted}, {"coordinator_complete", r.CoordinatorComplete},
			{"runtime_joined", r.RuntimeJoined}, {"drain_reconciled", r.DrainReconciled}, {"close_reconciled", r.CloseReconciled},
			{"dependencies", deps}, {"actions", actions},
			{"drained", r.Drained}, {"released_unstarted", r.ReleasedUnstarted}, {"released", r.Released},
			{"unresolved", r.Unresolved}, {"quarantined", r.Quarantined}, {"failure_code", r.FailureCode},
		}})
	}
	return o
}

// pick returns a if cond, else b.
func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}
