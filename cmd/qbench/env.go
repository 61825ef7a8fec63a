package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// envObj describes the machine at one moment of the run: figures taken
// while other processes compete for the CPUs or the disk are not
// comparable with quiet ones, and the load average and the kernel's
// pressure stall information (Linux PSI: the share of the last 10 s in
// which some runnable task waited for a CPU, or for I/O) say which it was.
func envObj(when string) *obj {
	o := newObj("workload", "env", "when", when, "go", runtime.Version(),
		"gomaxprocs", runtime.GOMAXPROCS(0), "num_cpu", runtime.NumCPU())
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				o.set("loadavg_1m", v)
			}
		}
	}
	for _, res := range []string{"cpu", "io"} {
		if v, ok := pressure(res); ok {
			o.set(res+"_pressure_some_avg10", v)
		}
	}
	return o
}

// pressure returns the "some avg10" figure of /proc/pressure/<res>.
func pressure(res string) (float64, bool) {
	b, err := os.ReadFile("/proc/pressure/" + res)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "avg10="); ok {
				x, err := strconv.ParseFloat(v, 64)
				return x, err == nil
			}
		}
	}
	return 0, false
}
