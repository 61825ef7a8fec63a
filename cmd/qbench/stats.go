package main

import (
	"bytes"
	"encoding/json"
	"math"
	"runtime/metrics"
	"slices"
	"time"
)

// obj is a JSON object that keeps its keys in insertion order, so that
// every line reads workload first and figures after.
type obj struct {
	keys []string
	vals map[string]any
}

func newObj(kv ...any) *obj {
	o := &obj{vals: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		o.set(kv[i].(string), kv[i+1])
	}
	return o
}

func (o *obj) set(k string, v any) *obj {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

func (o *obj) num(k string) float64 {
	switch v := o.vals[k].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	}
	return math.NaN()
}

func (o *obj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		vb, err := json.Marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// medianObj merges the results of several runs of one measurement: every
// float figure becomes the median of its values over the runs, other
// values are taken from the first run. per lists the run values of key.
func medianObj(runs []*obj, key string) *obj {
	if len(runs) == 1 {
		return runs[0]
	}
	out := &obj{vals: map[string]any{}}
	for _, k := range runs[0].keys {
		v := runs[0].vals[k]
		if _, isFloat := v.(float64); isFloat {
			xs := make([]float64, 0, len(runs))
			for _, r := range runs {
				xs = append(xs, r.num(k))
			}
			out.set(k, round(median(xs), 4))
			continue
		}
		out.set(k, v)
	}
	out.set("runs", len(runs))
	out.set("per_run_"+key, perRun(runs, key))
	return out
}

// perRun lists key's value in each run, in run order.
func perRun(runs []*obj, key string) []float64 {
	per := make([]float64, 0, len(runs))
	for _, r := range runs {
		per = append(per, r.num(key))
	}
	return per
}

// gcCycles returns the number of GC cycles the process has completed.
func gcCycles() float64 { return runtimeCounter("/gc/cycles/total:gc-cycles") }

// heapAllocs returns the bytes the process has allocated on the heap so far.
func heapAllocs() float64 { return runtimeCounter("/gc/heap/allocs:bytes") }

// runtimeCounter reads the cumulative runtime/metrics counter name, 0 if
// this Go release does not report it.
func runtimeCounter(name string) float64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile returns the p-th percentile (0..100) of sorted durations, by
// nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	r := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	r = max(0, min(r, len(sorted)-1))
	return sorted[r]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
