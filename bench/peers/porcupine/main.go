// Porcupine (github.com/anishathalye/porcupine) as a peer of Leaseline's checker in
// bench/bench_search.py: reads the histories the bench exported (JSON), checks each
// with a cas-register model of Leaseline's semantics, prints one JSON line per case.
//
//	go run . -in cases.json -timeout 120s
//
// Semantics, as Leaseline's checker has them (checkers/models.py, checkers/ops.py):
// values are canonical JSON text or absent; read returns the state; write sets it;
// cas (ok) requires state == expected and sets the value; a failed cas requires
// state != expected and changes nothing; an info write or cas (outcome unknown) has
// Return = MaxInt64 and may take effect at any point after its call, or never (an
// info cas whose compare does not match is a no-op, the same as not happening).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	opRead      = 0
	opWrite     = 1
	opCas       = 2
	opCasFailed = 3
)

// absent stands for "no value" (JSON null): no canonical JSON text looks like it.
const absent = "\x00absent"

type jsonOp struct {
	F        int     `json:"f"`
	Value    *string `json:"value"`
	Expected *string `json:"expected"`
	Call     int64   `json:"call"`
	Return   *int64  `json:"return"` // null: outcome unknown (info)
	Client   int     `json:"client"`
}

type jsonCase struct {
	Name    string   `json:"name"`
	Initial *string  `json:"initial"`
	Ops     []jsonOp `json:"ops"`
}

type input struct {
	f        int
	value    string
	expected string
	info     bool
}

func text(s *string) string {
	if s == nil {
		return absent
	}
	return *s
}

func casRegister(initial string) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return initial },
		Step: func(state, in, _ interface{}) (bool, interface{}) {
			s := state.(string)
			op := in.(input)
			switch op.f {
			case opRead:
				return s == op.value, s
			case opWrite:
				return true, op.value
			case opCas:
				if s == op.expected {
					return true, op.value
				}
				return op.info, s // an info cas that does not match: no effect
			default: // failed cas
				return s != op.expected, s
			}
		},
	}
}

// cpuSeconds is this process's CPU time so far (user and system, all threads).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// peakRSS is this process's peak resident set (VmHWM) in MB, -1 where unknown.
func peakRSS() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(line[6:]), "%f", &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

func main() {
	in := flag.String("in", "", "JSON file with the cases")
	prefix := flag.String("prefix", "", "check only the cases whose name starts so")
	timeout := flag.Duration("timeout", 120*time.Second, "per-case limit (0: none)")
	flag.Parse()
	data, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "porcupine peer:", err)
		os.Exit(2)
	}
	var cases []jsonCase
	if err := json.Unmarshal(data, &cases); err != nil {
		fmt.Fprintln(os.Stderr, "porcupine peer: bad input:", err)
		os.Exit(2)
	}
	data = nil
	out := json.NewEncoder(os.Stdout)
	for _, c := range cases {
		if !strings.HasPrefix(c.Name, *prefix) {
			continue
		}
		ops := make([]porcupine.Operation, len(c.Ops))
		for i, o := range c.Ops {
			ret := int64(math.MaxInt64)
			if o.Return != nil {
				ret = *o.Return
			}
			ops[i] = porcupine.Operation{
				ClientId: o.Client,
				Input:    input{o.F, text(o.Value), text(o.Expected), o.Return == nil},
				Call:     o.Call,
				Return:   ret,
			}
		}
		// the least of up to 5 runs while they take under 10 ms (small times are mostly
		// cache and scheduler noise); the Leaseline side times the same way
		// CPU time too (the process's, its collector included): on a loaded machine wall
		// time mostly measures the other jobs
		var res porcupine.CheckResult
		secs, cpu := math.Inf(1), math.Inf(1)
		for k := 0; k < 5 && secs < 0.01 || k == 0; k++ {
			runtime.GC()
			c0 := cpuSeconds()
			start := time.Now()
			res = porcupine.CheckOperationsTimeout(casRegister(text(c.Initial)), ops, *timeout)
			secs = math.Min(secs, time.Since(start).Seconds())
			cpu = math.Min(cpu, cpuSeconds()-c0)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		verdict := map[porcupine.CheckResult]string{
			porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown",
		}[res]
		_ = out.Encode(map[string]interface{}{
			"name": c.Name, "result": verdict, "seconds": secs, "cpu_seconds": cpu,
			"heap_sys_mb": float64(ms.HeapSys) / (1 << 20), "peak_rss_mb": peakRSS(),
		})
	}
}
